defmodule CMDC.Tool.ExecWindowTest do
  # Flow control of streamed output (`:window`, `CMDC.Tool.Exec.ack/2`) with real programs:
  # a fast writer blocks on its own pipe while the owner does not acknowledge, and resumes when
  # it does; a stderr flood is dropped with a count and never holds stdout back.
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually
  alias CMDC.Tool.Exec

  defp written(os_pid) do
    # `wchar`: bytes the process passed to write(2).
    case File.read("/proc/#{os_pid}/io") do
      {:ok, io} -> io |> String.split("\n") |> Enum.find_value(&wchar/1)
      {:error, _} -> nil
    end
  end

  defp wchar("wchar: " <> n), do: String.to_integer(n)
  defp wchar(_), do: nil

  # Asleep in the kernel's pipe write: its pipe is full.
  defp blocked_on_pipe?(os_pid) do
    with {:ok, stat} <- File.read("/proc/#{os_pid}/stat"),
         [state | _] <- stat |> String.split(") ", parts: 2) |> List.last() |> String.split(),
         true <- state == "S",
         {:ok, wchan} <- File.read("/proc/#{os_pid}/wchan") do
      wchan =~ "pipe_write"
    else
      _ -> false
    end
  end

  defp drain(id, kind, acc \\ []) do
    receive do
      {:cmdc_exec, ^id, {^kind, line}} -> drain(id, kind, [line | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  test "an owner that does not acknowledge holds a fast writer at the window; acks resume it" do
    {:ok, exec} = Exec.start("yes", ["0123456789"], stdin: :pipe, stream_lines: true, window: 32)

    id = exec.id
    assert_receive {:cmdc_exec, ^id, {:started, os_pid}}
    # The window is full once `yes` sleeps in write(2) on its pipe, which nobody reads.
    eventually(fn -> blocked_on_pipe?(os_pid) end)
    first = written(os_pid)
    {:message_queue_len, queued} = Process.info(self(), :message_queue_len)
    lines = drain(id, :line)
    # Unread, `yes` writes ~1 GB/s; here it filled its pipe and sleeps in write(2).
    IO.puts("\nunacknowledged window of 32: #{length(lines)} lines, #{first} bytes written")
    assert length(lines) == 32
    assert queued == 32
    assert written(os_pid) == first
    assert first < 2_000_000

    assert :ok = Exec.ack(exec, 32)
    count = Enum.reduce_while(1..100_000, 0, fn _, n -> take_and_ack(exec, n) end)
    assert count == 100_000
    assert written(os_pid) > first + 1_000_000
    :ok = Exec.cancel(exec)
    assert {:ok, %{status: :cancelled}} = Exec.await(exec)
  end

  defp take_and_ack(%{id: id} = exec, n) do
    receive do
      {:cmdc_exec, ^id, {:line, "0123456789"}} ->
        :ok = Exec.ack(exec, 1)
        {:cont, n + 1}
    after
      30_000 -> {:halt, n}
    end
  end

  test "a stderr flood is dropped with a count; stdout and the last stderr line arrive" do
    script = "yes EEEEEEEE | head -n 100000 >&2; echo done; echo bye >&2"
    opts = [stdin: :pipe, stream_lines: true, stream_stderr: true, window: 8]
    {:ok, exec} = Exec.start("sh", ["-c", script], opts)
    {out, err, dropped} = consume(exec, [], [], 0)

    IO.puts(
      "\nstderr flood of 100,001 lines, window 8: #{length(err)} delivered, #{dropped} dropped"
    )

    assert out == ["done"]
    assert dropped > 0
    assert length(err) + dropped == 100_001
    assert List.last(err) == "bye"
  end

  # A slowish owner: acknowledges every message, yielding now and then.
  defp consume(%{id: id} = exec, out, err, dropped) do
    receive do
      {:cmdc_exec, ^id, {:line, line}} ->
        :ok = Exec.ack(exec, 1)
        consume(exec, [line | out], err, dropped)

      {:cmdc_exec, ^id, {:stderr_line, line}} ->
        if rem(length(err), 100) == 0, do: Process.sleep(1)
        :ok = Exec.ack(exec, 1)
        consume(exec, out, [line | err], dropped)

      {:cmdc_exec, ^id, {:stderr_dropped_lines, n}} ->
        consume(exec, out, err, dropped + n)

      {:cmdc_exec, ^id, {:exit, %{code: 0}}} ->
        {Enum.reverse(out), Enum.reverse(err), dropped}
    after
      30_000 -> flunk("no exit")
    end
  end

  test "await/1 acknowledges for its caller; without a window nothing waits" do
    lines = fn opts ->
      me = self()
      args = ["-c", "seq 1 20000"]
      {:ok, r} = Exec.run("sh", args, [on_line: &send(me, {:l, &1})] ++ opts)
      {r.code, length(for(_ <- 1..20_000, do: assert_receive({:l, _})))}
    end

    assert lines.(window: 4) == {0, 20_000}
    assert lines.([]) == {0, 20_000}
  end

  test "bad window options and acks are clear errors" do
    assert_raise ArgumentError, ~r/:window to be a positive integer/, fn ->
      Exec.start("true", [], window: 0)
    end

    {:ok, plain} = Exec.start("true", [])

    assert {:error, "exec_ack: this program was not started with a window" <> _} =
             Exec.ack(plain, 1)

    {:ok, exec} = Exec.start("cat", [], stdin: :pipe, window: 2)
    assert {:error, "exec_ack: expected a non-negative integer" <> _} = Exec.ack(exec, -1)
    assert :ok = Exec.ack(exec, 1_000)
    Exec.cancel(exec)
  end
end
