# Hostile clients against the MCP HTTP server (issue 36): full-size attacks while a well-behaved
# client calls tools/list every 20 ms on its own connection. For each attack: that client's
# p50/p95 and failures (target p95 < 100 ms on a quiet machine), the VM's RSS growth over its
# idle figure (VmRSS: the native transport's buffers are not in :erlang.memory; target < 100 MB),
# and what the attack got.
#
#   slow bodies     1,100 connections each declaring a 100,000-byte body and sending 200 B/s
#                   (before: 531 held after 41 s, the body timer starting after 16 kB)
#   unread streams  4 tools/call streams of 64 kB progress events, never read, 30 s
#                   (before: RSS 67 MB -> 2.19 GB in 30 s for one, 1.3 GB for 4)
#   initialize      12,000 `initialize` from one address (8 at a time), then a new client
#   flood           (before: the 10,000 cap reached, every newcomer 503 for up to an hour)
#   pipelining      200 connections each pipelining 10 requests (before: no answer at all)
#
# First run, 2026-11-28 15:04, load average 20 on the shared 2-core machine, before progress
# coalesced in the request process (RSS is the whole VM's, cumulative over the attacks):
#   slow_bodies       good p50/p95 0.7 / 28.2 ms, 0 failed; RSS 67 -> 1076 MB; 0 of 1,100 open
#   unread_streams    117 / 625 ms;  RSS 1064 -> 2978 MB; 0 of 4 streams closed
#   initialize_flood  80 / 2291 ms;  RSS 3271 -> 6422 MB; 12,000 x 200, a newcomer then 200
#   pipelining        15.5 / 41.6 ms; 2,000 of 2,000 answered in order
# The RSS growth is far over the 100 MB target and not yet explained (not in :erlang.memory's
# figures the ExUnit tests watch): to be found before the issue can close.
#
# Run: MIX_ENV=bench mix run bench/mcp_hostile_server.exs [ATTACK...]
#      (slow_bodies, unread_streams, initialize_flood, pipelining; all by default)
Logger.configure(level: :error)
Code.require_file(Path.expand("../test/fixtures/mcp_tools/flood.ex", __DIR__))

alias CMDC.Tool.JSON
alias CMDC.Tool.MCP.HTTP

