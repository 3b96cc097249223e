defmodule CMDC.Tool.LoadProbe do
  @moduledoc false
  # What a hostile peer costs the VM, for tests and benches: wall time of a call, the worst
  # lateness of a process that sleeps 10 ms at a time, and peak memory over a window.

  @doc "`{result, milliseconds}` of `fun`."
  def timed(fun) do
    t0 = System.monotonic_time(:millisecond)
    result = fun.()
    {result, System.monotonic_time(:millisecond) - t0}
  end

  @doc "Starts the lateness probe; `stop/1` answers its worst lateness in ms."
  def lateness do
    parent = self()
    spawn_link(fn -> late_loop(parent, 0) end)
  end

  defp late_loop(parent, worst) do
    t0 = System.monotonic_time(:millisecond)

    receive do
      {:stop, ^parent} -> send(parent, {:worst, self(), worst})
    after
      10 -> late_loop(parent, max(worst, System.monotonic_time(:millisecond) - t0 - 10))
    end
  end

  def stop(probe) do
    send(probe, {:stop, self()})

    receive do
      {:worst, ^probe, worst} -> worst
    end
  end
end
