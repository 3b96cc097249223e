defmodule CMDC.Tool.MCP.HTTP.WireTest do
  # The Streamable HTTP server's transport (CMDC.Tool.MCP.HTTP.Wire, hyper in the NIF) against
  # what no SDK client sends, over raw TCP: limits answered as JSON-RPC errors (413, 408),
  # pipelined requests, slow bodies, duplicate Host/Origin headers.
  use ExUnit.Case, async: true

  alias CMDC.Tool.Examples.Echo
  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.HTTP

  @moduletag timeout: 120_000
  @modern "2026-07-28"
  @meta %{
    "io.modelcontextprotocol/protocolVersion" => @modern,
    "io.modelcontextprotocol/clientCapabilities" => %{}
  }

  defp start(opts \\ []) do
    server = start_supervised!({HTTP, Keyword.merge([tools: [Echo], port: 0], opts)})
    {HTTP.port(server), HTTP.url(server)}
  end

  defp request(id, method, params) do
    JSON.encode!(%{
      "jsonrpc" => "2.0",
      "id" => id,
      "method" => method,
      "params" => Map.put(params, "_meta", @meta)
    })
  end

  defp head(length, extra \\ "") do
    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" <>
      "MCP-Protocol-Version: #{@modern}\r\nMcp-Method: tools/list\r\n" <>
      "Content-Length: #{length}\r\n#{extra}\r\n"
  end

  defp connect(port) do
    {:ok, socket} = :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false])
    socket
  end

  # One HTTP response read off the socket: {status, headers, body}.
  defp response(socket, seen \\ "") do
    case String.split(seen, "\r\n\r\n", parts: 2) do
      [head, rest] ->
        ["HTTP/1.1 " <> status | lines] = String.split(head, "\r\n")

        headers =
          Map.new(lines, fn line ->
            [k, v] = String.split(line, ":", parts: 2)
            {String.downcase(k), String.trim(v)}
          end)

        length = String.to_integer(headers["content-length"])
        {String.to_integer(binary_part(status, 0, 3)), headers, body(socket, rest, length)}

      [_] ->
        {:ok, more} = :gen_tcp.recv(socket, 0, 30_000)
        response(socket, seen <> more)
    end
  end

  defp body(_socket, seen, length) when byte_size(seen) >= length, do: seen

  defp body(socket, seen, length) do
    {:ok, more} = :gen_tcp.recv(socket, 0, 30_000)
    body(socket, seen <> more, length)
  end

  defp closed?(socket) do
    case :gen_tcp.recv(socket, 0, 5_000) do
      {:ok, _} -> closed?(socket)
      {:error, reason} -> reason in [:closed, :econnreset]
    end
  end

  defp assert_json_error(status, headers, body, expected_status, text) do
    assert status == expected_status
    assert headers["content-type"] == "application/json"
    assert headers["connection"] =~ ~r/close/i

    assert %{"jsonrpc" => "2.0", "error" => %{"code" => -32600, "message" => message}} =
             JSON.decode!(body)

    assert message =~ text
    message
  end

  defp served?(url) do
    body = request(2, "tools/list", %{})
    headers = [{~c"mcp-protocol-version", ~c"2026-07-28"}, {~c"mcp-method", ~c"tools/list"}]
    request = {to_charlist(url), headers, ~c"application/json", body}
    {:ok, {{_, 200, _}, _, reply}} = :httpc.request(:post, request, [], body_format: :binary)
    %{"result" => %{"tools" => [_]}} = JSON.decode!(reply)
    true
  end

  test "a body declared over :max_body gets a JSON 413 on its headers alone, none read" do
    {port, url} = start(max_body: 1_000_000)
    socket = connect(port)
    # Declares 10 MB, sends none of it and waits for the answer.
    :ok = :gen_tcp.send(socket, head(10_000_000))
    {status, headers, body} = response(socket)
    message = assert_json_error(status, headers, body, 413, "over 1000000 bytes")
    IO.puts("\n413 for a 10 MB body: #{message}")
    assert closed?(socket)
    assert served?(url)
  end

  test "a client that sends 10 MB at once gets the JSON 413 or a reset, never an HTML page" do
    {port, url} = start()
    socket = connect(port)
    body = String.duplicate("x", 10_000_000)
    Task.start(fn -> :gen_tcp.send(socket, [head(byte_size(body)), body]) end)
    # Answered on the headers, or reset because the server closed with the body unread.

    case :gen_tcp.recv(socket, 0, 30_000) do
      {:ok, first} ->
        {status, headers, body} = response(socket, first)
        assert_json_error(status, headers, body, 413, "over 4194304 bytes")

      {:error, reason} ->
        assert reason in [:closed, :econnreset]
    end

    assert served?(url)
  end

  test "a chunked body over :max_body: a JSON 413, then the next request is served" do
    {port, url} = start(max_body: 100_000)
    socket = connect(port)

    head =
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" <>
        "Transfer-Encoding: chunked\r\n\r\n"

    chunk = String.duplicate("y", 30_000)
    pieces = for _ <- 1..5, do: [Integer.to_string(byte_size(chunk), 16), "\r\n", chunk, "\r\n"]
    :ok = :gen_tcp.send(socket, [head | pieces])

    {status, headers, body} = response(socket)
    assert_json_error(status, headers, body, 413, "over 100000 bytes")
    assert closed?(socket)
    assert served?(url)
  end

  test "a body not complete within :body_timeout_ms gets a JSON 408 and the connection ends" do
    {port, url} = start(body_timeout_ms: 1_000)
    socket = connect(port)
    started = System.monotonic_time(:millisecond)
    # 100 kB declared, 20 kB sent, then nothing.
    :ok = :gen_tcp.send(socket, [head(100_000), String.duplicate(" ", 20_000)])
    {status, headers, body} = response(socket)
    ms = System.monotonic_time(:millisecond) - started
    message = assert_json_error(status, headers, body, 408, "not complete after 1000 ms")
    IO.puts("\n408 after #{ms} ms: #{message}")
    assert ms >= 1_000
    assert closed?(socket)
    assert served?(url)
  end

  test "bodies of many pieces under the limit are served whole (a 1 MB argument echoed)" do
    {_port, url} = start()
    text = String.duplicate("é", 500_000)
    body = request(3, "tools/call", %{"name" => "echo", "arguments" => %{"text" => text}})
    assert byte_size(body) > 1_000_000

    headers = [
      {~c"mcp-protocol-version", ~c"2026-07-28"},
      {~c"mcp-method", ~c"tools/call"},
      {~c"mcp-name", ~c"echo"}
    ]

    request = {to_charlist(url), headers, ~c"application/json", body}
    {:ok, {{_, 200, _}, _, reply}} = :httpc.request(:post, request, [], body_format: :binary)

    assert %{"result" => %{"content" => [%{"text" => echoed}], "isError" => false}} =
             JSON.decode!(reply)

    # The whole argument arrived (it validated and decoded); the runner cuts what a tool
    # returns at its output limit (~100 kB).
    assert byte_size(echoed) > 90_000
    assert String.starts_with?(text, String.slice(echoed, 0, 40_000))
  end

  test "headers that never finish: the connection is closed after :header_timeout_ms" do
    {port, url} = start(header_timeout_ms: 1_000)
    socket = connect(port)
    :ok = :gen_tcp.send(socket, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert served?(url)
    assert {:error, reason} = :gen_tcp.recv(socket, 0, 30_000)
    assert reason in [:closed, :econnreset]
  end

  # Issue 36 item 5: the body timer ran only after the first 16 kB, so sockets trickling small
  # bodies held their connections; now every one gets its 408 and is closed.
  test "slow bodies of a few bytes each get their 408: the timer starts with the body" do
    {port, url} = start(body_timeout_ms: 1_000)
    sockets = for _ <- 1..40, do: connect(port)
    # 200 bytes declared, 10 sent, then a byte now and then: never complete.
    for s <- sockets, do: :ok = :gen_tcp.send(s, [head(200), String.duplicate(" ", 10)])

    trickle =
      Task.async(fn ->
        for _ <- 1..5, s <- sockets do
          :gen_tcp.send(s, " ")
          Process.sleep(20)
        end
      end)

    for s <- sockets do
      {status, headers, body} = response(s)
      assert_json_error(status, headers, body, 408, "not complete after 1000 ms")
      assert closed?(s)
    end

    Task.await(trickle, 30_000)
    assert served?(url)
  end

  # Issue 36 item 4: pipelined requests got no answer at all.
  test "pipelined requests are answered, in order, on one connection" do
    {port, _url} = start()
    socket = connect(port)
    bodies = for id <- 1..3, do: request(id, "tools/list", %{})
    :ok = :gen_tcp.send(socket, Enum.map(bodies, &[head(byte_size(&1)), &1]))

    for id <- 1..3 do
      {200, headers, body} = response(socket)
      assert headers["content-type"] == "application/json"
      assert %{"id" => ^id, "result" => %{"tools" => [_]}} = JSON.decode!(body)
    end

    # Still open for more.
    body = request(4, "tools/list", %{})
    :ok = :gen_tcp.send(socket, [head(byte_size(body)), body])
    assert {200, _, reply} = response(socket)
    assert %{"id" => 4} = JSON.decode!(reply)
  end

  # Issue 36 item 5: two Host or Origin headers are ambiguous (a proxy may read one, the server
  # the other): 400, whatever their values.
  test "two Host or two Origin headers are a 400" do
    {port, url} = start()

    for extra <- [
          "Host: 127.0.0.1\r\n",
          "Origin: http://localhost\r\nOrigin: http://localhost\r\n"
        ] do
      socket = connect(port)
      body = request(1, "tools/list", %{})
      :ok = :gen_tcp.send(socket, [head(byte_size(body), extra), body])
      {status, headers, reply} = response(socket)
      assert_json_error(status, headers, reply, 400, "more than one")
    end

    assert served?(url)
  end
end
