# What a config edit costs a user of cmdc_tool (issue 40, item 3): a freshly generated mix app
# depending on this checkout by path, then `mix cmdc.tools list` after
#   1. an edit of `config :cmdc_tool` in config/runtime.exs (what the docs and the generator
#      say): target 0 files of cmdc_tool recompiled;
#   2. an edit of `config :cmdc_tool` in config/config.exs, for reference: Mix 1.14 recompiles
#      every module of a dependency whose own compile-time config changed (its Elixir
#      compiler compares `Mix.Tasks.Loadconfig.read_compile/0` per app with its manifest), so
#      all of cmdc_tool recompiles; `mix cmdc.tools doctor` names that config as a finding;
#   3. an edit of config/config.exs that leaves `:cmdc_tool` as it was: 0 files.
# Prints the files recompiled (the figure that matters) and the wall time (load-dependent).
# Run: MIX_ENV=bench mix run bench/config_edit.exs [RUNS]
#
# Measured 2026-11-28 13:40 UTC, shared 2-core machine (8 engineers building), 2 runs each:
#   runtime.exs edit of :cmdc_tool            0 files   2.5-3.3 s (Mix start + the listing)
#   config.exs edit of :cmdc_tool           103 files  34.6-38.8 s
#   config.exs edit of another app's key      0 files   4.2-4.5 s
alias CMDC.Tool.ProjectApp

runs = String.to_integer(List.first(System.argv()) || "2")
dir = Path.join(System.tmp_dir!(), "cmdc_config_bench_#{System.unique_integer([:positive])}")
# A copy of the checkout: edits made to this one while the bench runs do not count.
app = ProjectApp.bare!(dir, CMDC.Tool.TestCheckout.copy!(dir))

{_, 0} = ProjectApp.mix(app, ["cmdc.gen.tool", "repeat"])
File.mkdir_p!(Path.join(app, "config"))
File.write!(Path.join(app, "config/config.exs"), "import Config\n")

recompiled = fn out ->
  case Regex.run(~r/==> cmdc_tool\nCompiling (\d+) files? \(\.ex\)/, out) do
    [_, n] -> String.to_integer(n)
    nil -> 0
  end
end

list = fn ->
  started = System.monotonic_time(:millisecond)
  {out, 0} = ProjectApp.mix(app, ["cmdc.tools", "list"])
  {recompiled.(out), System.monotonic_time(:millisecond) - started}
end

write = fn file, text -> File.write!(Path.join(app, file), "import Config\n" <> text) end

# Settle: the tool compiled, runtime.exs read once.
write.("config/runtime.exs", "config :cmdc_tool, tools: [MyAgent.Tools.Repeat]\n")
list.()

cases = [
  {"runtime.exs: config :cmdc_tool edited", "config/runtime.exs",
   &"config :cmdc_tool, tools: [MyAgent.Tools.Repeat], settings_hooks: #{rem(&1, 2) == 0}\n",
   "target 0"},
  {"config.exs: config :cmdc_tool edited", "config/config.exs",
   &"config :cmdc_tool, examples: #{rem(&1, 2) == 1}\n", "Mix recompiles the dependency"},
  {"config.exs: another app's key edited", "config/config.exs",
   &"config :cmdc_tool, examples: false\nconfig :my_agent, answer: #{&1}\n", "target 0"}
]

IO.puts(
  "files of cmdc_tool recompiled by `mix cmdc.tools list` after a config edit (#{runs} runs)"
)

for {label, file, text, note} <- cases do
  results =
    for i <- 1..runs do
      write.(file, text.(i))
      list.()
    end

  files = results |> Enum.map(&elem(&1, 0)) |> Enum.uniq() |> Enum.join("/")
  times = results |> Enum.map(&elem(&1, 1)) |> Enum.min_max()

  IO.puts(
    "  #{String.pad_trailing(label, 40)} #{String.pad_leading(files, 4)} files  " <>
      "#{elem(times, 0)}-#{elem(times, 1)} ms  (#{note})"
  )
end

File.rm_rf!(dir)
