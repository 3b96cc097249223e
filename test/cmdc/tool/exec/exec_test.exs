defmodule CMDC.Tool.ExecTest do
  use ExUnit.Case, async: true

  alias CMDC.Test.OsProc
  alias CMDC.Tool.Exec

  doctest CMDC.Tool.Exec

  defp started_pid(%Exec{id: id}) do
    receive do
      {:cmdc_exec, ^id, {:started, os_pid}} -> os_pid
    after
      30_000 -> flunk("the program did not start")
    end
  end

  test "a cancelled sleep is dead and reaped" do
    {:ok, exec} = Exec.start("sleep", ["30"])
    os_pid = started_pid(exec)
    assert OsProc.running?(os_pid)
    :ok = Exec.cancel(exec)
    assert {:ok, %Exec.Result{status: :cancelled, killed: true, signal: 15}} = Exec.await(exec)
    # Reaped: not even a zombie is left.
    refute OsProc.exists?(os_pid)
  end

  test "a flood of output is capped and nothing blocks" do
    {:ok, r} =
      Exec.run(
        "sh",
        ["-c", "head -c 20000000 /dev/zero; head -c 3000000 /dev/zero >&2; echo end"],
        max_output: 4096
      )

    assert r.status == :exited and r.code == 0
    assert byte_size(r.stdout) == 4096
    assert r.stdout_truncated == 20_000_000 + 4 - 4096
    assert byte_size(r.stderr) == 4096
    assert r.stderr_truncated == 3_000_000 - 4096
  end

  test "a flood of lines streams only what fits under the cap" do
    me = self()

    {:ok, r} = Exec.run("seq", ["1", "1000000"], max_output: 100, on_line: &send(me, {:line, &1}))

    assert r.code == 0

    lines =
      Stream.repeatedly(fn ->
        receive do
          {:line, l} -> l
        after
          0 -> nil
        end
      end)
      |> Enum.take_while(& &1)

    # 100 bytes of "1\n2\n...": 36 whole lines, then the cut-off start of the next one.
    assert Enum.take(lines, 36) == Enum.map(1..36, &Integer.to_string/1)
    assert length(lines) <= 37
  end

  test "a non-zero exit is reported, with stderr" do
    {:ok, r} = Exec.run("sh", ["-c", "echo oops >&2; exit 7"])

    assert %Exec.Result{status: :exited, code: 7, signal: nil, killed: false, stderr: "oops\n"} =
             r
  end

  test "a program ignoring SIGTERM is killed with SIGKILL after the grace period" do
    {:ok, exec} =
      Exec.start("sh", ["-c", "trap '' TERM; echo ready; sleep 30"], timeout: 100, kill_after: 200)

    os_pid = started_pid(exec)
    {:ok, r} = Exec.await(exec)
    assert %Exec.Result{status: :timeout, killed: true, signal: 9} = r
    assert r.stdout == "ready\n"
    refute OsProc.exists?(os_pid)
  end

  test "a missing executable or working directory is an error" do
    assert {:error, "executable not found: definitely-not-here (not on PATH)"} =
             Exec.run("definitely-not-here", ["x"])

    assert {:error, "executable not found: /no/where/prog"} = Exec.run("/no/where/prog", [])

    assert {:error, "working directory does not exist: /no/such/dir"} =
             Exec.run("ls", [], cwd: "/no/such/dir")

    assert {:error, "permission denied: " <> _} = Exec.run("/etc/passwd", [])
  end

  test "cwd, env, clear_env and stdin" do
    {:ok, r} =
      Exec.run("sh", ["-c", "pwd; echo $A; echo ${HOME:-unset}; cat"],
        cwd: "/tmp",
        env: %{"A" => "1", "HOME" => nil},
        stdin: ["in", "put"]
      )

    assert r.stdout == "/tmp\n1\nunset\ninput"

    {:ok, r} = Exec.run("/usr/bin/env", [], clear_env: true, env: [{"ONLY", "me"}])
    assert r.stdout == "ONLY=me\n"

    {:ok, r} = Exec.run("pwd", [], context: %CMDC.Context{working_dir: "/"})
    assert r.stdout == "/\n"
  end

  test "the whole group is killed on time-out: background children too" do
    {:ok, r} = Exec.run("sh", ["-c", "sleep 30 & echo $!; wait"], timeout: 100, kill_after: 200)
    assert r.status == :timeout
    assert OsProc.wait_dead(String.to_integer(String.trim(r.stdout)))
  end

  test "the program dies with its owner" do
    me = self()

    owner =
      spawn(fn ->
        {:ok, exec} = Exec.start("sleep", ["30"])
        send(me, {:pid, started_pid(exec)})
        Process.sleep(:infinity)
      end)

    assert_receive {:pid, os_pid}
    Process.exit(owner, :kill)
    assert OsProc.wait_dead(os_pid)
  end

  test "the program is killed when its handle is garbage collected" do
    me = self()

    # Alive until the program is seen dead: the handle's collection killed it, not an exit.
    holder =
      spawn(fn ->
        os_pid = start_and_forget()
        :erlang.garbage_collect()
        send(me, {:pid, os_pid})
        receive(do: (:done -> :ok))
      end)

    assert_receive {:pid, os_pid}
    assert OsProc.wait_dead(os_pid)
    assert Process.alive?(holder)
    send(holder, :done)
  end

  defp start_and_forget do
    {:ok, exec} = Exec.start("sleep", ["30"])
    started_pid(exec)
  end

  test "programs do not inherit the BEAM's ignored SIGCHLD (their exit status is kept)" do
    {:ok, r} = Exec.run("grep", ["SigIgn", "/proc/self/status"])
    assert r.code == 0
    ["SigIgn:", mask] = String.split(r.stdout)
    # Bit 16 is SIGCHLD (17): ignored in the child would mean the handler came too late.
    assert Bitwise.band(String.to_integer(mask, 16), 0x10000) == 0
  end

  test "a large stdin goes through" do
    data = :binary.copy("0123456789abcdef", 100_000)
    {:ok, r} = Exec.run("wc", ["-c"], stdin: data)
    assert String.trim(r.stdout) == "1600000"
  end

  test "only the owner may await" do
    {:ok, exec} = Exec.start("true", [])
    task = Task.async(fn -> catch_error(Exec.await(exec)) end)
    assert %ArgumentError{} = Task.await(task)
    assert {:ok, %{code: 0}} = Exec.await(exec)
  end

  test "stdin: :pipe is a conversation: answers stream line by line past the output cap" do
    script = ~S(while read l; do echo "out $l"; echo "err $l" >&2; done)

    {:ok, exec} =
      Exec.start("sh", ["-c", script],
        stdin: :pipe,
        stream_lines: true,
        stream_stderr: true,
        max_output: 0,
        max_line: 4_000_000
      )

    id = exec.id

    for word <- ~w(one two three) do
      :ok = Exec.write(exec, word <> "\n")
      assert_receive {:cmdc_exec, ^id, {:line, "out " <> ^word}}
      assert_receive {:cmdc_exec, ^id, {:stderr_line, "err " <> ^word}}
    end

    :ok = Exec.close_stdin(exec)
    assert {:error, "stdin is closed" <> _} = Exec.write(exec, "late\n")
    assert {:ok, %{code: 0, stdout: ""}} = Exec.await(exec)
  end

  test "a large write goes through the dirty twin and arrives whole" do
    {:ok, exec} =
      Exec.start("cat", [], stdin: :pipe, stream_lines: true, max_output: 0, max_line: 4_000_000)

    id = exec.id
    big = :binary.copy("x", 2_000_000)
    :ok = Exec.write(exec, [big, "\n"])
    assert_receive {:cmdc_exec, ^id, {:line, ^big}}
    :ok = Exec.close_stdin(exec)
    assert {:ok, %{code: 0}} = Exec.await(exec)
  end

  test "writing to a program that has ended is an error, not a crash" do
    {:ok, exec} = Exec.start("true", [], stdin: :pipe)
    assert {:ok, %{code: 0}} = Exec.await(exec)
    assert {:error, _} = Exec.write(exec, "x")
    {:ok, plain} = Exec.start("true", [])
    assert {:error, "stdin is closed" <> _} = Exec.write(plain, "x")
    Exec.await(plain)
  end
end
