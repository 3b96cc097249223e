defmodule CMDC.Tool.MCP.SelfGuardTest do
  # cmdc-mcp registered in ~/.claude.json (what `claude mcp add --scope user` writes) must not
  # start itself again (issue 23, item 7): a temp HOME, the real bin/cmdc-mcp, its real process
  # tree read from /proc.
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually

  alias CMDC.Test.MCPPort
  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.{Client, SelfGuard}

  doctest SelfGuard

  @moduletag timeout: 600_000

  defp home_with(servers) do
    home = Path.join(System.tmp_dir!(), "cmdc_selfguard_#{System.unique_integer([:positive])}")
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf(home) end)
    # Claude Code's user file holds much else besides the servers.
    claude = %{"numStartups" => 3, "projects" => %{}, "mcpServers" => servers}
    File.write!(Path.join(home, ".claude.json"), JSON.encode!(claude))
    home
  end

  defp stdio(command, args),
    do: %{"type" => "stdio", "command" => command, "args" => args, "env" => %{}}

  # Every descendant of `os_pid`, from /proc (ppid links).
  defp descendants(os_pid) do
    parents =
      for dir <- File.ls!("/proc"),
          Integer.parse(dir) != :error,
          {:ok, stat} <- [File.read("/proc/#{dir}/stat")],
          into: %{} do
        [_, rest] = String.split(stat, ") ", parts: 2)
        [_state, ppid | _] = String.split(rest, " ")
        {String.to_integer(dir), String.to_integer(ppid)}
      end

    collect(parents, [os_pid], [])
  end

  defp collect(_parents, [], acc), do: acc

  defp collect(parents, [pid | rest], acc) do
    kids = for {child, ^pid} <- parents, do: child
    collect(parents, kids ++ rest, kids ++ acc)
  end

  # The cmdc-mcp VMs among them.
  defp servers_below(os_pid) do
    Enum.filter(descendants(os_pid), fn pid ->
      case File.read("/proc/#{pid}/cmdline") do
        {:ok, cmdline} -> cmdline =~ "CMDC.Tool.MCP.Main"
        _ -> false
      end
    end)
  end

  defp start(home) do
    env = [{"HOME", home}, {"CMDC_HOME", Path.join(home, ".cmdc")}, {"CMDC_MCP_SERVER", nil}]
    MCPPort.start(env, ["--examples"])
  end

  defp run(home) do
    # `start` returns once the server answered `initialize`, which it does only after every
    # configured server was started and was ready or failed (`MCP.Servers.load/1`): a server
    # that started itself again would already be below it, at least one level deep.
    {port, os_pid} = start(home)
    names = MCPPort.names(port)
    below = servers_below(os_pid)
    MCPPort.stop(port, os_pid)
    {names, below}
  end

  test "registered by its own path, and through `sh -c`: never started from inside itself" do
    launcher = SelfGuard.launcher()

    home =
      home_with(%{
        "cmdc" => stdio(launcher, []),
        "wrapped" => stdio("sh", ["-c", "exec #{launcher} --page-size 10"])
      })

    {names, below} = run(home)
    assert "echo" in names
    refute Enum.any?(names, &String.contains?(&1, "__")), inspect(names)
    assert below == []
  end

  test "hidden behind a wrapper script: the marker makes the nested one refuse at once" do
    home = home_with(%{})
    wrapper = Path.join(home, "start-tools")
    File.write!(wrapper, "#!/bin/sh\nexec #{SelfGuard.launcher()} \"$@\"\n")
    File.chmod!(wrapper, 0o755)

    File.write!(
      Path.join(home, ".claude.json"),
      JSON.encode!(%{"mcpServers" => %{"tools" => stdio(wrapper, [])}})
    )

    {port, os_pid} = start(home)
    names = MCPPort.names(port)
    assert "echo" in names
    refute Enum.any?(names, &String.contains?(&1, "__")), inspect(names)
    # The nested VM refuses (a final failure, not retried: checked by the test below) and
    # exits on its own.
    eventually(fn -> servers_below(os_pid) == [] end,
      message: fn -> "still running below: #{inspect(servers_below(os_pid))}" end
    )

    MCPPort.stop(port, os_pid)
  end

  test "a cmdc-mcp started below a serving one (marker inherited) refuses to serve" do
    home = home_with(%{"other" => stdio("sh", ["-c", "touch #{home_mark()}"])})

    {out, status} =
      System.cmd(MCPPort.server(), [],
        env: [{"MIX_ENV", "test"}, {"HOME", home}, {"CMDC_MCP_SERVER", "12345"}],
        stderr_to_stdout: true
      )

    assert status == 3
    assert out =~ "cmdc-mcp: started by another cmdc-mcp (CMDC_MCP_SERVER=12345); not serving"
    refute File.exists?(home_mark())
  end

  test "a nested cmdc-mcp's refusal is final: marked failed with the reason, never retried" do
    home = home_with(%{})
    # A wrapper that counts its starts: each retry of the old client started a VM again.
    starts = Path.join(home, "starts")
    wrapper = Path.join(home, "nested-tools")

    File.write!(
      wrapper,
      "#!/bin/sh\necho x >> #{starts}\nexec #{SelfGuard.launcher()} \"$@\"\n"
    )

    File.chmod!(wrapper, 0o755)
    # What a serving cmdc-mcp's children carry (its marker), given to this one server only.
    env = %{"MIX_ENV" => "test", "HOME" => home, SelfGuard.marker() => "12345"}

    client =
      start_supervised!(
        {Client,
         name: "nested",
         transport: {:stdio, %{command: wrapper, args: [], env: env}},
         init_timeout: 120_000}
      )

    assert {:error, message} = Client.await_ready(client, 120_000)
    assert message =~ "MCP server nested"
    assert message =~ "cmdc-mcp refusing to start below this one"
    assert message =~ "not retried"
    assert message =~ "started by another cmdc-mcp (CMDC_MCP_SERVER=12345)"
    # A retry would come after the backoff (0.2 s, doubling): a client started now whose
    # server exits at once (status 3, no refusal) shows when two backoffs have passed.
    control = Path.join(home, "control_starts")

    start_supervised!(
      {Client,
       name: "control",
       transport: {:stdio, %{command: "sh", args: ["-c", "echo x >> #{control}; exit 3"]}}},
      id: :control
    )

    eventually(fn ->
      File.exists?(control) and length(File.read!(control) |> String.split()) >= 3
    end)

    info = Client.info(client)
    assert info.status == :failed
    assert info.last_error == message
    assert info.restarts == 1
    assert File.read!(starts) == "x\n"
    assert {:error, ^message} = Client.call_tool(client, "echo", %{})
  end

  test "a server that exits with status 3 without the refusal is retried as before" do
    home = home_with(%{})
    starts = Path.join(home, "starts")
    script = "echo x >> #{starts}; echo 'bad config' >&2; exit 3"

    client =
      start_supervised!(
        {Client, name: "flaky", transport: {:stdio, %{command: "sh", args: ["-c", script]}}}
      )

    assert {:error, message} = Client.await_ready(client, 30_000)
    assert message =~ "exited with status 3"
    refute message =~ "not retried"
    eventually(fn -> length(String.split(File.read!(starts), "\n", trim: true)) >= 2 end)
    assert Client.info(client).status in [:down, :connecting]
  end

  test "script tools under cmdc-mcp carry its marker, as every program it starts does" do
    home = home_with(%{})
    tools = Path.join(home, ".cmdc/tools")
    File.mkdir_p!(tools)

    File.write!(Path.join(tools, "whoami.py"), """
    import os


    def which_server() -> str:
        \"\"\"The CMDC_MCP_SERVER marker this worker was started with.\"\"\"
        return os.environ.get("CMDC_MCP_SERVER", "unmarked")


    which_server.executionPolicy = "auto"
    """)

    {port, os_pid} = start(home)

    try do
      names = MCPPort.names(port)
      [name] = Enum.filter(names, &String.contains?(&1, "which_server"))
      assert {false, marker} = MCPPort.call(port, 7, name)
      assert marker =~ ~r/^\d+$/, "the script's worker saw CMDC_MCP_SERVER=#{marker}"
      # The serving VM's OS pid: the launcher itself, or the VM it started.
      assert String.to_integer(marker) in [os_pid | descendants(os_pid)], marker
    after
      MCPPort.stop(port, os_pid)
    end
  end

  defp home_mark, do: Path.join(System.tmp_dir!(), "cmdc_selfguard_other_#{System.pid()}.ran")

  test "outside cmdc-mcp (an agent using the library) nothing is left out" do
    servers = [
      %{
        name: "cmdc",
        source: :user,
        path: "/h/.claude.json",
        transport: {:stdio, %{command: SelfGuard.launcher(), args: [], cwd: "/"}}
      }
    ]

    if SelfGuard.marked?() do
      IO.puts("[skip] this test VM runs with #{SelfGuard.marker()} set")
    else
      assert {^servers, []} = SelfGuard.split(servers)
    end
  end
end
