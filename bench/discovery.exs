# Discovery cost for 1,000 tool files: the native scan cold and warm, the first full load
# (compiling every file in the compiler VM), and a warm refresh where nothing changed.
# Run: MIX_ENV=bench mix run bench/discovery.exs
alias CMDC.Tool.{Discovery, Native}

defmodule Bench.Registry do
  # A minimal in-memory registry with the calls Discovery makes (the real one is
  # CMDC.Tool.Registry): list/1, register/3, replace/2, put_settings/3.
  defstruct [:pid]

  def new,
    do:
      (fn ->
         {:ok, pid} = Agent.start_link(fn -> [] end)
         %__MODULE__{pid: pid}
       end).()

  def list(%{pid: pid}), do: Agent.get(pid, & &1)
  def register(%{pid: pid}, mods, _opts), do: Agent.update(pid, &(&1 ++ mods))
  def replace(%{pid: pid}, mods), do: Agent.update(pid, fn _ -> mods end)
  def put_settings(_reg, _name, _settings), do: :ok
end

count = 1_000
root = Path.join(System.tmp_dir!(), "cmdc_bench_discovery_#{System.unique_integer([:positive])}")
home = Path.join(root, "home")
cwd = Path.join(root, "proj")
File.mkdir_p!(cwd)
prefix = "BenchDisc#{System.unique_integer([:positive])}"

# 1,000 files over the user folders (10 subfolders of 100), every 10th with a .json metadata file.
for i <- 1..count do
  dir = Path.join([home, ".cmdc/tools", "group#{rem(i, 10)}"])
  File.mkdir_p!(dir)

  File.write!(Path.join(dir, "tool#{i}.ex"), """
  defmodule #{prefix}.Tool#{i} do
    @behaviour CMDC.Tool
    def name, do: "bench_tool_#{i}"
    def description, do: "Bench tool #{i}."
    def parameters, do: %{"type" => "object", "properties" => %{"n" => %{"type" => "integer"}}}
    def execute(%{"n" => n}, _ctx), do: {:ok, Integer.to_string(n + #{i})}
  end
  """)

  if rem(i, 10) == 0, do: File.write!(Path.join(dir, "tool#{i}.json"), ~s({"timeout": #{i}}))
end

opts = [home: home, cwd: cwd, cmdc_home: nil, sources: [:user]]

native = %{
  cwd: cwd,
  home: home,
  cmdc_home: nil,
  paths: [],
  explicit: false,
  project: false,
  user: true,
  plugins: false,
  trust: nil,
  trusted: []
}

ms = fn us -> :erlang.float_to_binary(us / 1000, decimals: 2) end

median = fn fun, runs ->
  times = for _ <- 1..runs, do: elem(:timer.tc(fun), 0)
  times |> Enum.sort() |> Enum.at(div(runs, 2))
end

{cold_scan, {:ok, {scan, _digest}}} = :timer.tc(fn -> Native.discovery_scan(native, nil) end)
^count = length(scan.files)
warm_scan = median.(fn -> Native.discovery_scan(native, nil) end, 21)

registry = Bench.Registry.new()
{cold_load, {:ok, state}} = :timer.tc(fn -> Discovery.load_into(registry, opts) end)
^count = length(state.tools)
[] = state.report.errors

{:ok, state} = Discovery.refresh(registry, state)
warm_refresh = median.(fn -> {:ok, _} = Discovery.refresh(registry, state) end, 21)
[] = state.changes.recompiled

# One file edited: only it is recompiled (one compiler-VM start).
path = Path.join([home, ".cmdc/tools/group1/tool1.ex"])
File.write!(path, File.read!(path) <> "\n# edited\n")
{one_edit, {:ok, state}} = :timer.tc(fn -> Discovery.refresh(registry, state) end)
[^path] = state.changes.recompiled

load =
  case File.read("/proc/loadavg") do
    {:ok, text} -> "load average " <> (text |> String.split() |> Enum.take(3) |> Enum.join(" "))
    _ -> "load average unknown"
  end

IO.puts("""
discovery, #{count} tool files (#{div(count, 10)} with .json metadata), #{System.schedulers_online()} schedulers, #{load}
  native scan, cold (first scan):          #{ms.(cold_scan)} ms
  native scan, warm (median of 21):        #{ms.(warm_scan)} ms
  refresh, nothing changed (median of 21): #{ms.(warm_refresh)} ms   (target < 20 ms)
  first load (compile + load + check all): #{ms.(cold_load)} ms
  refresh after editing one file:          #{ms.(one_edit)} ms
""")

File.rm_rf!(root)
