# The MCP Streamable HTTP server under load: CLIENTS concurrent HTTP/1.1 keep-alive clients each
# making CALLS `tools/call` requests (2026-07-28, stateless, JSON answers) of a trivial tool
# (`echo`), through ours (CMDC.Tool.MCP.HTTP, in this VM) and through the official MCP Python
# SDK's server (uvicorn, stateless + JSON responses: its fastest setting, bench/mcp_http_py.py)
# in the same run, with the same load generator (below: OTP's HTTP response decoder over
# :gen_tcp; loopback only). Prints calls/s, p50/p99 latency, and our server's memory before and
# after. Targets: ≥ 5x the reference's rate, our p99 ≤ its p50.
#
# Then the client side: CMDC.Tool.MCP.Client's HTTP transport calling that server (loopback,
# plain HTTP: this bench has no TLS server), with kept-alive connections (the default) and with
# a connection per request (`keep_alive: false`, the transport before keep-alive: the
# reference), sequential and 8 callers at once. Prints calls/s and p50 of each. Target: reuse
# at least 1.5x the rate of a connection per request (loopback: the saving is the TCP
# handshake and a process; against a remote TLS server it is a round trip or two more).
# And against Python's http.server (no TCP_NODELAY, head and body written apart), where the
# client's TCP_QUICKACK keeps a kept-alive call from waiting ~40 ms on its own delayed ACK.
#
# Issue 36 moved the server from inets httpd onto hyper (in the NIF's tokio runtime). Before and
# after, 100 clients x 30 calls, the same 2-core machine shared with other builds (load 14-23):
#   before (inets httpd):  2,487 calls/s  p50 4.28 ms  p99 284.8 ms; Python SDK 154 calls/s
#                          p50 624 ms (2026-11-28 13:30, load average 23.5)
#   after (hyper):         9,708 calls/s  p50 7.4 ms   p99 23.2 ms;  Python SDK 255 calls/s
#                          p50 366 ms (2026-11-28 15:03, load average 20.6; VM memory 32.6 -> 34.3 MB)
#
# Run: MIX_ENV=bench mix run bench/mcp_http.exs [CLIENTS] [CALLS]
#      MIX_ENV=bench mix run bench/mcp_http.exs client [CALLS]   (the client figures only)
alias CMDC.Tool.JSON
alias CMDC.Tool.MCP.HTTP

{only_client?, client_calls, [clients, calls]} =
  case System.argv() do
    ["client" | rest] -> {true, String.to_integer(List.first(rest) || "2000"), [0, 0]}
    [c, n] -> {false, 2000, [String.to_integer(c), String.to_integer(n)]}
    _ -> {false, 2000, [200, 50]}
  end

defmodule Load do
  @moduledoc false
  @meta %{
    "io.modelcontextprotocol/protocolVersion" => "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities" => %{}
  }

  def request(id, port) do
    body =
      JSON.encode!(%{
        "jsonrpc" => "2.0",
        "id" => id,
        "method" => "tools/call",
        "params" => %{"name" => "echo", "arguments" => %{"text" => "hi"}, "_meta" => @meta}
      })

    [
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:#{port}\r\nContent-Type: application/json\r\n",
      "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n",
      "Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: #{byte_size(body)}\r\n\r\n",
      body
    ]
  end

  # One client: a keep-alive connection, `calls` requests one after the other; latencies in µs.
  def client(port, calls) do
    {:ok, socket} =
      :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false, packet: :http_bin], 30_000)

    for i <- 1..calls do
      started = System.monotonic_time(:microsecond)
      :ok = :gen_tcp.send(socket, request(i, port))
      body = response(socket)
      true = String.contains?(body, ~s("isError":false))
      System.monotonic_time(:microsecond) - started
    end
  after
    :ok
  end

  defp response(socket) do
    {:ok, {:http_response, _, 200, _}} = :gen_tcp.recv(socket, 0, 60_000)
    length = headers(socket, 0)
    :inet.setopts(socket, packet: :raw)
    {:ok, body} = :gen_tcp.recv(socket, length, 60_000)
    :inet.setopts(socket, packet: :http_bin)
    body
  end

  defp headers(socket, length) do
    case :gen_tcp.recv(socket, 0, 60_000) do
      {:ok, {:http_header, _, :"Content-Length", _, value}} ->
        headers(socket, String.to_integer(value))

      {:ok, {:http_header, _, _, _, _}} ->
        headers(socket, length)

      {:ok, :http_eoh} ->
        length
    end
  end

  def run(port, clients, calls) do
    started = System.monotonic_time(:microsecond)

    latencies =
      1..clients
      |> Enum.map(fn _ -> Task.async(fn -> client(port, calls) end) end)
      |> Enum.flat_map(&Task.await(&1, :infinity))

    seconds = (System.monotonic_time(:microsecond) - started) / 1_000_000
    sorted = Enum.sort(latencies)
    at = fn q -> Enum.at(sorted, min(length(sorted) - 1, trunc(q * length(sorted)))) / 1000 end
    %{rate: length(sorted) / seconds, p50: at.(0.5), p99: at.(0.99), seconds: seconds}
  end

  def wait_port(port, tries \\ 200) do
    case :gen_tcp.connect({127, 0, 0, 1}, port, [], 100) do
      {:ok, s} ->
        :gen_tcp.close(s)

      _ when tries > 0 ->
        Process.sleep(100)
        wait_port(port, tries - 1)
    end
  end