defmodule Hostile do
  @moduledoc false
  @meta %{
    "io.modelcontextprotocol/protocolVersion" => "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities" => %{}
  }

  def rss_mb do
    "/proc/self/status"
    |> File.read!()
    |> then(&Regex.run(~r/VmRSS:\s+(\d+) kB/, &1))
    |> then(fn [_, kb] -> String.to_integer(kb) / 1024 end)
  end

  def modern(id, method, params \\ %{}) do
    body =
      JSON.encode!(%{
        "jsonrpc" => "2.0",
        "id" => id,
        "method" => method,
        "params" => Map.put(params, "_meta", @meta)
      })

    name = get_in(params, ["name"])

    [
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
      "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n",
      "Mcp-Method: #{method}\r\n",
      if(name, do: "Mcp-Name: #{name}\r\n", else: ""),
      "Content-Length: #{byte_size(body)}\r\n\r\n",
      body
    ]
  end

  def legacy_initialize(id) do
    body =
      JSON.encode!(%{
        "jsonrpc" => "2.0",
        "id" => id,
        "method" => "initialize",
        "params" => %{"protocolVersion" => "2025-11-25", "capabilities" => %{}}
      })

    [
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
      "Content-Length: #{byte_size(body)}\r\n\r\n",
      body
    ]
  end

  def connect(port, opts \\ []) do
    {:ok, s} =
      :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false, packet: :raw] ++ opts)

    s
  end

  # One response: {status, headers, body} (content-length bodies only).
  def response(socket, seen \\ "") do
    case :binary.split(seen, "\r\n\r\n") do
      [head, rest] ->
        ["HTTP/1.1 " <> <<status::binary-3, _::binary>> | lines] = String.split(head, "\r\n")

        headers =
          Map.new(lines, fn l ->
            [k, v] = String.split(l, ":", parts: 2)
            {String.downcase(k), String.trim(v)}
          end)

        length = String.to_integer(headers["content-length"] || "0")
        {body, rest} = body(socket, rest, length)
        {String.to_integer(status), headers, body, rest}

      [_] ->
        case :gen_tcp.recv(socket, 0, 30_000) do
          {:ok, more} -> response(socket, seen <> more)
          {:error, reason} -> {:error, reason}
        end
    end
  end

  defp body(socket, seen, length) when byte_size(seen) < length do
    {:ok, more} = :gen_tcp.recv(socket, 0, 30_000)
    body(socket, seen <> more, length)
  end

  defp body(_socket, seen, length), do: :erlang.split_binary(seen, length)

  # The well-behaved client: tools/list every 20 ms until told to stop; its latencies in ms.
  def good_client(port) do
    parent = self()

    spawn_link(fn ->
      socket = connect(port)
      good_loop(parent, port, socket, [], 0, 1)
    end)
  end

  defp good_loop(parent, port, socket, times, failures, id) do
    receive do
      {:stop, ^parent} -> send(parent, {:good, self(), times, failures})
    after
      20 ->
        t0 = System.monotonic_time(:microsecond)
        :gen_tcp.send(socket, modern(id, "tools/list"))

        case response(socket) do
          {200, _, _, _} ->
            t = (System.monotonic_time(:microsecond) - t0) / 1000
            good_loop(parent, port, socket, [t | times], failures, id + 1)

          _ ->
            :gen_tcp.close(socket)
            good_loop(parent, port, connect(port), times, failures + 1, id + 1)
        end
    end
  end

  def stop_good(pid) do
    send(pid, {:stop, self()})

    receive do
      {:good, ^pid, times, failures} -> {Enum.sort(times), failures}
    end
  end

  def pct([], _), do: 0.0
  def pct(sorted, p), do: Enum.at(sorted, min(length(sorted) - 1, trunc(length(sorted) * p)))

  # Whether the server still holds the connection (what it sent is read and dropped).
  def open?(socket) do
    case :gen_tcp.recv(socket, 0, 0) do
      {:ok, _} -> open?(socket)
      {:error, :timeout} -> true
      {:error, _} -> false
    end
  end

  # Reads until the server closes (or 5 s of silence): :closed / :timeout.
  def drain(socket) do
    case :gen_tcp.recv(socket, 0, 5_000) do
      {:ok, _} -> drain(socket)
      {:error, reason} -> reason
    end
  end

  # Peak RSS while `fun` runs.
  def peak_rss(fun) do
    parent = self()
    sampler = spawn_link(fn -> sample(parent, rss_mb()) end)
    result = fun.()
    send(sampler, {:stop, parent})

    receive do
      {:peak, ^sampler, peak} -> {result, peak}
    end
  end

  defp sample(parent, peak) do
    receive do
      {:stop, ^parent} -> send(parent, {:peak, self(), peak})
    after
      100 -> sample(parent, max(peak, rss_mb()))
    end
  end
end

