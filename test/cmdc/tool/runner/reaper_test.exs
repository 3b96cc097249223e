defmodule CMDC.Tool.RunnerOsTest do
  # Time-outs and cancellation stop the OS processes a tool started through ports, with their
  # descendants: real shells and sleeps, checked in /proc.
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually
  doctest CMDC.Tool.Runner.Reaper

  alias CMDC.Test.OsProc
  alias CMDC.Tool.Runner

  @doc false
  # Each tool starts `sh`, which starts two sleeps, writes its own pid to the file named by
  # "pidfile", and waits.
  def script_text(pidfile), do: "sleep 600 & sleep 600 & echo $$ > #{pidfile}; wait"

  defmodule SystemCmd do
    use CMDC.Tool.TestTool, name: "system_cmd"

    def execute(%{"pidfile" => f}, _ctx) do
      {out, _} = System.cmd("sh", ["-c", CMDC.Tool.RunnerOsTest.script_text(f)])
      {:ok, out}
    end
  end

  defmodule LinkedPort do
    use CMDC.Tool.TestTool, name: "linked_port"

    # The port belongs to a task linked to the tool, not to the tool itself.
    def execute(%{"pidfile" => f}, _ctx) do
      Task.async(fn ->
        port = Port.open({:spawn, "sh -c '#{CMDC.Tool.RunnerOsTest.script_text(f)}'"}, [:binary])

        receive do
          {^port, {:exit_status, _}} -> :ok
        end
      end)
      |> Task.await(:infinity)

      {:ok, "done"}
    end
  end

  defmodule OsCmd do
    use CMDC.Tool.TestTool, name: "os_cmd"

    def execute(%{"pidfile" => f}, _ctx) do
      {:ok, to_string(:os.cmd(String.to_charlist(CMDC.Tool.RunnerOsTest.script_text(f))))}
    end
  end

  @tools [SystemCmd, LinkedPort, OsCmd]

  setup do
    pidfile =
      Path.join(System.tmp_dir!(), "cmdc_runner_os_#{System.unique_integer([:positive])}.pid")

    on_exit(fn -> File.rm(pidfile) end)
    {:ok, pidfile: pidfile}
  end

  defp ctx, do: CMDC.Context.new(session_id: "os-#{System.unique_integer()}")

  defp call(name, pidfile), do: %{id: "c1", name: name, arguments: %{"pidfile" => pidfile}}

  # The shell's pid and its descendants, once the shell has written its pid and both sleeps
  # run `sleep` (a background child is a forked shell until it execs; `:os.cmd/1` runs the
  # command in a subshell, one level deeper).
  defp started_tree(pidfile) do
    eventually(
      fn ->
        with {:ok, text} <- File.read(pidfile),
             {os_pid, _} <- Integer.parse(text),
             tree = descendants(os_pid),
             2 <- sleeps(tree),
             do: tree,
             else: (_ -> nil)
      end,
      message: "the tool's shell and its two sleeps did not start"
    )
  end

  defp descendants(os_pid) do
    {out, _} = System.cmd("pgrep", ["-P", Integer.to_string(os_pid)])
    [os_pid | out |> String.split() |> Enum.flat_map(&descendants(String.to_integer(&1)))]
  end

  defp sleeps(tree), do: Enum.count(tree, &(File.read("/proc/#{&1}/comm") == {:ok, "sleep\n"}))

  defp assert_all_dead(tree) do
    for os_pid <- tree, do: assert(OsProc.wait_dead(os_pid), "OS process #{os_pid} survived")
  end

  for name <- ["system_cmd", "linked_port", "os_cmd"] do
    test "cancel kills the OS processes of #{name} and their descendants", %{pidfile: pidfile} do
      handle = Runner.async(@tools, call(unquote(name), pidfile), ctx())
      tree = started_tree(pidfile)
      assert sleeps(tree) == 2, "expected two sleeps under the shell, got #{inspect(tree)}"
      Runner.cancel(handle)
      assert %{is_error: true, reason: :cancelled} = Runner.await(handle)
      assert_all_dead(tree)
    end
  end

  test "a time-out kills them too, and leaves other OS processes alone", %{pidfile: pidfile} do
    # A program of the test's own: not the tool's, so it must survive.
    bystander = Port.open({:spawn_executable, System.find_executable("sleep")}, args: ["600"])
    {:os_pid, bystander_pid} = Port.info(bystander, :os_pid)

    handle = Runner.async(@tools, call("system_cmd", pidfile), ctx(), timeout: 3_000)
    tree = started_tree(pidfile)
    assert %{is_error: true, reason: :timeout} = Runner.await(handle)
    assert_all_dead(tree)
    assert OsProc.running?(bystander_pid)

    # Its port closes by itself once the program is gone.
    System.cmd("kill", ["-KILL", Integer.to_string(bystander_pid)])
  end

  test "the caller's death kills them", %{pidfile: pidfile} do
    me = self()

    caller =
      spawn(fn ->
        send(me, :running)
        Runner.run(@tools, call("os_cmd", pidfile), ctx())
      end)

    assert_receive :running
    tree = started_tree(pidfile)
    Process.exit(caller, :kill)
    assert_all_dead(tree)
  end
end
