# Script tools: call latency and throughput through a warm worker, next to spawning python3 per
# call (the seeds' way), and a warm start-up with 100 cached scripts.
#
#     MIX_ENV=bench mix run bench/script.exs
#
# Prints figures; asserts nothing.

alias CMDC.Tool.Script

defmodule Bench.Script do
  def percentile(sorted, p) do
    n = length(sorted)
    Enum.at(sorted, min(n - 1, round(p / 100 * (n - 1))))
  end

  def summary(label, samples_us) do
    sorted = Enum.sort(samples_us)
    median = percentile(sorted, 50)
    p99 = percentile(sorted, 99)

    IO.puts(
      String.pad_trailing(label, 52) <>
        "median #{fmt(median)}  p99 #{fmt(p99)}  (n=#{length(sorted)})"
    )

    median
  end

  def fmt(us) when us >= 1000, do: "#{Float.round(us / 1000, 2)} ms"
  def fmt(us), do: "#{us} µs"

  def time(fun) do
    {us, value} = :timer.tc(fun)
    {us, value}
  end
end

dir = Path.join(System.tmp_dir!(), "cmdc_script_bench_#{System.os_time(:millisecond)}")
File.mkdir_p!(dir)

script =
  Path.join(dir, "bench_tools.py")
  |> tap(
    &File.write!(&1, ~S'''
    """Benchmark tools."""


    def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b
    ''')
  )

# The seeds' runner: a new interpreter per call, the script imported, arguments in argv.
runner =
  Path.join(dir, "seed_runner.py")
  |> tap(
    &File.write!(&1, ~S'''
    import importlib.util, json, sys
    path, fn, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    spec = importlib.util.spec_from_file_location("m", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    print(json.dumps(getattr(m, fn)(**args)))
    ''')
  )

IO.puts("== script tools (#{System.schedulers_online()} schedulers)\n")

{cold_us, {:ok, group}} = Bench.Script.time(fn -> Script.load(script) end)
IO.puts("first load (no cache, one describer run)              #{Bench.Script.fmt(cold_us)}")
{:ok, add} = CMDC.Tool.find(group.tools, "add")

{first_us, {:ok, _}} = Bench.Script.time(fn -> Script.call(add, %{"a" => 1}) end)
IO.puts("first call (worker start + import)                    #{Bench.Script.fmt(first_us)}")

# warm-up
for _ <- 1..200, do: {:ok, _} = Script.call(add, %{"a" => 1})

n = 3_000

samples =
  for i <- 1..n do
    {us, {:ok, %{value: v}}} = Bench.Script.time(fn -> Script.call(add, %{"a" => i}) end)
    ^v = i + 2
    us
  end

IO.puts("")
warm = Bench.Script.summary("warm call, Script.call/3 (sequential)", samples)

exec_samples =
  for i <- 1..n do
    {us, {:ok, _}} = Bench.Script.time(fn -> add.execute(%{"a" => i}, %CMDC.Context{}) end)
    us
  end

Bench.Script.summary("warm call, execute/2 (text for the model)", exec_samples)

{total_us, _} =
  Bench.Script.time(fn -> for i <- 1..n, do: {:ok, _} = Script.call(add, %{"a" => i}) end)

seq_rate = n / (total_us / 1_000_000)
IO.puts("throughput, one caller                              #{round(seq_rate)} calls/s")

{par_us, _} =
  Bench.Script.time(fn ->
    1..n
    |> Task.async_stream(fn i -> {:ok, _} = Script.call(add, %{"a" => i}, max_workers: 4) end,
      max_concurrency: 4
    )
    |> Stream.run()
  end)

IO.puts(
  "throughput, 4 callers (pool of up to 4 workers)     #{round(n / (par_us / 1_000_000))} calls/s"
)

# spawn-per-call
IO.puts("")
{real, 0} = System.cmd("python3", ["-c", "import sys; print(sys.executable)"])
real = String.trim(real)
path_python = System.find_executable("python3")

spawn_samples = fn python, count ->
  for i <- 1..count do
    {us, {out, 0}} =
      Bench.Script.time(fn ->
        System.cmd(python, [runner, script, "add", ~s({"a": #{i}})])
      end)

    ^out = "#{i + 2}\n"
    us
  end
end

spawn_path =
  Bench.Script.summary(
    "spawn per call, python3 on PATH (#{Path.basename(Path.dirname(path_python))})",
    spawn_samples.(path_python, 30)
  )

spawn_real =
  Bench.Script.summary("spawn per call, resolved interpreter", spawn_samples.(real, 30))

IO.puts(
  "\nwarm worker vs spawn per call: #{round(spawn_path / warm)}× (PATH python3), " <>
    "#{round(spawn_real / warm)}× (resolved interpreter)"
)

# warm start-up with 100 cached scripts
IO.puts("")
many_dir = Path.join(dir, "many")
File.mkdir_p!(many_dir)

paths =
  for i <- 1..100 do
    path = Path.join(many_dir, "tools_#{i}.py")

    File.write!(path, """
    \"\"\"Group #{i}.\"\"\"
    from typing import Literal, Optional


    def search_#{i}(query: str, limit: int = 10, mode: Literal["fast", "full"] = "fast") -> list:
        \"\"\"Search group #{i}.

        Args:
            query: What to look for.
            limit: At most this many hits.
            mode: How hard to look.
        \"\"\"
        return []


    def fetch_#{i}(id: int, fields: Optional[list[str]] = None) -> dict:
        \"\"\"Fetch one record of group #{i}.\"\"\"
        return {}
    """)

    path
  end

{cold_many, results} = Bench.Script.time(fn -> Script.load_many(paths) end)
true = Enum.all?(results, &match?({_, {:ok, _}}, &1))
modules = Enum.flat_map(results, fn {_, {:ok, g}} -> g.tools end)

IO.puts(
  "100 scripts, no cache (one describer for all)        #{Bench.Script.fmt(cold_many)} " <>
    "(#{length(modules)} tools)"
)

startup =
  for _ <- 1..20 do
    # as on a fresh VM: no generated modules, no template, no tool data
    Script.unload(modules)
    :persistent_term.erase({CMDC.Tool.Script.Gen, :template})
    :erlang.garbage_collect()
    {cpu0, _} = :erlang.statistics(:runtime)
    {us, results} = Bench.Script.time(fn -> Script.load_many(paths) end)
    {cpu1, _} = :erlang.statistics(:runtime)
    true = Enum.all?(results, &match?({_, {:ok, %{status: :cached}}}, &1))
    {us, (cpu1 - cpu0) * 1000}
  end

Bench.Script.summary(
  "warm start-up: 100 cached scripts, 200 tools",
  Enum.map(startup, &elem(&1, 0))
)

Bench.Script.summary(
  "  its CPU time (all BEAM threads, ms resolution)",
  Enum.map(startup, &elem(&1, 1))
)

{load_avg, _} = System.cmd("cat", ["/proc/loadavg"])
IO.puts("  (machine load average while measuring: #{load_avg |> String.split() |> hd()})")

reload_samples =
  for _ <- 1..20 do
    {us, _} = Bench.Script.time(fn -> Script.load_many(paths) end)
    us
  end

Bench.Script.summary("re-load: same 100 scripts, modules already loaded", reload_samples)

Script.stop()
File.rm_rf!(dir)