end

# The ceiling inets httpd sets on this machine and load: the same requests answered with a fixed
# body by a bare httpd module (no MCP, no JSON, no runner).
defmodule Bare do
  @moduledoc false
  @body ~s({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}})
  def unquote(:do)(_mod) do
    head = [
      code: 200,
      content_type: ~c"application/json",
      content_length: ~c"#{byte_size(@body)}"
    ]

    {:proceed, [{:response, {:response, head, [@body]}}]}
  end
end

# Our client against our server: kept-alive connections vs one per request.
defmodule Reuse do
  @moduledoc false
  alias CMDC.Tool.MCP.Client

  def run(url, calls, concurrent? \\ true) do
    for keep_alive <- [true, false], into: %{} do
      name = "bench_#{keep_alive}"
      spec = %{url: url, keep_alive: keep_alive}
      {:ok, client} = Client.start_link(name: name, transport: {:http, spec})
      :ok = Client.await_ready(client)
      call = fn -> {:ok, _} = Client.call_tool(client, "echo", %{"text" => "hi"}) end
      for _ <- 1..50, do: call.()
      sequential = measure(fn -> [timed(call, calls)] end, calls)
      per = div(calls, 8)
      tasks = fn -> Enum.map(1..8, fn _ -> Task.async(fn -> timed(call, per) end) end) end

      concurrent =
        if concurrent?,
          do: measure(fn -> Enum.map(tasks.(), &Task.await(&1, :infinity)) end, per * 8)

      GenServer.stop(client)
      {keep_alive, %{sequential: sequential, concurrent: concurrent}}
    end
  end

  defp timed(call, n) do
    for _ <- 1..n do
      started = System.monotonic_time(:microsecond)
      call.()
      System.monotonic_time(:microsecond) - started
    end
  end

  defp measure(fun, n) do
    started = System.monotonic_time(:microsecond)
    latencies = fun.() |> List.flatten() |> Enum.sort()
    seconds = (System.monotonic_time(:microsecond) - started) / 1_000_000
    %{rate: n / seconds, p50: Enum.at(latencies, div(length(latencies), 2)) / 1000}
  end

  # A server without TCP_NODELAY that writes an answer's head and body apart (Python's
  # http.server, test/support/mcp_keepalive.py): what the client's TCP_QUICKACK is for.
  def nagle(calls) do
    script = Path.expand("../test/support/mcp_keepalive.py", __DIR__)
    {:ok, probe} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(probe)
    :gen_tcp.close(probe)

    {:ok, exec} =
      CMDC.Tool.Exec.start(System.find_executable("python3"), [script, "keepalive", "#{port}"])

    Load.wait_port(port)
    figures = run("http://127.0.0.1:#{port}/mcp", calls, false)
    CMDC.Tool.Exec.cancel(exec)
    figures
  end

  def report(r, nagle, calls) do
    row = fn %{rate: rate, p50: p50} ->
      "#{round(rate)} calls/s, p50 #{Float.round(p50, 3)} ms"
    end

    on = r[true]
    off = r[false]

    ratio = fn what ->
      Float.round(Map.fetch!(on, what).rate / Map.fetch!(off, what).rate, 2)
    end

    IO.puts("""
    CMDC.Tool.MCP.Client over HTTP -> CMDC.Tool.MCP.HTTP (loopback, plain HTTP), #{calls} echo calls:
      sequential, kept alive:               #{row.(on.sequential)}
      sequential, a connection per request: #{row.(off.sequential)}  (reference)
      8 callers, kept alive:                #{row.(on.concurrent)}
      8 callers, a connection per request:  #{row.(off.concurrent)}  (reference)
      ratio:                                #{ratio.(:sequential)}x sequential, #{ratio.(:concurrent)}x with 8 callers (target >= 1.5x)
    against Python's http.server (no TCP_NODELAY), #{div(calls, 4)} sequential calls:
      kept alive:                           #{row.(nagle[true].sequential)}  (~40 ms each without the client's TCP_QUICKACK)
      a connection per request:             #{row.(nagle[false].sequential)}  (reference)
      machine:                              #{System.schedulers_online()} schedulers, load average #{File.read!("/proc/loadavg") |> String.split() |> Enum.take(3) |> Enum.join(" ")}
    """)
  end