attacks = %{
  "slow_bodies" => fn port, _server ->
    sockets =
      for _ <- 1..1_100 do
        s = Hostile.connect(port)

        :gen_tcp.send(
          s,
          "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        )

        s
      end

    # 200 B/s each, in 20-byte steps, for 41 s.
    step = String.duplicate(" ", 20)

    for _ <- 1..410 do
      Enum.each(sockets, &:gen_tcp.send(&1, step))
      Process.sleep(100)
    end

    open = Enum.count(sockets, &Hostile.open?/1)
    Enum.each(sockets, &:gen_tcp.close/1)
    "#{open} of 1,100 still open after 41 s (body_timeout 30 s)"
  end,
  "unread_streams" => fn port, _server ->
    dir = System.tmp_dir!()

    sockets =
      for i <- 1..4 do
        s = Hostile.connect(port, recbuf: 4096)

        args = %{
          "pid_file" => Path.join(dir, "flood_bench_#{i}_#{System.unique_integer([:positive])}"),
          "size" => 65_536
        }

        :gen_tcp.send(
          s,
          Hostile.modern(i, "tools/call", %{
            "name" => "flood",
            "arguments" => args,
            "_meta" => %{
              "progressToken" => "p#{i}",
              "io.modelcontextprotocol/protocolVersion" => "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities" => %{}
            }
          })
        )

        s
      end

    Process.sleep(30_000)
    closed = Enum.count(sockets, &(Hostile.drain(&1) in [:closed, :econnreset]))
    "#{closed} of 4 streams closed by the server (their calls cancelled)"
  end,
  "initialize_flood" => fn port, _server ->
    statuses =
      1..8
      |> Enum.map(fn w ->
        Task.async(fn ->
          s = Hostile.connect(port)

          Enum.reduce(1..1_500, %{}, fn i, acc ->
            :gen_tcp.send(s, Hostile.legacy_initialize(w * 10_000 + i))
            {status, _, _, _} = Hostile.response(s)
            Map.update(acc, status, 1, &(&1 + 1))
          end)
        end)
      end)
      |> Enum.map(&Task.await(&1, :infinity))
      |> Enum.reduce(&Map.merge(&1, &2, fn _, a, b -> a + b end))

    newcomer = Hostile.connect(port, ip: {127, 0, 0, 2})
    :gen_tcp.send(newcomer, Hostile.legacy_initialize(1))
    {status, headers, _, _} = Hostile.response(newcomer)

    "12,000 initialize: #{inspect(statuses)}; a new client then: #{status} (session #{headers["mcp-session-id"] != nil})"
  end,
  "pipelining" => fn port, _server ->
    answered =
      1..200
      |> Enum.map(fn c ->
        Task.async(fn ->
          s = Hostile.connect(port)
          :gen_tcp.send(s, for(i <- 1..10, do: Hostile.modern(c * 100 + i, "tools/list")))

          Enum.reduce_while(1..10, {0, ""}, fn _, {n, rest} ->
            case Hostile.response(s, rest) do
              {200, _, _, rest} -> {:cont, {n + 1, rest}}
              _ -> {:halt, {n, rest}}
            end
          end)
          |> elem(0)
        end)
      end)
      |> Enum.map(&Task.await(&1, 60_000))
      |> Enum.sum()

    "#{answered} of 2,000 pipelined requests answered in order"
  end
}

chosen =
  case System.argv() do
    [] -> ["slow_bodies", "unread_streams", "initialize_flood", "pipelining"]
    names -> names
  end

{load1, _} = Float.parse(File.read!("/proc/loadavg"))
IO.puts("MCP HTTP server under hostile clients (load average at start #{load1})")
IO.puts("attack            good client p50 / p95 / failed   RSS idle -> peak (growth)   outcome")

for name <- chosen do
  {:ok, server} =
    HTTP.start_link(tools: [CMDC.Tool.Examples.Echo, CMDCTest.MCPTools.Flood], port: 0)

  port = HTTP.port(server)
  :erlang.garbage_collect()
  idle = Hostile.rss_mb()
  good = Hostile.good_client(port)
  {outcome, peak} = Hostile.peak_rss(fn -> Map.fetch!(attacks, name).(port, server) end)
  {times, failures} = Hostile.stop_good(good)
  HTTP.stop(server)

  IO.puts(
    String.pad_trailing(name, 18) <>
      String.pad_trailing(
        "#{Float.round(Hostile.pct(times, 0.5), 1)} / #{Float.round(Hostile.pct(times, 0.95), 1)} ms / #{failures}",
        33
      ) <>
      String.pad_trailing("#{round(idle)} -> #{round(peak)} MB (+#{round(peak - idle)})", 28) <>
      outcome
  )
end
