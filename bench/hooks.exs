# What hooks cost a call (CMDC.Tool.Hooks), with the echo tool:
#   1. the call alone: `Echo.execute/2` called directly, and the same call through
#      CMDC.Tool.Runner.run/4 with no hooks (what the hook lookup, 4 ETS reads with the cached
#      settings files' hooks, adds is shown, and the lookup without the settings files);
#   2. one Elixir hook (before_call + after_call, both answering :ok);
#   3. one command hook (`PreToolUse`, `true` through sh -c, on the native exec layer);
#   4. the same command hook behind an `if` rule the call does not match (`Bash(git commit:*)`:
#      skipped before any process starts), and marked `async` (started in the background: the
#      call does not wait for it);
#   5. for scale, `sh -c true` alone through CMDC.Tool.Exec (the floor of a command hook).
# Run: MIX_ENV=bench mix run bench/hooks.exs [N]   (N calls per case; default 2,000)
alias CMDC.Tool.{Exec, Hooks, Runner}
alias CMDC.Tool.Examples.Echo

n = String.to_integer(List.first(System.argv()) || "2000")
command_n = max(div(n, 20), 20)
ctx = %CMDC.Context{session_id: "bench-hooks"}
call = %{id: "1", name: "echo", arguments: %{"text" => "hi"}}

dir = Path.join(System.tmp_dir!(), "cmdc_bench_hooks_#{System.unique_integer([:positive])}")
File.mkdir_p!(Path.join(dir, ".claude"))

File.write!(Path.join(dir, ".claude/settings.json"), ~s({"hooks": {"PreToolUse": [
  {"matcher": "echo", "hooks": [{"type": "command", "command": "true"}]}]}}))

command_hooks = Hooks.Config.active(Hooks.load(cwd: dir, home: dir, trust_project: true))
elixir_hook = [[name: "noop", before_call: fn _, _ -> :ok end, after_call: fn _, _, _ -> :ok end]]

# Microseconds per iteration: median of 5 rounds of `count` runs.
measure = fn count, fun ->
  for _ <- 1..(div(count, 10) + 1), do: fun.()

  rounds =
    for _ <- 1..5 do
      t0 = System.monotonic_time(:microsecond)
      for _ <- 1..count, do: fun.()
      (System.monotonic_time(:microsecond) - t0) / count
    end

  rounds |> Enum.sort() |> Enum.at(2)
end

direct = measure.(n * 10, fn -> {:ok, "hi"} = Echo.execute(%{"text" => "hi"}, ctx) end)
lookup = measure.(n * 10, fn -> [] = Hooks.for_call([Echo], ctx, []) end)
# The settings files' hooks read by the runner itself (cached, checked once a second) turned off.
bare = measure.(n * 10, fn -> [] = Hooks.for_call([Echo], ctx, settings_hooks: false) end)
alone = measure.(n, fn -> "hi" = Runner.run([Echo], call, ctx).content end)
elixir = measure.(n, fn -> "hi" = Runner.run([Echo], call, ctx, hooks: elixir_hook).content end)

command =
  measure.(command_n, fn -> "hi" = Runner.run([Echo], call, ctx, hooks: command_hooks).content end)

{:ok, rule} = CMDC.Tool.Hooks.Condition.parse("Bash(git commit:*)")
unmatched = Enum.map(command_hooks, &%{&1 | condition: rule})
skipped = measure.(n, fn -> "hi" = Runner.run([Echo], call, ctx, hooks: unmatched).content end)
background = Enum.map(command_hooks, &%{&1 | async: :async})

async =
  measure.(command_n, fn -> "hi" = Runner.run([Echo], call, ctx, hooks: background).content end)

sh = measure.(command_n, fn -> {:ok, %{code: 0}} = Exec.run("sh", ["-c", "true"]) end)
File.rm_rf!(dir)

row = fn label, us, ref ->
  extra = if ref, do: "  (+#{Float.round(us - ref, 1)} µs over the runner alone)", else: ""

  String.pad_trailing(label, 38) <>
    String.pad_leading("#{Float.round(us, if(us < 10, do: 2, else: 1))} µs", 12) <> extra
end

IO.puts("""
per call through Runner.run/4 (echo tool; median of 5 rounds; #{n} calls, #{command_n} for commands):
#{row.("the tool alone (Echo.execute/2)", direct, nil)}
#{row.("the hook lookup alone (none attached)", lookup, nil)}
#{row.("  the same, settings_hooks: false", bare, nil)}
#{row.("runner, no hooks", alone, nil)}
#{row.("one Elixir hook (before + after)", elixir, alone)}
#{row.("one command hook (PreToolUse, `true`)", command, alone)}
#{row.("the same behind an unmatched `if`", skipped, alone)}
#{row.("the same, `async` (not waited for)", async, alone)}
#{row.("reference: sh -c true via Exec alone", sh, nil)}
targets: no hooks adds under 1 µs (the lookup); an Elixir hook adds under 50 µs (two hook
processes); a command hook costs about one process start (the reference line), under 2x it;
one whose `if` does not match costs under 5 µs; an `async` one adds its process spawn only.
""")
