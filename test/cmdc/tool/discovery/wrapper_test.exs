defmodule CMDC.Tool.Discovery.WrapperTest do
  # A tool's metadata settings (`policy`, `timeout`) and its own policy must hold wherever its
  # module goes: a plain list as the CLI and the MCP server hold, not only a registry.
  use ExUnit.Case, async: false

  alias CMDC.Tool.{Discovery, Runner}

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_wrapper_#{System.unique_integer([:positive])}")
    tools = Path.join(root, "tools")
    File.mkdir_p!(Path.join(root, "proj"))
    File.mkdir_p!(tools)
    on_exit(fn -> File.rm_rf!(root) end)
    opts = [home: root, cwd: Path.join(root, "proj"), cmdc_home: nil, paths: [tools]]
    %{tools: tools, opts: opts, tag: "w#{System.unique_integer([:positive])}"}
  end

  defp python_tool(dir, name, policy_line) do
    File.write!(Path.join(dir, "#{name}.py"), """
    def #{name}(text: str) -> str:
        \"\"\"Echo the text.

        Args:
            text: what to echo
        \"\"\"
        return "said " + text
    #{policy_line}
    """)
  end

  defp run(tools, name) do
    call = %{id: "1", name: name, arguments: %{"text" => "hi"}}
    Runner.run(tools, call, CMDC.Context.new(session_id: "wrapper-test"), [])
  end

  defp discover(opts) do
    report = Discovery.discover(opts)
    assert report.errors == []
    report.tools
  end

  test "a metadata policy holds in a plain tool list (the CLI's and MCP server's)", c do
    name = "#{c.tag}_meta"
    python_tool(c.tools, name, "")
    # Without metadata a Python tool asks, and with no approver that is a refusal.
    [tool] = discover(c.opts)
    assert %{is_error: true, content: refusal} = run([tool.module], name)
    assert refusal =~ "approv"
    # A runner caller is told its own way too, not only the CLI's flag and the script's line.
    assert refusal =~
             "pass `policies: %{\"#{name}\" => :auto}` (or an `approver:`) to CMDC.Tool.Runner"

    assert refusal =~ "executionPolicy"

    File.write!(Path.join(c.tools, "#{name}.json"), ~s({"policy": "auto", "timeout": 4000}))
    [tool] = discover(c.opts)
    assert %{policy: :auto, timeout_ms: 4000} = Runner.settings([tool.module], tool.module, name)
    assert %{is_error: false, content: "said hi"} = run([tool.module], name)
  end

  test "renaming or re-describing a tool keeps the policy its script declares", c do
    name = "#{c.tag}_deny"
    python_tool(c.tools, name, "#{name}.executionPolicy = \"deny\"")
    File.write!(Path.join(c.tools, "#{name}.json"), ~s({"name": "#{c.tag}_renamed"}))
    File.write!(Path.join(c.tools, "#{name}.md"), "Re-described.\n")

    [tool] = discover(c.opts)
    assert tool.module.name() == "#{c.tag}_renamed"
    assert tool.module.description() == "Re-described."

    assert %{policy: :deny} = Runner.settings([tool.module], tool.module, "#{c.tag}_renamed")

    assert %{is_error: true} = run([tool.module], "#{c.tag}_renamed")

    # Called by its old name: the model is told the new one.
    assert %{reason: :unknown_tool, content: content} = run([tool.module], name)

    assert content ==
             "Unknown tool: #{name}. It was renamed to #{c.tag}_renamed by its metadata: " <>
               "call #{c.tag}_renamed."

    registry = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(registry, tool.module)
    assert CMDC.Tool.unknown_tool_message(registry, name) == content
  end

  test "an Elixir tool's tool_options survive a rename; metadata overrides a key", c do
    name = "#{c.tag}_ex"
    module = "WrapperTest#{c.tag}.Ex"

    File.write!(Path.join(c.tools, "ex.ex"), """
    defmodule #{module} do
      @behaviour CMDC.Tool
      def name, do: #{inspect(name)}
      def description, do: "An Elixir tool."
      def parameters, do: %{"type" => "object"}
      def execute(_args, _ctx), do: {:ok, "ran"}
      def tool_options, do: [policy: :deny, timeout: 1234]
    end
    """)

    File.write!(Path.join(c.tools, "ex.json"), ~s({"name": "#{c.tag}_ex2", "timeout": 99}))
    [tool] = discover(c.opts)
    settings = Runner.settings([tool.module], tool.module, "#{c.tag}_ex2")
    assert %{policy: :deny, timeout_ms: 99} = settings
  end
end
