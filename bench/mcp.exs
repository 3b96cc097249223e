# The MCP stdio server as a client sees it: time from start to the first tools/list answer,
# and tools/call round trips per second for a trivial tool.
# Run: MIX_ENV=bench mix run bench/mcp.exs   (the server is started as `bin/cmdc-mcp`, a real subprocess)
alias CMDC.Tool.JSON

root = Path.expand("..", __DIR__)
System.cmd("mix", ["compile"], cd: root, stderr_to_stdout: true)

frame = fn map -> JSON.encode!(map) <> "\n" end

recv = fn port, id ->
  Stream.repeatedly(fn ->
    receive do
      {^port, {:data, {:eol, line}}} -> JSON.decode!(line)
    after
      60_000 -> raise "no answer from the server"
    end
  end)
  |> Enum.find(&(&1["id"] == id))
end

started = System.monotonic_time(:microsecond)

port =
  Port.open({:spawn_executable, Path.join(root, "bin/cmdc-mcp")}, [
    :binary,
    {:line, 1_000_000},
    :use_stdio,
    {:cd, root}
  ])

init = %{
  "protocolVersion" => "2025-11-25",
  "capabilities" => %{},
  "clientInfo" => %{"name" => "bench", "version" => "1"}
}

Port.command(
  port,
  frame.(%{"jsonrpc" => "2.0", "id" => 0, "method" => "initialize", "params" => init})
)

Port.command(port, frame.(%{"jsonrpc" => "2.0", "method" => "notifications/initialized"}))
Port.command(port, frame.(%{"jsonrpc" => "2.0", "id" => 1, "method" => "tools/list"}))
%{"result" => %{"tools" => tools}} = recv.(port, 1)
first_list_ms = (System.monotonic_time(:microsecond) - started) / 1000

call = fn id ->
  params = %{"name" => "echo", "arguments" => %{"text" => "hi"}}

  Port.command(
    port,
    frame.(%{"jsonrpc" => "2.0", "id" => id, "method" => "tools/call", "params" => params})
  )

  %{"result" => %{"isError" => false}} = recv.(port, id)
end

for id <- 2..200, do: call.(id)
n = 3_000
{us, _} = :timer.tc(fn -> for id <- 1_000..(1_000 + n - 1), do: call.(id) end)

IO.puts(
  "start to first tools/list answer: #{Float.round(first_list_ms, 1)} ms (#{length(tools)} tools, includes VM start)"
)

IO.puts(
  "tools/call echo, sequential:      #{round(n / (us / 1_000_000))} round trips/s (#{Float.round(us / n, 1)} us each)"
)

Port.close(port)
