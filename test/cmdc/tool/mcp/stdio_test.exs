defmodule CMDC.Tool.MCPStdioTest do
  # bin/cmdc-mcp as MCP clients run it: a real subprocess, the official Python and TypeScript
  # clients, tools that print, tools that start programs.
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually

  alias CMDC.Test.OsProc
  alias CMDC.Tool.JSON

  @moduletag timeout: 600_000
  @root Path.expand("../../../..", __DIR__)
  @server Path.join(@root, "bin/cmdc-mcp")
  @env [{"MIX_ENV", "test"}]

  # The fixture tools in a folder of their own (script tools write their cache next to them).
  defp fixtures do
    dir = Path.join(System.tmp_dir!(), "cmdc_mcp_fixtures_#{System.unique_integer([:positive])}")
    File.cp_r!(Path.join(@root, "test/fixtures/mcp_tools"), dir)
    on_exit(fn -> File.rm_rf(dir) end)
    dir
  end

  defp python do
    {:ok, python} = CMDC.Tool.PythonEnv.python()
    python
  end

  test "--help prints the usage on stdout and exits 0; an unknown option exits 2" do
    {out, 0} = System.cmd(@server, ["--help"], env: @env, stderr_to_stdout: false)
    assert out =~ "Usage: cmdc-mcp"
    assert out =~ "--watch MS"
    {_, status} = System.cmd(@server, ["--bogus"], env: @env, stderr_to_stdout: true)
    assert status == 2
  end

  test "official Python client: stdout holds protocol messages only; structured tools" do
    calls =
      JSON.encode!([
        ["noisy", %{}],
        ["weather", %{"city" => "Oslo"}],
        ["weather", %{"city" => "Rome", "as" => "text"}],
        ["weather", %{"city" => "Oslo", "as" => "wrong"}],
        ["weather", %{"city" => "Oslo", "as" => "not_json"}],
        ["forecast", %{"city" => "Oslo"}]
      ])

    input = Path.join(System.tmp_dir!(), "mcp_calls_#{System.unique_integer([:positive])}.json")
    File.write!(input, calls)
    on_exit(fn -> File.rm(input) end)
    client = Path.join(@root, "test/support/mcp_client.py")
    stderr = input <> ".stderr"
    command = "#{python()} #{client} #{@server} --examples #{fixtures()} < #{input} 2> #{stderr}"
    {out, 0} = System.cmd("sh", ["-c", command], env: @env)
    report = out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()

    # Every way of printing the noisy tool uses went to stderr: the client read no bad line.
    assert report["stream_errors"] == []
    noise = File.read!(stderr)
    File.rm(stderr)

    for source <- ["IO.puts", ":inspect", ":io.format", "IO.write", "(:user)", "spawned", "OS"] do
      assert noise =~ source, "stderr: #{inspect(noise)}\nreport: #{out}"
    end

    assert [noisy, map, text, wrong, not_json, forecast] = report["calls"]
    assert %{"text" => "quiet", "is_error" => false} = noisy

    assert report["tool_meta"]["weather"] == %{
             "title" => "Weather report",
             "annotations" => %{"readOnlyHint" => true, "openWorldHint" => false},
             "output_schema" => %{
               "type" => "object",
               "properties" => %{
                 "city" => %{"type" => "string"},
                 "celsius" => %{"type" => "number"}
               },
               "required" => ["city", "celsius"]
             }
           }

    # The SDK checks structuredContent against the output schema itself.
    assert map["structured"] == %{"city" => "Oslo", "celsius" => 21.5}
    assert JSON.decode!(map["text"]) == map["structured"]
    assert text["structured"] == %{"city" => "Rome", "celsius" => 19}
    assert %{"is_error" => true, "structured" => nil} = wrong
    assert wrong["text"] =~ ~s(at /celsius: "warm" is not of type "number")
    assert %{"is_error" => true} = not_json
    assert not_json["text"] =~ "not JSON"

    # Title and annotations from discovery metadata (noisy.json) and from a Python script's
    # function attributes; the output schema from the function's return type (a TypedDict).
    assert report["tool_meta"]["noisy"] == %{
             "title" => "Noisy printer",
             "annotations" => %{"destructiveHint" => false, "idempotentHint" => true},
             "output_schema" => nil
           }

    assert %{
             "title" => "City forecast",
             "annotations" => %{"readOnlyHint" => true, "openWorldHint" => false},
             "output_schema" =>
               %{
                 "type" => "object",
                 "properties" => %{
                   "city" => %{"type" => "string"},
                   "days" => %{"type" => "integer"}
                 }
               } = schema
           } = report["tool_meta"]["forecast"]

    assert Enum.sort(schema["required"]) == ["city", "days"]
    assert %{"is_error" => false, "structured" => %{"city" => "Oslo", "days" => 3}} = forecast
  end

  test "official TypeScript SDK: stdout holds protocol messages only; structured tools" do
    case CMDC.Tool.NodeEnv.sdk() do
      {:error, reason} ->
        IO.puts("\nskipped: TypeScript SDK unavailable: #{reason}")

      {:ok, sdk} ->
        client = Path.join(@root, "test/support/mcp_client.mjs")
        command = "node #{client} #{sdk} #{@server} --examples #{fixtures()} 2>/dev/null"
        {out, 0} = System.cmd("sh", ["-c", command], env: @env)
        report = out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
        assert report["stream_errors"] == []
        refute Map.has_key?(report["capabilities"]["tools"], "listChanged")
        assert report["tools"]["weather"]["title"] == "Weather report"
        assert report["tools"]["weather"]["annotations"]["readOnlyHint"] == true
        assert %{"type" => "object"} = report["tools"]["weather"]["outputSchema"]
        calls = report["calls"]
        assert calls["noisy"] == %{"isError" => false, "text" => "quiet"}
        assert calls["weather"]["structured"] == %{"city" => "Oslo", "celsius" => 21.5}
        assert calls["weather_text"]["structured"] == %{"city" => "Rome", "celsius" => 19}
        assert calls["weather_wrong"]["isError"] == true
        assert calls["echo"]["text"] == "après"
    end
  end

  test "--watch: a 2026-07-28 client's subscriptions/listen hears of a new tool file" do
    dir = Path.join(System.tmp_dir!(), "cmdc_mcp_listen_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf(dir) end)
    marker = Path.join(dir, "acknowledged")
    client = Path.join(@root, "test/support/mcp_http_client.py")

    args =
      [client, "2026-07-28", "stdio", "--marker", marker, @server, "--examples"] ++
        ["--watch", "100", dir]

    run = Task.async(fn -> System.cmd(python(), args, env: @env) end)

    eventually(fn -> File.exists?(marker) end,
      within: 120_000,
      message: "#{marker} never appeared"
    )

    File.write!(Path.join(dir, "late_tool.ex"), """
    defmodule CMDCTest.Listen.Late do
      @behaviour CMDC.Tool
      def name, do: "late_tool"
      def description, do: "Added while the server runs."
      def parameters, do: %{"type" => "object", "properties" => %{}}
      def execute(_args, _context), do: {:ok, "late"}
    end
    """)

    {out, 0} = Task.await(run, 180_000)
    report = out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
    assert report["honored"] == %{"toolsListChanged" => true}
    assert report["event"] =~ "ToolsListChanged"
    assert "late_tool" in report["tools_after"]
    refute "late_tool" in report["tools"]
  end

  defp lifecycle(mode, tool, dir) do
    pid_file = Path.join(dir, "#{tool}_#{mode}.pid")
    driver = Path.join(@root, "test/support/mcp_lifecycle.py")
    args = [driver, to_string(mode), tool, pid_file, @server, dir]
    {out, 0} = System.cmd(python(), args, env: @env)
    report = out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
    assert Enum.all?(report["stdout_json"]), inspect(report["stdout_lines"])
    report
  end

  test "stdin closed during calls: the calls are cancelled, their programs killed, the server exits" do
    dir = fixtures()

    for tool <- ["hold", "hold_py"] do
      report = lifecycle(:eof, tool, dir)
      IO.puts("\n#{tool}: exit #{report["exit_ms"]} ms after stdin closed (a 30 s call running)")
      # The 1 s target is measured in bench/mcp.exs; here: before the call would have ended.
      assert report["exit_ms"] < 30_000

      for pid <- report["pids"] do
        assert OsProc.wait_dead(pid), "#{tool}: process #{pid} outlived the server"
      end
    end
  end

  test "server VM killed during a script call: the worker and its children do not outlive it" do
    report = lifecycle(:kill, "hold_py", fixtures())
    # bin/cmdc-mcp execs the VM: the pid the client started is the VM's.
    assert OsProc.wait_dead(report["server_pid"])
    [worker, child] = report["pids"]
    assert worker != report["server_pid"]

    for pid <- [worker, child] do
      # The worker notices its parent is gone and takes its tree down.
      assert OsProc.wait_dead(pid), "process #{pid} outlived the killed server"
    end
  end
end
