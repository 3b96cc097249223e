defmodule CMDC.Tool.MCPWatchTest do
  # `bin/cmdc-mcp --watch` as a client runs it (a real subprocess, raw frames): unchanged files
  # are not compiled again, requests are answered while a refresh runs, the server exits with
  # its client. (Idle CPU is measured in bench/mcp.exs.)
  use ExUnit.Case, async: true

  alias CMDC.Test.OsProc
  alias CMDC.Tool.JSON

  @moduletag timeout: 600_000
  @root Path.expand("../../../..", __DIR__)
  @server Path.join(@root, "bin/cmdc-mcp")

  setup do
    base =
      Path.join(
        System.tmp_dir!(),
        "cmdc_watch_#{System.pid()}_#{System.unique_integer([:positive])}"
      )

    tools = Path.join(base, "watched")
    File.mkdir_p!(tools)
    on_exit(fn -> File.rm_rf(base) end)
    # CMDC_HOME keeps the compile cache (and the user's tool folders) in the test's folder.
    %{
      base: base,
      tools: tools,
      env: [{~c"MIX_ENV", ~c"test"}, {~c"CMDC_HOME", to_charlist(base)}]
    }
  end

  # An Elixir tool file whose top-level code appends a line to `count` each time it is compiled.
  defp tool_file(dir, name, count, extra \\ "") do
    # Random too: a source seen by an earlier run would come from the compile cache.
    module =
      "CMDCTest.Watch.T#{System.unique_integer([:positive])}R#{:rand.uniform(1_000_000_000)}"

    source = """
    File.write!(#{inspect(count)}, "compiled\\n", [:append])
    #{extra}
    defmodule #{module} do
      @behaviour CMDC.Tool
      def name, do: #{inspect(name)}
      def description, do: "#{name} #{System.unique_integer([:positive])}"
      def parameters, do: %{"type" => "object", "properties" => %{}}
      def execute(_args, _context), do: {:ok, #{inspect(name)}}
    end
    """

    # Written whole, then renamed into the watched folder (as editors save): a tick on a
    # loaded machine could otherwise read the file between its truncation and its write, and
    # compile a half-written file.
    tmp = Path.join(Path.dirname(dir), "#{name}.ex.tmp")
    File.write!(tmp, source)
    File.rename!(tmp, Path.join(dir, "#{name}.ex"))
  end

  defp compiles(count), do: count |> File.read!() |> String.split("\n", trim: true) |> length()

  defp start(env, args) do
    port =
      Port.open({:spawn_executable, @server}, [
        :binary,
        {:line, 1_000_000},
        {:env, env},
        {:cd, @root},
        args: args
      ])

    {:os_pid, os_pid} = Port.info(port, :os_pid)
    send_msg(port, %{"id" => 0, "method" => "initialize", "params" => init()})
    assert %{"result" => _} = await(port, &(&1["id"] == 0))
    send_msg(port, %{"method" => "notifications/initialized"})
    {port, os_pid}
  end

  defp init do
    %{
      "protocolVersion" => "2025-11-25",
      "capabilities" => %{},
      "clientInfo" => %{"name" => "watch_test", "version" => "1"}
    }
  end

  defp send_msg(port, msg),
    do: Port.command(port, JSON.encode!(Map.put(msg, "jsonrpc", "2.0")) <> "\n")

  # The next message matching `match?` (others are dropped); the bound only turns a hang into
  # a failure.
  defp await(port, match?) do
    receive do
      {^port, {:data, {:eol, line}}} ->
        msg = JSON.decode!(line)
        if match?.(msg), do: msg, else: await(port, match?)
    after
      120_000 -> flunk("no matching message from the server")
    end
  end

  defp list_changed(port), do: await(port, &(&1["method"] == "notifications/tools/list_changed"))

  defp names(port, id) do
    send_msg(port, %{"id" => id, "method" => "tools/list"})
    %{"result" => %{"tools" => tools}} = await(port, &(&1["id"] == id))
    tools |> Enum.map(& &1["name"]) |> MapSet.new()
  end

  defp stop(port, os_pid) do
    # Closing the port closes the server's stdin: the client is gone.
    Port.close(port)
    assert OsProc.wait_dead(os_pid, 30_000), "the server outlived its client (--watch)"
  end

  test "unchanged tool files are not compiled again, on ticks nor on restart; changed ones are",
       %{base: base, tools: tools, env: env} do
    a = Path.join(base, "a.count")
    tool_file(tools, "watch_a", a)
    {port, os_pid} = start(env, ["--examples", "--watch", "50", tools])
    assert compiles(a) == 1

    # A new file: the tick that finds it leaves the unchanged one alone.
    b = Path.join(base, "b.count")
    tool_file(tools, "watch_b", b)
    list_changed(port)
    assert MapSet.subset?(MapSet.new(["watch_a", "watch_b"]), names(port, 1))
    assert {compiles(a), compiles(b)} == {1, 1}

    # Touched but not changed (a new mtime), with a new file to know the tick happened: the
    # compile cache answers for it.
    File.touch!(Path.join(tools, "watch_a.ex"), System.os_time(:second) + 5)
    c = Path.join(base, "c.count")
    tool_file(tools, "watch_c", c)
    list_changed(port)
    assert {compiles(a), compiles(c)} == {1, 1}

    # Changed: compiled again (its description changed, so the list did).
    tool_file(tools, "watch_a", a)
    list_changed(port)
    assert compiles(a) == 2
    stop(port, os_pid)

    # A new server: every file comes from the compile cache, no compiler VM runs.
    {port, os_pid} = start(env, ["--examples", tools])
    assert MapSet.subset?(MapSet.new(["watch_a", "watch_b", "watch_c"]), names(port, 2))
    assert {compiles(a), compiles(b), compiles(c)} == {2, 1, 1}
    stop(port, os_pid)
  end

  test "requests are answered while a refresh is compiling a slow file",
       %{base: base, tools: tools, env: env} do
    started = Path.join(base, "started.fifo")
    release = Path.join(base, "release.fifo")
    for fifo <- [started, release], do: {_, 0} = System.cmd("mkfifo", [fifo])
    {port, os_pid} = start(env, ["--examples", "--watch", "50", tools])

    # The file's top-level code says it started, then waits until the test releases it.
    wait = "System.cmd(\"sh\", [\"-c\", \"echo started > #{started}; cat #{release}\"])"
    tool_file(tools, "watch_slow", Path.join(base, "slow.count"), wait)
    # Opening a FIFO for reading waits for its writer: this returns once compiling started.
    assert {"started\n", 0} = System.cmd("cat", [started])

    send_msg(port, %{"id" => 7, "method" => "ping"})
    assert %{"result" => %{}} = await(port, &(&1["id"] == 7))
    send_msg(port, %{"id" => 8, "method" => "tools/call", "params" => echo()})
    assert %{"result" => %{"isError" => false}} = await(port, &(&1["id"] == 8))

    {_, 0} = System.cmd("sh", ["-c", "echo go > #{release}"])
    list_changed(port)
    assert MapSet.member?(names(port, 9), "watch_slow")
    stop(port, os_pid)
  end

  defp echo, do: %{"name" => "echo", "arguments" => %{"text" => "hi"}}
end
