defmodule CMDC.Tool.ScriptDaemonTest do
  # What a time-out kills (issue 23, item 8): the worker, its children, children that called
  # setsid, and a daemon that double-forked to leave (the worker is their subreaper, so they
  # stay in its tree). Real Python workers and real processes.
  use ExUnit.Case, async: true
  import CMDC.Tool.ScriptCase
  import CMDC.Tool.Eventually

  alias CMDC.Test.OsProc
  alias CMDC.Tool.Script

  @moduletag timeout: 300_000

  @script ~S'''
  """Starts background programs."""
  import os
  import subprocess
  import time


  def spawn_all(folder: str, then_sleep: bool = True) -> str:
      """Starts a child, a setsid child and a double-forked daemon; writes their pids."""
      child = subprocess.Popen(["sleep", "300"])
      session = subprocess.Popen(["sleep", "300"], start_new_session=True)
      # The classic daemon: fork, setsid, fork again, the middle one exits at once.
      subprocess.run(["sh", "-c", "(setsid sh -c 'echo $$ > \"$0\"/daemon.pid; exec sleep 300' \"$0\" &)", folder], check=True)
      with open(os.path.join(folder, "children.pid"), "w") as f:
          f.write("%d %d %d" % (os.getpid(), child.pid, session.pid))
      if then_sleep:
          time.sleep(300)
      return "started"
  '''

  defp pids(dir) do
    eventually(fn -> File.exists?(Path.join(dir, "daemon.pid")) end)

    [worker, child, session] =
      Path.join(dir, "children.pid")
      |> File.read!()
      |> String.split()
      |> Enum.map(&String.to_integer/1)

    daemon = Path.join(dir, "daemon.pid") |> File.read!() |> String.trim() |> String.to_integer()

    on_exit(fn ->
      for pid <- [child, session, daemon],
          do: System.cmd("kill", ["-9", "#{pid}"], stderr_to_stdout: true)
    end)

    %{worker: worker, child: child, session: session, daemon: daemon}
  end

  test "a time-out kills the worker, its children, setsid children and a double-forked daemon" do
    dir = tmp_dir("daemon")
    path = write!(dir, "bg.py", @script)
    {_group, %{"spawn_all" => mod}} = load!(path, cache: false)
    task = Task.async(fn -> Script.call(mod, %{"folder" => dir}, timeout: 3_000) end)
    procs = pids(dir)
    # The daemon left its parent: not the worker's child by birth, adopted by it.
    assert OsProc.running?(procs.daemon)
    assert {:error, %{kind: "timeout"}} = Task.await(task, 60_000)

    for {what, pid} <- procs do
      assert OsProc.wait_dead(pid), "#{what} (#{pid}) outlived the time-out"
    end
  end

  test "a call that returns leaves its daemon to the warm worker; stopping the worker ends it" do
    dir = tmp_dir("daemon_ok")
    path = write!(dir, "bg.py", @script)
    {_group, %{"spawn_all" => mod}} = load!(path, cache: false)

    assert {:ok, %{value: "started"}} =
             Script.call(mod, %{"folder" => dir, "then_sleep" => false})

    procs = pids(dir)
    assert OsProc.running?(procs.daemon)
    Script.stop(path)

    for {what, pid} <- procs do
      assert OsProc.wait_dead(pid), "#{what} (#{pid}) outlived its worker"
    end
  end
end
