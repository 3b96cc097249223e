defmodule CMDC.Tool.DiscoverySafetyTest do
  # Discovery never blocks on a special file, and never runs a tool file's functions in the
  # host: a tool calling System.halt/0 in name/0 is discovered on a real peer node, which must
  # survive.
  use ExUnit.Case, async: false

  alias CMDC.Tool.Discovery

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_disc_safety_#{System.unique_integer([:positive])}")
    File.mkdir_p!(Path.join(root, "proj"))
    File.mkdir_p!(Path.join(root, "tools"))
    on_exit(fn -> File.rm_rf!(root) end)
    prefix = "DiscSafe#{System.unique_integer([:positive])}"

    opts = [
      home: root,
      cwd: Path.join(root, "proj"),
      cmdc_home: nil,
      paths: [Path.join(root, "tools")]
    ]

    %{root: root, tools: Path.join(root, "tools"), prefix: prefix, opts: opts}
  end

  defp tool(module, name, body \\ "") do
    """
    defmodule #{module} do
      @behaviour CMDC.Tool
      def name, do: #{name}
      def description, do: "A tool."
      def parameters, do: %{"type" => "object"}
      def execute(_args, _ctx), do: {:ok, "ran"}
      #{body}
    end
    """
  end

  defp mkfifo(path) do
    {_, 0} = System.cmd("mkfifo", [path])
    path
  end

  test "FIFOs named like a tool or its metadata are reported, never opened", c do
    p = c.prefix
    File.write!(Path.join(c.tools, "a.ex"), tool("#{p}.A", inspect("#{p}_a")))
    mkfifo(Path.join(c.tools, "a.json"))
    File.write!(Path.join(c.tools, "b.ex"), tool("#{p}.B", inspect("#{p}_b")))
    mkfifo(Path.join(c.tools, "b.md"))
    mkfifo(Path.join(c.tools, "f.ex"))
    File.write!(Path.join(c.tools, "ok.ex"), tool("#{p}.Ok", inspect("#{p}_ok")))

    task = Task.async(fn -> Discovery.discover(c.opts) end)
    report = Task.yield(task, 60_000) || Task.shutdown(task)
    assert {:ok, report} = report, "discover/1 blocked on a FIFO"

    assert Enum.map(report.tools, & &1.name) == ["#{p}_ok"]
    reasons = Map.new(report.errors ++ report.ignored, &{Path.basename(&1.path), &1.reason})

    for {file, about} <- [{"a.ex", "a.json"}, {"b.ex", "b.md"}, {"f.ex", "f.ex"}] do
      assert reasons[file] =~ about
      assert reasons[file] =~ "FIFO (named pipe), not a regular file; not opened"
    end
  end

  test "name, description and parameters are read in the compiler VM, not in the host", c do
    p = c.prefix

    # Each marks the VM it runs in; the host must stay unmarked.
    mark = ":persistent_term.put(:cmdc_tool_ran_here, true)"

    File.write!(
      Path.join(c.tools, "quiet.ex"),
      tool("#{p}.Quiet", "(#{mark}; #{inspect("#{p}_quiet")})")
    )

    File.write!(Path.join(c.tools, "halts_name.ex"), tool("#{p}.HaltsName", "System.halt(7)"))

    File.write!(
      Path.join(c.tools, "halts_params.ex"),
      """
      defmodule #{p}.HaltsParams do
        @behaviour CMDC.Tool
        def name, do: #{inspect("#{p}_params")}
        def description, do: "A tool."
        def parameters, do: System.halt(7)
        def execute(_args, _ctx), do: {:ok, "ran"}
      end
      """
    )

    {peer, node} = CMDC.Tool.Peers.start!("discovery_safety")

    try do
      report = :erpc.call(node, Discovery, :discover, [c.opts], 120_000)

      assert Enum.map(report.tools, & &1.name) == ["#{p}_quiet"]
      assert :erpc.call(node, :persistent_term, :get, [:cmdc_tool_ran_here, false]) == false

      errors = Map.new(report.errors, &{Path.basename(&1.path), &1.reason})
      assert errors["halts_name.ex"] =~ "System.halt"
      assert errors["halts_params.ex"] =~ "System.halt"

      # The host runs the tool's code when it is called.
      quiet = Module.concat([p, "Quiet"])
      assert :erpc.call(node, quiet, :execute, [%{}, nil]) == {:ok, "ran"}
    after
      :peer.stop(peer)
    end
  end
end