end

{:ok, own} = HTTP.start_link(tools: [CMDC.Tool.Examples.Echo], port: 0, max_connections: 200)

client_figures = Reuse.run(HTTP.url(own), client_calls)
HTTP.stop(own)
nagle_figures = Reuse.nagle(div(client_calls, 4))

if only_client? do
  Reuse.report(client_figures, nagle_figures, client_calls)
  System.halt(0)
end

memory = fn -> :erlang.memory(:total) end
mb = fn bytes -> Float.round(bytes / 1_048_576, 1) end

# Ours.
{:ok, server} =
  HTTP.start_link(tools: [CMDC.Tool.Examples.Echo], port: 0, max_connections: clients + 50)

port = HTTP.port(server)
# Warm-up (code loading, the schema compiled once), not counted.
Load.run(port, 4, 20)
:erlang.garbage_collect()
before = memory.()
ours = Load.run(port, clients, calls)
after_run = memory.()
HTTP.stop(server)

# Stopping a stand-alone httpd exits its links: the bench process survives it.
Process.flag(:trap_exit, true)
root = String.to_charlist(System.tmp_dir!())

{:ok, bare} =
  :inets.start(
    :httpd,
    [port: 0, bind_address: {127, 0, 0, 1}, server_name: ~c"bare", server_root: root] ++
      [document_root: root, modules: [Bare], max_clients: clients + 50],
    :stand_alone
  )

[{{_, _, bare_port, _}, _, _, _}] = Supervisor.which_children(bare)
Load.run(bare_port, 4, 20)
ceiling = Load.run(bare_port, clients, calls)
:inets.stop(:stand_alone, bare)

# The reference, same load.
{:ok, python} = CMDC.Tool.PythonEnv.python()
{:ok, probe} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
{:ok, py_port} = :inet.port(probe)
:gen_tcp.close(probe)
script = Path.expand("mcp_http_py.py", __DIR__)

py =
  Port.open({:spawn_executable, python}, [
    :binary,
    :stderr_to_stdout,
    args: [script, "#{py_port}"]
  ])

{:os_pid, py_pid} = Port.info(py, :os_pid)
Load.wait_port(py_port)
Load.run(py_port, 4, 20)
theirs = Load.run(py_port, clients, calls)
System.cmd("kill", ["#{py_pid}"])

fmt = fn r ->
  "#{round(r.rate)} calls/s   p50 #{Float.round(r.p50, 2)} ms   p99 #{Float.round(r.p99, 2)} ms   (#{Float.round(r.seconds, 1)} s)"
end

IO.puts("""
MCP tools/call over Streamable HTTP, #{clients} concurrent clients x #{calls} calls (echo, loopback):
  cmdc_tool (hyper in the NIF):  #{fmt.(ours)}
  bare inets httpd, fixed body:  #{fmt.(ceiling)}  (the old transport's ceiling here)
  Python SDK 2.3.0 (uvicorn):    #{fmt.(theirs)}
  ratio:                         #{Float.round(ours.rate / theirs.rate, 1)}x the rate (target >= 5x); our p99 #{Float.round(ours.p99, 2)} ms vs its p50 #{Float.round(theirs.p50, 2)} ms (target <=)
  our VM memory:                 #{mb.(before)} MB before, #{mb.(after_run)} MB after the run
  machine:                       #{System.schedulers_online()} schedulers, load average #{File.read!("/proc/loadavg") |> String.split() |> Enum.take(3) |> Enum.join(" ")}
""")

Reuse.report(client_figures, nagle_figures, client_calls)
