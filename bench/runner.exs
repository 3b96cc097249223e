# Overhead of CMDC.Tool.Runner over a direct execute/2 call, and run_many throughput.
# Run: MIX_ENV=bench mix run bench/runner.exs
alias CMDC.Tool.Runner
alias CMDC.Tool.Examples.Echo

ctx = CMDC.Context.new(session_id: "bench")
args = %{"text" => "hello"}
call = %{id: "c1", name: "echo", arguments: args}
json_call = %{call | arguments: ~s({"text": "hello"})}
tools = [CMDC.Tool.Examples.ReadFile, Echo]

measure = fn fun, n ->
  for _ <- 1..div(n, 10), do: fun.()

  Enum.map(1..5, fn _ ->
    {us, _} = :timer.tc(fn -> for _ <- 1..n, do: fun.() end)
    us / n
  end)
  |> Enum.min()
end

direct = measure.(fn -> Echo.execute(args, ctx) end, 100_000)
validated = measure.(fn -> CMDC.Tool.validate(Echo, args) end, 100_000)
run = measure.(fn -> Runner.run(tools, call, ctx) end, 20_000)
run_json = measure.(fn -> Runner.run(tools, json_call, ctx) end, 20_000)

f = fn us -> :erlang.float_to_binary(us, decimals: 2) <> " us" end
IO.puts("direct Echo.execute/2:                      #{f.(direct)}")
IO.puts("CMDC.Tool.validate/2 alone:                 #{f.(validated)}")
IO.puts("Runner.run (map args, validation included): #{f.(run)}")
IO.puts("Runner.run (JSON text args):                #{f.(run_json)}")
IO.puts("overhead of Runner.run over execute/2:      #{f.(run - direct)} (target < 20 us)")

calls = for i <- 1..100, do: %{call | id: "c#{i}"}
batch = measure.(fn -> Runner.run_many(tools, calls, ctx, max_concurrency: 100) end, 200)

IO.puts(
  "run_many, 100 concurrent trivial calls:     #{f.(batch)} per batch, " <>
    "#{round(100 / (batch / 1_000_000))} calls/s"
)

# Output fitting (issue 16): linear in the kept size. The issue measured 21 s for the 160 KB
# case before (a valid-prefix search dropping one byte at a time).
fit = fn text -> measure.(fn -> CMDC.Tool.Result.fit_text(text, 100_000) end, 20) end
one_bad = :binary.copy("a", 10) <> <<0xFF>> <> :binary.copy("é", 80_000)
every_other_bad = :binary.copy(<<0xFF, ?a>>, 80_000)
valid_10mb = :binary.copy("abcdefgh", 1_250_000)

IO.puts(
  "fit_text, 160 KB, one invalid byte:         #{f.(fit.(one_bad))} (before: 21 s; target < 5 ms)"
)

IO.puts(
  "fit_text, 160 KB, every other byte invalid: #{f.(fit.(every_other_bad))} (target < 50 ms)"
)

IO.puts("fit_text, 10 MB valid text cut at 100 KB:   #{f.(fit.(valid_10mb))} (target < 5 ms)")
