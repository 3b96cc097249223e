# Remote tool calls between two BEAM nodes on this machine, next to local calls.
# Run: MIX_ENV=bench mix run bench/cluster.exs
alias CMDC.Tool.{Cluster, Runner}
alias CMDC.Tool.Examples.Echo

System.cmd("epmd", ["-daemon"])

Enum.reduce_while(1..50, nil, fn _, _ ->
  case :net_kernel.start([:"bench_#{System.unique_integer([:positive])}@127.0.0.1", :longnames]) do
    {:ok, _} -> {:halt, :ok}
    _ -> Process.sleep(100) && {:cont, nil}
  end
end)

args = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

{:ok, peer, node} =
  :peer.start_link(%{name: :bench_peer, host: ~c"127.0.0.1", longnames: true, args: args})

{:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:cmdc_tool])
{:ok, _} = :erpc.call(node, Cluster, :publish, [[Echo], [scope: :bench]])
Process.sleep(200)
{:ok, %{node: ^node}} = Cluster.find("echo", scope: :bench)

ctx = CMDC.Context.new(session_id: "bench")
call = %{id: "b", name: "echo", arguments: %{"text" => "hello"}}

measure = fn fun, n ->
  for _ <- 1..div(n, 10), do: fun.()

  Enum.map(1..3, fn _ ->
    {us, _} = :timer.tc(fn -> for _ <- 1..n, do: fun.() end)
    us / n
  end)
  |> Enum.min()
end

local = measure.(fn -> Runner.run([Echo], call, ctx) end, 5_000)
remote = measure.(fn -> %{content: "hello"} = Cluster.run(call, ctx, scope: :bench) end, 2_000)
lookup = measure.(fn -> Cluster.find("echo", scope: :bench) end, 2_000)

f = fn us -> :erlang.float_to_binary(us, decimals: 1) <> " us" end
IO.puts("local Runner.run (echo):            #{f.(local)}")

IO.puts(
  "remote Cluster.run (echo, 2 nodes): #{f.(remote)} -> #{round(1_000_000 / remote)} round trips/s"
)

IO.puts("added latency of the remote call:   #{f.(remote - local)}")
IO.puts("Cluster.find (asks every node):     #{f.(lookup)}")
:peer.stop(peer)
