defmodule CMDC.Tool.SearchTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Registry, Runner}
  alias CMDC.Tool.Test.Factory

  doctest CMDC.Tool.Search

  defmodule ReadOnlyTool do
    @behaviour CMDC.Tool
    def name, do: "fs__stat_file"
    def title, do: "File metadata"
    def description, do: "Show size and modification time of a path."
    def parameters, do: %{"type" => "object", "properties" => %{"path" => %{"type" => "string"}}}
    def annotations, do: %{read_only: true}
    def tool_options, do: [namespace: "fs"]
    def execute(_args, _ctx), do: {:ok, "ok"}
  end

  defp catalog do
    [
      Factory.tool("fs__write_file", "Create or overwrite a file with new content.", %{
        "type" => "object",
        "properties" => %{"path" => %{"type" => "string"}, "content" => %{"type" => "string"}}
      }),
      Factory.tool("git__git_commit", "Record changes to the repository.", %{
        "type" => "object",
        "properties" => %{"message" => %{"type" => "string", "description" => "Commit message"}}
      }),
      Factory.tool("weather__get_forecast", "Get the weather forecast for a location.", %{
        "type" => "object",
        "properties" => %{
          "latitude" => %{"type" => "number"},
          "longitude" => %{"type" => "number"}
        }
      }),
      ReadOnlyTool
    ]
  end

  defp registry do
    reg = Registry.new()
    :ok = Registry.register(reg, catalog())
    reg
  end

  defp names({:ok, hits}), do: Enum.map(hits, &elem(&1, 0))
  defp names_of(namespace), do: Enum.map(namespace["tools"], & &1["name"])

  test "ranks by what the words mean to a user, with scores best first" do
    reg = registry()
    assert [{"git__git_commit", score} | _] = ok(Registry.search(reg, "commit my changes"))
    assert is_float(score) and score > 0
    assert hd(names(Registry.search(reg, "forecast for Paris"))) == "weather__get_forecast"
    # Parameter descriptions and the title are read too.
    assert hd(names(Registry.search(reg, "commit message"))) == "git__git_commit"
    assert hd(names(Registry.search(reg, "file metadata"))) == "fs__stat_file"
    assert names(Registry.search(reg, "zebra quantum")) == []
  end

  test "filters by namespace (the one rule to_schema groups by) and by annotation" do
    reg = registry()

    # fs__stat_file says it is in fs (tool_options/0); fs__write_file only has the prefix in its
    # name, which is no namespace: neither for search nor for to_schema (issue 40 item 10).
    assert names(Registry.search(reg, "file", namespace: "fs")) == ["fs__stat_file"]
    grouped = CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: true)

    assert [{"fs", ["stat_file"]}] ==
             for(%{"type" => "namespace"} = n <- grouped, do: {n["name"], names_of(n)})

    assert names(Registry.search(reg, "file", namespace: ["git", "weather"])) == []
    assert names(Registry.search(reg, "file", annotations: [:read_only])) == ["fs__stat_file"]
    assert names(Registry.search(reg, "file", annotations: ["readOnlyHint"])) == ["fs__stat_file"]
  end

  test "follows registrations, unregistrations and replacements at once" do
    reg = registry()
    new = Factory.tool("mail__send_email", "Send an email to a recipient.")
    assert names(Registry.search(reg, "send an email")) == []
    :ok = Registry.register(reg, new)
    assert names(Registry.search(reg, "send an email")) == ["mail__send_email"]
    :ok = Registry.unregister(reg, "mail__send_email")
    assert names(Registry.search(reg, "send an email")) == []
    :ok = Registry.replace(reg, [new])
    assert names(Registry.search(reg, "email")) == ["mail__send_email"]
    assert names(Registry.search(reg, "commit")) == []
  end

  test "regex mode: name matches first, bounded patterns" do
    reg = registry()

    assert names(Registry.search(reg, "^fs__", mode: :regex, limit: 10)) |> Enum.sort() ==
             ["fs__stat_file", "fs__write_file"]

    assert {:error, message} = Registry.search(reg, "(unclosed", mode: :regex)
    assert message =~ "not accepted"
    assert {:error, message} = Registry.search(reg, String.duplicate("a", 201), mode: :regex)
    assert message =~ "at most 200"
    # Catastrophic for a backtracking engine; linear here.
    assert {:ok, _} = Registry.search(reg, "(a+)+$", mode: :regex)
  end

  test "bad input: empty and 10 kB queries, bad options, an empty registry" do
    reg = registry()
    assert {:error, "the search query is empty" <> _} = Registry.search(reg, "")
    assert {:error, message} = Registry.search(reg, String.duplicate("word ", 2_048))
    assert message =~ "at most 4096"
    assert {:error, "limit:" <> _} = Registry.search(reg, "file", limit: 0)
    assert {:error, "mode:" <> _} = Registry.search(reg, "file", mode: :fuzzy)
    assert {:error, "the search query is not UTF-8 text"} = Registry.search(reg, <<0xFF>>)
    assert Registry.search(Registry.new(), "read a file") == {:ok, []}
    assert Registry.search(Registry.new(), ".*", mode: :regex) == {:ok, []}
  end

  test "a tool removed between search and call is a clear unknown-tool result" do
    reg = registry()
    assert "weather__get_forecast" in names(Registry.search(reg, "weather"))
    :ok = Registry.unregister(reg, "weather__get_forecast")
    call = %{id: "1", name: "weather__get_forecast", arguments: %{"latitude" => 1}}
    result = Runner.run(reg, call, %CMDC.Context{})
    assert result.is_error and result.reason == :unknown_tool
  end

  test "a search too big for a normal scheduler runs on a dirty one and finds the right one" do
    reg = Registry.new()

    tools =
      Factory.tools(
        for i <- 1..2_500, do: {"tool_#{i}", "Reads record #{i} from the file store."}
      )

    :ok = Registry.register(reg, tools)
    # A regex reads every tool's text: over a normal scheduler's budget at this size.
    opts = %{mode: :regex, limit: 5, namespaces: [], annotations: [], vector: nil}
    assert CMDC.Tool.Native.registry_search(reg.ref, "record", opts) == {:error, :yield}
    assert {:ok, [{"tool_1234", _}]} = Registry.search(reg, "record 1234 ", mode: :regex)
    assert {:ok, hits} = Registry.search(reg, "file", limit: 3)
    assert length(hits) == 3
    assert [{"tool_1234", _} | _] = ok(Registry.search(reg, "record 1234"))
  end

  defp ok({:ok, hits}), do: hits
end
