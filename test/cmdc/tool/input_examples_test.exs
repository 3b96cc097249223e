defmodule CMDC.Tool.InputExamplesTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Registry}

  doctest CMDC.Tool.InputExamples

  defmodule Search do
    @behaviour CMDC.Tool
    def name, do: "web.search"
    def description, do: "Search the web."

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{
          "q" => %{"type" => "string"},
          "max" => %{"type" => "integer", "minimum" => 1}
        },
        "required" => ["q"]
      }

    def examples, do: [%{"q" => "elixir nif"}, %{"q" => "rust", "max" => 3}]
    def execute(_args, _ctx), do: {:ok, ""}
  end

  defmodule BadExamples do
    @behaviour CMDC.Tool
    def name, do: "bad_examples"
    def description, do: "Has a wrong example."
    def parameters, do: Search.parameters()
    def examples, do: [%{"q" => "ok"}, %{"q" => "x", "max" => 0}]
    def execute(_args, _ctx), do: {:ok, ""}
  end

  test "examples are checked at registration: an invalid one names the tool and the error" do
    reg = Registry.new()

    assert {:error, {:invalid_tool, BadExamples, message}} =
             Registry.register(reg, [Search, BadExamples])

    assert message =~ ~s(example 2 of tool "bad_examples" does not match its parameters: at /max)
    assert Registry.size(reg) == 0
    assert :ok = Registry.register(reg, Search)
  end

  test "Anthropic output carries input_examples, from a registry and from a module list" do
    reg = Registry.new()
    :ok = Registry.register(reg, [Search, CMDC.Tool.Examples.Echo])
    [search, echo] = CMDC.Tool.to_schema(reg, %{}, format: :anthropic)
    assert search["name"] == "web_search"
    assert search["input_examples"] == Search.examples()
    refute Map.has_key?(echo, "input_examples")
    assert JSON.decode!(CMDC.Tool.to_schema_json(reg, %{}, format: :anthropic)) == [search, echo]
    assert CMDC.Tool.to_schema([Search], %{}, format: :anthropic) == [search]
    # Other formats have no such field.
    refute CMDC.Tool.to_schema(reg, %{}, format: :mcp) |> hd() |> Map.has_key?("input_examples")
  end

  test "the Anthropic SDK type accepts the output" do
    python = CMDC.Tool.TestCache.dir("provider_check_venv") |> Path.join("bin/python")

    if File.exists?(python) do
      [tool] = CMDC.Tool.to_schema([Search], %{}, format: :anthropic)
      cases = [%{id: "search", kind: "anthropic_tool", value: tool}]

      path =
        Path.join(System.tmp_dir!(), "examples_check_#{System.unique_integer([:positive])}.json")

      File.write!(path, JSON.encode!(cases))
      checker = Path.expand("../../support/deferred_check.py", __DIR__)
      {out, 0} = System.cmd(python, [checker, path])
      File.rm(path)
      assert JSON.decode!(out) == %{"checked" => 1, "failures" => []}
    else
      IO.puts("\nskipped: #{python} is absent (provider_packages_test.exs creates it)")
    end
  end
end
