# Scheduler stalls (issue 16): `MIX_ENV=bench mix run bench/stall.exs`.
#
# For each hostile input, worker processes (one per scheduler) call our function in a loop for
# a while, and a sleeper process asks for 1 ms sleeps; the figure is the sleeper's lateness
# (worst and 99th percentile), next to the same run with the VM's own
# `binary_to_term(term_to_binary(term))` on the same term. Target: ours <= control.
# Then OS RSS (/proc/self/status) before and after concurrent 1 MB validations.

defmodule Bench.Stall do
  alias CMDC.Tool.{JSON, Registry, Schema}

  @run_ms 1_500

  def lateness(work) do
    parent = self()
    stop = :atomics.new(1, [])

    workers =
      for _ <- 1..System.schedulers_online() do
        spawn(fn -> loop(work, stop) end)
      end

    sleeper = spawn_link(fn -> send(parent, {:late, sleep_loop([], stop)}) end)
    Process.sleep(@run_ms)
    :atomics.put(stop, 1, 1)
    late = receive do: ({:late, l} -> l)
    Enum.each(workers, &Process.exit(&1, :kill))
    _ = sleeper
    sorted = Enum.sort(late)
    n = length(sorted)
    {List.last(sorted) || 0, Enum.at(sorted, max(div(n * 99, 100) - 1, 0)) || 0}
  end

  defp loop(work, stop) do
    if :atomics.get(stop, 1) == 0 do
      work.()
      loop(work, stop)
    end
  end

  defp sleep_loop(acc, stop) do
    if :atomics.get(stop, 1) == 0 do
      t = System.monotonic_time(:microsecond)
      Process.sleep(1)
      sleep_loop([System.monotonic_time(:microsecond) - t - 1_000 | acc], stop)
    else
      acc
    end
  end

  def row(name, term, ours) do
    control = fn -> :erlang.binary_to_term(:erlang.term_to_binary(term)) end
    {cw, cp} = lateness(control)
    {ow, op} = lateness(ours)
    verdict = if ow <= cw and op <= cp, do: "ok", else: "OVER"

    IO.puts(
      String.pad_trailing(name, 44) <>
        "ours worst #{fmt(ow)} p99 #{fmt(op)} | control worst #{fmt(cw)} p99 #{fmt(cp)} | #{verdict}"
    )
  end

  defp fmt(us), do: String.pad_leading("#{Float.round(us / 1000, 1)} ms", 9)

  def rss_kb do
    "/proc/self/status"
    |> File.read!()
    |> String.split("\n")
    |> Enum.find_value(fn
      "VmRSS:" <> rest -> rest |> String.trim() |> String.split() |> hd() |> String.to_integer()
      _ -> nil
    end)
  end

  def run do
    any = Schema.compile!(%{})
    IO.puts("target: ours <= control (sleeper lateness beyond 1 ms, worst and p99)\n")

    big2m = Bitwise.bsl(1, 16_000_000)
    row("validate a 2 MB bignum", big2m, fn -> Schema.validate(any, big2m) end)
    row("encode a 2 MB bignum", big2m, fn -> JSON.encode(big2m) end)
    big100k = Bitwise.bsl(1, 800_000)
    row("validate a 100 KB bignum", big100k, fn -> Schema.validate(any, big100k) end)
    list = List.duplicate(1, 2_000_000)
    row("validate a 2M-element list", list, fn -> Schema.validate(any, list) end)
    row("encode a 2M-element list", list, fn -> JSON.encode(list) end)
    tuple = [List.to_tuple(Enum.to_list(1..300_000))]
    row("error for a list holding a 300k tuple", tuple, fn -> Schema.validate(any, tuple) end)

    words = Enum.map_join(0..1999, "|", &"w#{&1}")
    alt = Schema.compile!(%{"items" => %{"pattern" => "^(#{words})$"}})
    strings = List.duplicate("w1999", 2_000)
    row("pattern over 2,000 strings", strings, fn -> Schema.validate(alt, strings) end)
    back = Schema.compile!(%{"pattern" => "^(a*)*\\1b$"})
    a30 = String.duplicate("a", 30)
    row("^(a*)*\\1b$ on 30 characters", a30, fn -> Schema.validate(back, a30) end)

    map = Map.new(1..20_000, &{"key#{&1}", String.duplicate("v", 40)})
    {:ok, text} = JSON.encode(map)

    row("~1 MB map validate + ~1 MB JSON decode", map, fn ->
      Schema.validate(any, map)
      JSON.decode(text)
    end)

    reg = Registry.new()
    mods = for i <- 1..30_000, do: CMDC.Tool.Test.Factory.tool("t#{i}")
    :ok = Registry.register(reg, mods)
    names = for i <- 1..30_000, do: "t#{i}"

    {us, _} =
      :timer.tc(fn -> Enum.each(Enum.take(names, 1_000), &Registry.unregister(reg, &1)) end)

    IO.puts(
      "\nregistry unregister at 30k tools: #{Float.round(us / 1000, 3)} µs mean (was 10,800 µs)"
    )

    before = rss_kb()

    tasks =
      for _ <- 1..(System.schedulers_online() * 4),
          do:
            Task.async(fn ->
              for _ <- 1..5, do: Schema.validate_json(any, text)
            end)

    Enum.each(tasks, &Task.await(&1, 120_000))
    :erlang.garbage_collect()

    IO.puts(
      "RSS before #{div(before, 1024)} MB, after concurrent 1 MB validate_json #{div(rss_kb(), 1024)} MB " <>
        "(:erlang.memory total #{div(:erlang.memory(:total), 1_048_576)} MB)"
    )
  end
end

Bench.Stall.run()
