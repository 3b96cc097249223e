defmodule CMDC.Tool.MCP.Client.HTTPTest do
  # The Streamable HTTP transport against the official Python SDK's server (stateless and
  # stateful, both eras) and against hostile HTTP servers (test/support/mcp_hostile.py).
  # Not async: the floods' bounds are read from the whole VM's memory (`:erlang.memory/1`).
  use ExUnit.Case, async: false

  import CMDC.Tool.Eventually

  alias CMDC.Tool.MCP.Client
  alias CMDC.Tool.MCPServers

  import CMDC.Tool.LoadProbe, only: [timed: 1]

  @moduletag timeout: 180_000
  @moduletag :capture_log
  @script Path.expand("../../../../support/mcp_hostile.py", __DIR__)

  defp start_client(name, url, opts \\ []) do
    opts =
      Keyword.merge([name: name, transport: {:http, %{url: url}}, init_timeout: 30_000], opts)

    start_supervised!({Client, opts}, id: name)
  end

  defp sdk_server(mode, port \\ nil) do
    case MCPServers.python_http(mode, port) do
      {:ok, url, exec} -> {url, exec}
      {:error, reason} -> flunk("the Python SDK's HTTP server did not start: #{reason}")
    end
  end

  defp add(client), do: Client.call_tool(client, "add", %{"a" => 2, "b" => 3})

  test "stateless SDK server: the modern era, headers and all" do
    {url, _exec} = sdk_server("http-stateless")
    client = start_client("stateless", url)
    assert :ok = Client.await_ready(client)
    info = Client.info(client)
    assert {info.era, info.version, info.status} == {:modern, "2026-07-28", :ready}
    assert {:ok, %{"content" => [%{"text" => "5"}]}} = add(client)
    assert :ok = Client.ping(client)
  end

  test "stateful SDK server, legacy era: a restarted server (404, session gone) is " <>
         "re-established and the call re-sent once, transparently" do
    {url, exec} = sdk_server("http")
    port = URI.parse(url).port
    client = start_client("stateful", url, era: :legacy)
    assert :ok = Client.await_ready(client)
    assert {:legacy, "2025-11-25"} == {Client.info(client).era, Client.info(client).version}
    assert {:ok, _} = add(client)

    CMDC.Tool.Exec.cancel(exec)
    eventually(fn -> not listening?(port) end)
    {_url, exec} = sdk_server("http", port)

    # The new server has never heard of the session: 404, then initialize again, re-send.
    assert {:ok, %{"content" => [%{"text" => "5"}]}} = add(client)
    assert Client.info(client).status == :ready
    # Held to the end: a program's handle, garbage collected, stops the program.
    CMDC.Tool.Exec.cancel(exec)
  end

  test "an unreachable server: the status leaves :ready, and comes back with the server" do
    {url, exec} = sdk_server("http-stateless")
    port = URI.parse(url).port
    client = start_client("gone", url)
    assert :ok = Client.await_ready(client)

    CMDC.Tool.Exec.cancel(exec)
    eventually(fn -> not listening?(port) end)
    assert {:error, message} = add(client)
    assert message =~ "cannot reach"
    assert Client.info(client).status in [:down, :connecting]

    # Held to the end: a program's handle, garbage collected, stops the program.
    {_url, exec} = sdk_server("http-stateless", port)

    eventually(fn -> Client.info(client).status == :ready end,
      within: 60_000,
      message: fn -> inspect(Client.info(client)) end
    )

    assert {:ok, _} = add(client)
    CMDC.Tool.Exec.cancel(exec)
  end

  test "this library's own server (CMDC.Tool.MCP.HTTP) in both eras" do
    server =
      start_supervised!({CMDC.Tool.MCP.HTTP, tools: [CMDC.Tool.Examples.Echo], port: 0},
        id: :own_server
      )

    url = CMDC.Tool.MCP.HTTP.url(server)

    for era <- [:modern, :legacy] do
      client = start_client("own_#{era}", url, era: era)
      assert :ok = Client.await_ready(client)
      assert Client.info(client).era == era

      assert {:ok, %{"content" => [%{"text" => "hi"}]}} =
               Client.call_tool(client, "echo", %{"text" => "hi"})
    end
  end

  describe "hostile HTTP servers" do
    setup do
      case System.find_executable("python3") do
        nil -> {:ok, skip: "python3 is not installed"}
        python -> {:ok, python: python}
      end
    end

    defp hostile(python, mode) do
      port = MCPServers.free_port()
      {:ok, exec} = CMDC.Tool.Exec.start(python, [@script, "http", mode, "#{port}"])
      on_exit(fn -> CMDC.Tool.Exec.cancel(exec) end)
      eventually(fn -> listening?(port) end)
      "http://127.0.0.1:#{port}/mcp"
    end

    test "a 2025 server answers the modern probe with a 400: initialize, then a session", ctx do
      url = hostile(ctx.python, "legacy_only")
      client = start_client("legacy", url)
      assert :ok = Client.await_ready(client)
      info = Client.info(client)
      assert {info.era, info.version} == {:legacy, "2025-11-25"}

      assert {:ok, %{"content" => [%{"text" => "legacy"}]}} =
               Client.call_tool(client, "call", %{})

      # Only the probe carried the modern headers.
      {:ok, %{"headers" => ["server/discover" | rest]}} = stats(url)
      assert Enum.all?(rest, &is_nil/1)
    end

    test "an SSE stream that never ends: the timed-out call closes it; memory bounded", ctx do
      url = hostile(ctx.python, "endless_sse")
      client = start_client("endless", url)
      assert :ok = Client.await_ready(client)
      before = :erlang.memory(:total)
      {result, ms} = timed(fn -> Client.call_tool(client, "call", %{}, timeout: 2_000) end)
      assert {:error, message} = result
      assert message =~ "timed out after 2000 ms"
      {:ok, %{"closed" => closed}} = wait_closed(url)
      growth = div(:erlang.memory(:total) - before, 1_048_576)

      IO.puts(
        "\nendless SSE: failed after #{ms} ms, memory +#{growth} MB, streams closed: #{closed}"
      )

      assert closed >= 1
      assert growth < 100
    end

    test "a 300 MB body fails its call once over max_response_bytes, and is dropped", ctx do
      url = hostile(ctx.python, "huge_body")
      client = start_client("huge", url)
      assert :ok = Client.await_ready(client)
      before = :erlang.memory(:total)
      {result, ms} = timed(fn -> Client.call_tool(client, "call", %{}, timeout: 60_000) end)
      assert {:error, message} = result
      assert message =~ "over 16777216 bytes"
      growth = div(:erlang.memory(:total) - before, 1_048_576)
      IO.puts("\n300 MB body: failed after #{ms} ms, memory +#{growth} MB after")
      assert ms < 30_000
      assert growth < 100
    end

    # mode, the call's time-out, what its error says, and whether the answer is cut before
    # that time-out (a flood's first 64 kB are enough) or by it. Calls follow each other for
    # 3 s (one call for the modes cut by the time-out).
    for {mode, timeout, expected, cut?} <- [
          {"error_flood", 10_000, "MCP server error_flood: HTTP 500 from", true},
          {"chunked_error", 10_000, "MCP server chunked_error: HTTP 400 from", true},
          {"silent_sse", 3_000, "timed out after 3000 ms", false},
          {"trickle", 3_000, "timed out after 3000 ms", false}
        ] do
      test "#{mode}: a clear error within the time-out, the connection closed, memory " <>
             "bounded, a stdio server answering meanwhile",
           ctx do
        good = good_stdio(ctx.python)
        url = hostile(ctx.python, unquote(mode))
        client = start_client(unquote(mode), url)
        assert :ok = Client.await_ready(client)
        assert :ok = Client.await_ready(good)
        :erlang.garbage_collect()
        before = :erlang.memory(:total)

        call = fn ->
          timed(fn -> Client.call_tool(client, "call", %{}, timeout: unquote(timeout)) end)
        end

        {results, _, watch} =
          during(
            fn -> repeat_for(call, 3_000, []) end,
            fn -> Client.call_tool(good, "echo", %{"text" => "still here"}) end
          )

        {result, _} = hd(results)
        ms = results |> Enum.map(&elem(&1, 1)) |> Enum.max()

        growth = Float.round((watch.peak - before) / 1_048_576, 1)
        {:ok, %{"closed" => closed}} = wait_closed(url)

        IO.puts(
          "\n#{unquote(mode)}: #{length(results)} calls, the slowest #{ms} ms, each " <>
            "#{inspect(result)}; memory growth peak " <>
            "#{growth} MB; connections the server saw closed: #{closed}; the stdio " <>
            "server's #{length(watch.calls)} calls meanwhile: #{inspect(Enum.uniq(watch.calls))}"
        )

        for {result, _} <- results do
          assert {:error, message} = result
          assert message =~ unquote(expected)
        end

        assert ms < unquote(timeout) + 1_000
        if unquote(cut?), do: assert(ms < unquote(timeout) - 1_000)
        assert closed >= 1
        assert growth < 100
        assert watch.calls != []

        assert Enum.all?(
                 watch.calls,
                 &match?({:ok, %{"content" => [%{"text" => "still here"}]}}, &1)
               )

        assert Client.info(client).status == :ready
      end
    end

    for mode <- ["endless_event", "endless_line"] do
      test "#{mode}: cut at max_response_bytes, in time linear in the bytes", ctx do
        url = hostile(ctx.python, unquote(mode))
        client = start_client(unquote(mode), url)
        assert :ok = Client.await_ready(client)
        :erlang.garbage_collect()
        before = :erlang.memory(:total)

        {result, ms, watch} =
          during(
            fn -> Client.call_tool(client, "call", %{}, timeout: 60_000) end,
            fn -> :ok end
          )

        growth = Float.round((watch.peak - before) / 1_048_576, 1)

        IO.puts(
          "\n#{unquote(mode)}: #{inspect(result)} after #{ms} ms, memory peak +#{growth} MB"
        )

        assert {:error, message} = result
        assert message =~ "over 16777216 bytes (max_response_bytes)"
        # 2,000,000 lines of 8 bytes (the quadratic parser took minutes); loaded machines ~7 s
        assert ms < 20_000
        assert growth < 100
      end
    end

    test "a stream kept open after its response: the call is answered, the stream closed",
         ctx do
      url = hostile(ctx.python, "answer_linger")
      client = start_client("linger", url)
      assert :ok = Client.await_ready(client)
      {result, ms} = timed(fn -> Client.call_tool(client, "call", %{}, timeout: 5_000) end)
      assert {:ok, %{"content" => [%{"text" => "answered"}]}} = result
      assert ms < 2_000
      assert {:ok, %{"closed" => 1}} = wait_closed(url)
    end

    for {mode, expected} <- [
          {"list_trickle", "tools/list unanswered after 2000 ms"},
          {"list_error_flood", "HTTP 500 from"}
        ] do
      test "#{mode}: the client's own tools/list fails with its server, its connection closed",
           ctx do
        url = hostile(ctx.python, unquote(mode))
        client = start_client(unquote(mode), url, limits: [request_timeout: 2_000])
        {result, ms} = timed(fn -> Client.await_ready(client, 10_000) end)
        assert {:error, message} = result
        assert message =~ "MCP server #{unquote(mode)}"
        assert message =~ unquote(expected)
        assert ms < 3_000
        assert {:ok, %{"closed" => closed}} = wait_closed(url)
        IO.puts("\n#{unquote(mode)}: failed after #{ms} ms, connections closed: #{closed}")
        assert closed >= 1
      end
    end
  end

  defp good_stdio(python) do
    start_supervised!(
      {Client, name: "good", transport: {:stdio, %{command: python, args: [@script, "good"]}}},
      id: "good"
    )
  end

  defp repeat_for(fun, ms, acc) when ms > 0 do
    {_, took} = result = fun.()
    repeat_for(fun, ms - took, [result | acc])
  end

  defp repeat_for(_fun, _ms, acc), do: acc

  # Runs `hostile` in a task; meanwhile samples memory every 50 ms and runs `other` every
  # 250 ms (at least once).
  defp during(hostile, other) do
    task = Task.async(fn -> timed(hostile) end)
    watch = watch(task, other, %{peak: :erlang.memory(:total), calls: []}, 0)
    {result, ms} = Task.await(task, :infinity)
    {result, ms, %{watch | calls: Enum.reverse(watch.calls)}}
  end

  defp watch(task, other, acc, i) do
    acc = %{acc | peak: max(acc.peak, :erlang.memory(:total))}
    acc = if rem(i, 5) == 0, do: %{acc | calls: [other.() | acc.calls]}, else: acc

    case Task.yield(task, 50) do
      nil -> watch(task, other, acc, i + 1)
      reply -> send(self(), {task.ref, elem(reply, 1)}) && acc
    end
  end

  # The hostile server's `/stats` once it has seen a stream closed.
  defp wait_closed(url) do
    eventually(fn -> match?({:ok, %{"closed" => n}} when n >= 1, stats(url)) end)
    stats(url)
  end

  defp stats(url) do
    {:ok, {{_, 200, _}, _, body}} =
      :httpc.request(
        :get,
        {String.to_charlist(String.replace(url, "/mcp", "/stats")), []},
        [],
        []
      )

    CMDC.Tool.JSON.decode(to_string(body))
  end

  defp listening?(port) do
    case :gen_tcp.connect({127, 0, 0, 1}, port, [], 100) do
      {:ok, s} -> :gen_tcp.close(s) == :ok
      _ -> false
    end
  end
end
