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

  test "providers without input_examples get an Examples block in the description; Anthropic does not" do
    block = ~s(Search the web.\n\nExamples:\n{"q":"elixir nif"}\n{"max":3,"q":"rust"})
    reg = Registry.new()
    :ok = Registry.register(reg, [Search, CMDC.Tool.Examples.Echo])

    for source <- [[Search, CMDC.Tool.Examples.Echo], reg] do
      [chat, _] = CMDC.Tool.to_schema(source, %{}, format: :openai)
      assert chat["function"]["description"] == block
      [responses, _] = CMDC.Tool.to_schema(source, %{}, format: :openai_responses)
      assert responses["description"] == block
      [mcp, echo] = CMDC.Tool.to_schema(source, %{}, format: :mcp)
      assert mcp["description"] == block
      assert echo["description"] == CMDC.Tool.Examples.Echo.description()

      for format <- [:gemini, :gemini_json_schema] do
        [%{"functionDeclarations" => [gemini, _]}] =
          CMDC.Tool.to_schema(source, %{}, format: format)

        assert gemini["description"] == block
      end

      [anthropic, _] = CMDC.Tool.to_schema(source, %{}, format: :anthropic)
      assert anthropic["description"] == "Search the web."

      for format <- [:openai, :mcp, :gemini, :anthropic] do
        assert JSON.decode!(CMDC.Tool.to_schema_json(source, %{}, format: format)) ==
                 CMDC.Tool.to_schema(source, %{}, format: format)
      end
    end
  end

  defmodule ManyExamples do
    @behaviour CMDC.Tool
    def name, do: "many_examples"
    def description, do: "Has many examples."
    def parameters, do: Search.parameters()

    def examples,
      do: [%{"q" => String.duplicate("long ", 100)} | for(i <- 1..5, do: %{"q" => "q#{i}"})]

    def execute(_args, _ctx), do: {:ok, ""}
  end

  test "the description block is capped: three examples, none over 300 characters" do
    [tool] = CMDC.Tool.to_schema([ManyExamples], %{}, format: :openai_responses)

    assert tool["description"] ==
             ~s(Has many examples.\n\nExamples:\n{"q":"q1"}\n{"q":"q2"}\n{"q":"q3"})

    [anthropic] = CMDC.Tool.to_schema([ManyExamples], %{}, format: :anthropic)
    assert length(anthropic["input_examples"]) == 6
  end

  describe "from a discovered tool's metadata" do
    setup do
      root = Path.join(System.tmp_dir!(), "cmdc_examples_#{System.unique_integer([:positive])}")
      on_exit(fn -> File.rm_rf!(root) end)
      home = Path.join(root, "home")
      File.mkdir_p!(Path.join(root, "proj"))
      p = "ExT#{System.unique_integer([:positive])}"
      opts = [home: home, cwd: Path.join(root, "proj"), cmdc_home: nil, trust_project: true]
      %{dir: Path.join(home, ".cmdc/tools"), p: p, opts: opts}
    end

    defp put(dir, name, text) do
      File.mkdir_p!(dir)
      File.write!(Path.join(dir, name), text)
    end

    defp tool_source(module, name) do
      """
      defmodule #{module} do
        @behaviour CMDC.Tool
        def name, do: #{inspect(name)}
        def description, do: "Finds things."
        def parameters,
          do: %{"type" => "object", "properties" => %{"q" => %{"type" => "string"}, "max" => %{"type" => "integer"}}, "required" => ["q"]}
        def execute(_args, _ctx), do: {:ok, "found"}
      end
      """
    end

    test ".md front matter and .json examples reach examples/0 and the providers; bad ones name the tool",
         c do
      for stem <- ~w(md json per_tool bad_md bad_json bad_md_text),
          do: put(c.dir, "#{stem}.ex", tool_source("#{c.p}.T_#{stem}", "#{c.p}_#{stem}"))

      put(c.dir, "md.md", """
      ---
      title: Find
      examples:
        - {"q": "elixir"}
        - {"q": "rust", "max": 3}
      ---
      Finds things by query.
      """)

      put(c.dir, "json.json", ~s({"examples": [{"q": "from json"}]}))

      put(
        c.dir,
        "per_tool.json",
        ~s({"tools": {"#{c.p}_per_tool": {"examples": [{"q": "one"}]}}})
      )

      put(c.dir, "bad_md.md", "---\nexamples: [{\"q\": \"ok\"}, {\"max\": 2}]\n---\nBad.\n")
      put(c.dir, "bad_json.json", ~s({"examples": {"q": "not a list"}}))
      put(c.dir, "bad_md_text.md", "---\nexamples:\n  - q: yaml, not json\n---\nBad.\n")

      report = CMDC.Tool.Discovery.discover(c.opts)
      tools = Map.new(report.tools, &{&1.name, &1.module})

      assert Map.keys(tools) |> Enum.sort() ==
               Enum.sort(["#{c.p}_md", "#{c.p}_json", "#{c.p}_per_tool"])

      assert tools["#{c.p}_md"].examples() == [%{"q" => "elixir"}, %{"q" => "rust", "max" => 3}]
      assert tools["#{c.p}_md"].description() == "Finds things by query."
      assert tools["#{c.p}_json"].examples() == [%{"q" => "from json"}]
      assert tools["#{c.p}_per_tool"].examples() == [%{"q" => "one"}]
      # The examples are not settings.
      assert Enum.all?(report.tools, &(not Map.has_key?(&1.settings, "examples")))

      errors = Map.new(report.errors, &{&1.name, &1})
      assert errors["#{c.p}_bad_md"].type == :bad_metadata

      assert errors["#{c.p}_bad_md"].reason =~
               ~s(example 2 of tool "#{c.p}_bad_md" does not match its parameters: at : )

      assert errors["#{c.p}_bad_md"].reason =~ "bad_md.md"
      assert errors["#{c.p}_bad_json"].reason =~ ~s("examples" must be a list of argument objects)

      assert errors["#{c.p}_bad_md_text"].reason =~
               ~s(example 1 of tool "#{c.p}_bad_md_text" is not an object: "q: yaml, not json")

      reg = Registry.new()
      :ok = Registry.register(reg, Map.values(tools))
      anthropic = Map.new(CMDC.Tool.to_schema(reg, %{}, format: :anthropic), &{&1["name"], &1})
      assert anthropic["#{c.p}_md"]["input_examples"] == tools["#{c.p}_md"].examples()
      [mcp] = CMDC.Tool.to_schema([tools["#{c.p}_json"]], %{}, format: :mcp)
      assert mcp["description"] == ~s(Finds things.\n\nExamples:\n{"q":"from json"})
    end
  end

  test "each provider's SDK type accepts the output with examples" do
    python = CMDC.Tool.TestCache.dir("provider_check_venv") |> Path.join("bin/python")

    if File.exists?(python) do
      [tool] = CMDC.Tool.to_schema([Search], %{}, format: :anthropic)
      [chat] = CMDC.Tool.to_schema([Search], %{}, format: :openai)
      [responses] = CMDC.Tool.to_schema([Search], %{}, format: :openai_responses)

      [%{"functionDeclarations" => [gemini]}] =
        CMDC.Tool.to_schema([Search], %{}, format: :gemini)

      [mcp] = CMDC.Tool.to_schema([Search], %{}, format: :mcp)

      cases = [
        %{id: "search", kind: "anthropic_tool", value: tool},
        %{id: "chat", kind: "openai_chat", value: chat},
        %{id: "responses", kind: "openai_responses_function", value: responses},
        %{id: "gemini", kind: "gemini_decl", value: gemini},
        %{id: "mcp", kind: "mcp_tool", value: mcp}
      ]

      path =
        Path.join(System.tmp_dir!(), "examples_check_#{System.unique_integer([:positive])}.json")

      File.write!(path, JSON.encode!(cases))
      checker = Path.expand("../../../support/deferred_check.py", __DIR__)
      {out, 0} = System.cmd(python, [checker, path])
      File.rm(path)
      assert JSON.decode!(out) == %{"checked" => 5, "failures" => []}
    else
      IO.puts("\nskipped: #{python} is absent (provider_packages_test.exs creates it)")
    end
  end
end
