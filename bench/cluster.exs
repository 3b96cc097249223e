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

# Cluster.to_schema with to_schema/3's options over 1,000 tools made on the peer (modules that
# exist there only), next to CMDC.Tool.to_schema/3 over the same tools here (the reference; the
# view lists a remote node's tools by name, so the local list is in that order too). Target
# (ours): within 3x of the reference: the peer describes its tools (callbacks, examples,
# namespaces) and they cross the distribution once.
# Measured 2026-11-26 on 2 shared cores: 16-22 ms against 8-13 ms (1.7-2.2x).
items =
  for i <- 1..1_000,
      do:
        {"grp#{rem(i, 20)}__tool_#{i}", "Does thing #{i}.",
         %{"type" => "object", "properties" => %{"q" => %{"type" => "string"}}}}

items = Enum.sort_by(items, &elem(&1, 0))
made = :erpc.call(node, CMDC.Tool.Test.Factory, :tools, [items])
{:ok, _} = :erpc.call(node, Cluster, :publish, [made, [scope: :bench_schema]])
here = CMDC.Tool.Test.Factory.tools(items)
opts = [format: :openai_responses, namespaces: true, defer: true, warnings: :ignore]
view = fn -> Cluster.to_schema([{:scope, :bench_schema} | opts]) end
true = view.() == CMDC.Tool.to_schema(here, %{}, opts)
cluster_ms = measure.(view, 20) / 1_000
local_ms = measure.(fn -> CMDC.Tool.to_schema(here, %{}, opts) end, 20) / 1_000
ms = fn v -> :erlang.float_to_binary(v, decimals: 1) <> " ms" end

IO.puts(
  "to_schema, 1,000 tools (Responses, namespaces, defer): Cluster #{ms.(cluster_ms)}, " <>
    "to_schema/3 here #{ms.(local_ms)} (ratio #{Float.round(cluster_ms / local_ms, 1)}x, target <= 3x)"
)

:peer.stop(peer)
