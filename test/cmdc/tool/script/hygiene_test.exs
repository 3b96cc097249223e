defmodule CMDC.Tool.ScriptHygieneTest do
  # Issue 15, item 4: a time-out, a cancel or the VM's exit leaves no process a script tool
  # started, including children that left the process group (setsid). Checked with `ps`.
  use ExUnit.Case, async: true
  import CMDC.Tool.ScriptCase
  import CMDC.Tool.Eventually

  alias CMDC.Tool.{Runner, Script}

  @leaver ~S'''
  import os, subprocess, time


  def start() -> str:
      """Starts two sleepers (one in a session of its own) and returns at once."""
      away = subprocess.Popen(["sleep", "300"], start_new_session=True)
      near = subprocess.Popen(["sleep", "300"])
      return "%d %d %d" % (os.getpid(), away.pid, near.pid)


  def hang(pids_file: str) -> str:
      """Starts a sleeper in a session of its own, then blocks."""
      away = subprocess.Popen(["sleep", "300"], start_new_session=True)
      with open(pids_file, "w") as f:
          f.write("%d %d" % (os.getpid(), away.pid))
      time.sleep(300)
      return "late"
  '''

  # The pids `ps` still shows as live (a zombie is dead: in this container PID 1 never reaps).
  defp live(pids) do
    {out, _} = System.cmd("ps", ["-o", "pid=,stat=", "-p", Enum.join(pids, ",")])

    for line <- String.split(out, "\n", trim: true),
        [pid, stat] = String.split(line),
        not String.starts_with?(stat, "Z"),
        do: String.to_integer(pid)
  end

  defp pids_from(file) do
    eventually(fn ->
      case File.read(file) do
        {:ok, text} when text != "" -> text |> String.split() |> Enum.map(&String.to_integer/1)
        _ -> nil
      end
    end)
  end

  test "a time-out kills the worker and the child that called setsid" do
    dir = tmp_dir("hygiene_timeout")
    path = write!(dir, "leaver.py", @leaver)
    {:ok, group} = Script.load(path, cache: false)
    pids_file = Path.join(dir, "pids.txt")

    result =
      Runner.run(
        group.tools,
        %{id: "1", name: "hang", arguments: %{"pids_file" => pids_file}},
        %CMDC.Context{},
        policies: %{"hang" => :auto},
        timeout: 3_000
      )

    assert result.is_error
    pids = pids_from(pids_file)
    assert length(pids) == 2

    eventually(fn -> live(pids) == [] end,
      message: fn -> "left running: #{inspect(live(pids))}" end
    )
  end

  test "a cancel kills the worker and the child that called setsid" do
    dir = tmp_dir("hygiene_cancel")
    path = write!(dir, "leaver.py", @leaver)
    {:ok, group} = Script.load(path, cache: false)
    pids_file = Path.join(dir, "pids.txt")
    [hang] = Enum.filter(group.tools, &(&1.name() == "hang"))

    {:ok, handle} = Script.start_call(hang, %{"pids_file" => pids_file})
    pids = pids_from(pids_file)
    assert live(pids) |> Enum.sort() == Enum.sort(pids)
    Script.cancel(handle)

    eventually(fn -> live(pids) == [] end,
      message: fn -> "left running: #{inspect(live(pids))}" end
    )
  end

  test "when the VM dies, a warm worker and its background children (setsid too) die with it" do
    dir = tmp_dir("hygiene_vm")
    path = write!(dir, "leaver.py", @leaver)
    ebin = Path.dirname(:code.which(Script))

    code = """
    {:ok, group} = CMDC.Tool.Script.load(#{inspect(path)}, cache: false)
    [start] = Enum.filter(group.tools, &(&1.name() == "start"))
    {:ok, reply} = CMDC.Tool.Script.call(start, %{})
    IO.puts("PIDS " <> reply.value)
    Process.sleep(:infinity)
    """

    port =
      Port.open({:spawn_executable, System.find_executable("elixir")}, [
        :binary,
        :exit_status,
        {:line, 4096},
        args: ["-pa", ebin, "-e", code]
      ])

    {:os_pid, vm} = Port.info(port, :os_pid)

    pids =
      receive do
        {^port, {:data, {:eol, "PIDS " <> text}}} ->
          text |> String.split() |> Enum.map(&String.to_integer/1)
      after
        60_000 -> flunk("the VM did not start the tool")
      end

    assert length(pids) == 3
    assert live(pids) |> Enum.sort() == Enum.sort(pids), "the worker keeps its children"
    # The VM is killed outright: no cleanup code of the VM runs.
    System.cmd("kill", ["-KILL", Integer.to_string(vm)])

    eventually(fn -> live(pids) == [] end,
      message: fn -> "left running: #{inspect(live(pids))}" end
    )
  end
end
