defmodule CMDC.Tool.MCP.Client.HTTP.PoolTest do
  # Keep-alive of the MCP client's HTTP transport, counted by the servers: a Python server
  # counting the TCP connections it accepts (test/support/mcp_keepalive.py: idle closes,
  # `Connection: close`, HTTP/1.0, a reused connection dropped or cut), and the official
  # Python SDK's server behind a counting TCP relay.
  use ExUnit.Case, async: false

  alias CMDC.Tool.MCP.Client
  alias CMDC.Tool.MCPServers

  @moduletag timeout: 120_000
  @moduletag :capture_log
  @script Path.expand("../../../../../support/mcp_keepalive.py", __DIR__)

  doctest CMDC.Tool.MCP.Client.HTTP.Pool

  setup do
    case System.find_executable("python3") do
      nil -> {:ok, skip: "python3 is not installed"}
      python -> {:ok, python: python}
    end
  end

  defp server(python, mode, idle \\ 30) do
    port = MCPServers.free_port()
    {:ok, exec} = CMDC.Tool.Exec.start(python, [@script, mode, "#{port}", "#{idle}"])
    on_exit(fn -> CMDC.Tool.Exec.cancel(exec) end)
    true = MCPServers.wait_port(port)
    "http://127.0.0.1:#{port}/mcp"
  end

  defp start_client(name, url, opts \\ []) do
    {spec, opts} = Keyword.pop(opts, :spec, %{})
    transport = {:http, Map.merge(%{url: url}, spec)}
    opts = Keyword.merge([name: name, transport: transport, init_timeout: 30_000], opts)
    client = start_supervised!({Client, opts}, id: name)
    assert :ok = Client.await_ready(client)
    client
  end

  defp echo(client, text), do: Client.call_tool(client, "echo", %{"text" => text})

  defp calls(client, n) do
    for i <- 1..n do
      text = "#{i}"
      assert {:ok, %{"content" => [%{"text" => ^text}]}} = echo(client, text)
    end
  end

  test "sequential calls share one connection; keep_alive: false opens one per request", ctx do
    url = server(ctx.python, "keepalive")
    client = start_client("seq", url)
    calls(client, 50)
    # the probe, tools/list and 50 calls: 52 requests on one connection
    assert %{"connections" => 1, "requests" => 52} = stats(url)

    other = server(ctx.python, "keepalive")
    client = start_client("no_reuse", other, spec: %{keep_alive: false})
    calls(client, 5)
    assert %{"connections" => 7, "requests" => 7} = stats(other)
  end

  test "an idle connection the server closes is dropped; the next call opens another", ctx do
    url = server(ctx.python, "keepalive", 0.3)
    client = start_client("idle", url)
    calls(client, 3)
    Process.sleep(800)
    calls(client, 3)
    Process.sleep(800)
    calls(client, 3)
    assert %{"connections" => 3, "requests" => 11} = stats(url)
  end

  test "the client's own idle timeout closes its connections (http_idle_ms)", ctx do
    url = server(ctx.python, "keepalive")
    client = start_client("own_idle", url, limits: [http_idle_ms: 200])
    calls(client, 2)
    assert %{"open" => 1} = stats(url)
    Process.sleep(600)
    assert %{"open" => 0, "connections" => 1} = stats(url)
    calls(client, 2)
    assert %{"connections" => 2} = stats(url)
  end

  test "a server closing a kept-alive connection as the request arrives: sent again once, " <>
         "on a new connection",
       ctx do
    url = server(ctx.python, "drop_reused")
    client = start_client("dropped", url)
    # every connection's second request is dropped unanswered: each is retried once
    calls(client, 4)
    assert %{"dropped" => dropped, "connections" => connections} = stats(url)
    assert dropped >= 2
    assert connections == dropped + 1
  end

  test "an answer cut after its first byte on a reused connection fails; never re-sent", ctx do
    url = server(ctx.python, "cut_reused")
    client = start_client("cut", url)
    # the probe and tools/list came on one connection; the call, its third request, is cut
    assert {:error, message} = echo(client, "x")
    assert message =~ "closed the connection before answering"
    assert %{"requests" => 3, "connections" => 1} = stats(url)
    # the next call opens a new connection
    assert {:ok, _} = echo(client, "y")
    assert %{"requests" => 4, "connections" => 2} = stats(url)
  end

  for mode <- ["close", "http10"] do
    test "#{mode}: no connection is reused, every call answered", ctx do
      url = server(ctx.python, unquote(mode))
      client = start_client(unquote(mode), url)
      calls(client, 5)
      assert %{"connections" => 7, "requests" => 7} = stats(url)
    end
  end

  test "concurrent calls: at most http_connections connections, reused after", ctx do
    url = server(ctx.python, "keepalive")
    client = start_client("many", url, limits: [http_connections: 4])

    results =
      1..20
      |> Enum.map(fn _ ->
        Task.async(fn -> Client.call_tool(client, "sleep", %{"seconds" => 0.2}) end)
      end)
      |> Enum.map(&Task.await(&1, 30_000))

    assert Enum.all?(results, &match?({:ok, %{"content" => [%{"text" => "slept"}]}}, &1))
    assert %{"max_open" => max_open, "connections" => connections} = stats(url)
    IO.puts("\n20 concurrent calls, limit 4: #{connections} connections, #{max_open} at once")
    assert max_open <= 4
    assert connections <= 4
  end

  test "a call that times out while waiting for a connection is never sent", ctx do
    url = server(ctx.python, "keepalive")
    client = start_client("queued", url, limits: [http_connections: 1])
    slow = Task.async(fn -> Client.call_tool(client, "sleep", %{"seconds" => 0.6}) end)
    Process.sleep(100)

    assert {:error, message} =
             Client.call_tool(client, "echo", %{"text" => "never"}, timeout: 200)

    assert message =~ "timed out"
    assert {:ok, _} = Task.await(slow, 5_000)
    assert {:ok, _} = echo(client, "after")
    assert %{"echoed" => ["after"], "max_open" => 1, "connections" => 1} = stats(url)
  end

  test "a timed-out call's connection is closed, never reused", ctx do
    url = server(ctx.python, "keepalive")
    client = start_client("timeout", url)
    assert {:error, message} = Client.call_tool(client, "sleep", %{"seconds" => 1}, timeout: 200)
    assert message =~ "timed out"
    calls(client, 2)
    # the server ends its sleep, answers into a closed connection and sees it gone; the
    # others are still kept
    Process.sleep(1_500)
    assert %{"connections" => connections, "open" => open} = stats(url)
    assert connections >= 2
    assert open == connections - 1
  end

  test "stopping the client closes its idle connections", ctx do
    url = server(ctx.python, "keepalive")
    start_client("stop", url)
    assert %{"open" => 1} = stats(url)
    stop_supervised!("stop")
    assert MCPServers.wait_stat(url, "open", 0, 3_000)
  end

  test "the official Python SDK's server (uvicorn): N sequential calls, one connection" do
    url =
      case MCPServers.python_http("http-stateless") do
        {:ok, url, _exec} -> url
        {:error, reason} -> flunk("the Python SDK's HTTP server did not start: #{reason}")
      end

    {relay, count} = MCPServers.relay(URI.parse(url).port)
    client = start_client("sdk", "http://127.0.0.1:#{relay}/mcp")
    # the handshake: the probe, then `subscriptions/listen` (an event stream that keeps its
    # connection) beside tools/list on a second one
    assert Agent.get(count, & &1) == 2

    for _ <- 1..20,
        do: assert({:ok, %{"content" => [%{"text" => "5"}]}} = add(client))

    assert Agent.get(count, & &1) == 2
  end

  test "the session's long-lived streams do not count: http_connections: 1 still calls" do
    for {mode, era} <- [{"http", :legacy}, {"http-stateless", :modern}] do
      {:ok, url, exec} = MCPServers.python_http(mode)
      client = start_client("one_#{mode}", url, era: era, limits: [http_connections: 1])
      # a legacy session's GET stream, or subscriptions/listen, holds a connection throughout
      for _ <- 1..3, do: assert({:ok, %{"content" => [%{"text" => "5"}]}} = add(client))
      stop_supervised!("one_#{mode}")
      CMDC.Tool.Exec.cancel(exec)
    end
  end

  defp add(client), do: Client.call_tool(client, "add", %{"a" => 2, "b" => 3})

  defp stats(url) do
    {:ok, stats} = MCPServers.stats(url)
    stats
  end
end
