# tools/call round trips per second through CMDC.Tool.MCP.Client, next to the official MCP
# Python client (mcp on PyPI), both against the same server: the official Python SDK's server
# (test/support/mcp_py_server.py), over stdio and over Streamable HTTP (loopback).
#
# Run: MIX_ENV=bench mix run bench/mcp_client.exs [CALLS]   (the servers' helpers
# live in test/support, compiled for MIX_ENV=bench; the venv is made in the test cache (CMDC.Tool.TestCache) on first use)
#
# Streamable HTTP, 1,000 calls, 2-core machine shared with 7 other builds (load average 15-38):
#   hand-written :gen_tcp client (before issue 36): sequential 221/s, 8 concurrent 263/s
#   hyper + rustls native client (after):           sequential 323/s, 8 concurrent 567/s,
#                                                   p50 1.18 ms, p99 23.2 ms (load 37)
alias CMDC.Tool.MCP.Client
alias CMDC.Tool.MCPServers

calls = String.to_integer(List.first(System.argv()) || "1000")
concurrency = 8
{:ok, python} = CMDC.Tool.PythonEnv.python()
py_client = Path.expand("mcp_client_py.py", __DIR__)

ours = fn transport ->
  {:ok, client} = Client.start_link(name: "bench", transport: transport)
  :ok = Client.await_ready(client)
  [add] = Enum.filter(Client.tools(client), &(&1.name() == "bench__add"))
  ctx = CMDC.Context.new()
  for i <- 1..20, do: {:ok, _} = add.execute(%{"a" => i, "b" => 1}, ctx)

  {us, latencies} =
    :timer.tc(fn ->
      for i <- 1..calls do
        {took, {:ok, _}} = :timer.tc(fn -> add.execute(%{"a" => i, "b" => 1}, ctx) end)
        took
      end
    end)

  sequential = calls / (us / 1_000_000)
  sorted = Enum.sort(latencies)
  pick = fn q -> Enum.at(sorted, min(round(q * calls), calls - 1)) end
  per = div(calls, concurrency)

  {us, _} =
    :timer.tc(fn ->
      1..concurrency
      |> Enum.map(fn _ ->
        Task.async(fn ->
          for i <- 1..per, do: {:ok, _} = add.execute(%{"a" => i, "b" => 1}, ctx)
        end)
      end)
      |> Enum.each(&Task.await(&1, :infinity))
    end)

  concurrent = per * concurrency / (us / 1_000_000)
  Client.stop(client)

  %{
    "sequential" => sequential,
    "concurrent" => concurrent,
    "p50" => pick.(0.5),
    "p99" => pick.(0.99)
  }
end

theirs = fn args ->
  {out, 0} = System.cmd(python, [py_client, "#{calls}", "#{concurrency}" | args])
  out |> String.split("\n", trim: true) |> List.last() |> CMDC.Tool.JSON.decode!()
end

{:ok, stdio} = MCPServers.python_stdio()
{:ok, url, server} = MCPServers.python_http()

rows = [
  {"stdio", ours.({:stdio, stdio}), theirs.(["stdio", stdio.command | stdio.args])},
  {"Streamable HTTP", ours.({:http, %{url: url}}), theirs.(["http", url])}
]

CMDC.Tool.Exec.cancel(server)

IO.puts("""
tools/call `add` against the official Python SDK server, #{calls} calls, #{concurrency} concurrent callers
target: at least the official Python client's rate (the server's own cost bounds both)
""")

IO.puts(
  String.pad_trailing("transport", 18) <>
    String.pad_trailing("mode", 12) <>
    String.pad_leading("cmdc client", 14) <>
    String.pad_leading("python client", 16) <> String.pad_leading("ratio", 8)
)

load =
  case File.read("/proc/loadavg") do
    {:ok, text} -> String.trim(text)
    {:error, _} -> "n/a"
  end

IO.puts("(machine load average while measured: #{load})\n")

for {transport, o, _t} <- rows do
  IO.puts("cmdc client, #{transport}, sequential: p50 #{o["p50"]} µs, p99 #{o["p99"]} µs")
end

IO.puts("")

for {transport, o, t} <- rows, mode <- ["sequential", "concurrent"] do
  IO.puts(
    String.pad_trailing(transport, 18) <>
      String.pad_trailing(mode, 12) <>
      String.pad_leading("#{round(o[mode])}/s", 14) <>
      String.pad_leading("#{round(t[mode])}/s", 16) <>
      String.pad_leading(:erlang.float_to_binary(o[mode] / t[mode], decimals: 2) <> "x", 8)
  )
end
