defmodule CMDC.Tool.MCP.Client.HTTP.ConnTest do
  # The MCP client's HTTP/1.1 exchange: the response parser on every framing and every way a
  # server can break it, and real connections (TCP and verified TLS) to listeners made here.
  use ExUnit.Case, async: true

  @moduletag :capture_log

  alias CMDC.Tool.MCP.Client.HTTP.Conn

  doctest Conn

  # Feeds `text` in pieces of `size` bytes; the events of every piece, in order.
  defp feed(text, size, method \\ "POST") do
    pieces = for <<piece::binary-size(size) <- text>>, do: piece
    rest = binary_part(text, length(pieces) * size, byte_size(text) - length(pieces) * size)

    Enum.reduce_while(pieces ++ [rest], {[], Conn.parser(method)}, fn piece, {events, conn} ->
      case Conn.data(conn, piece) do
        {:error, reason} -> {:halt, {:error, reason}}
        {more, conn} -> {:cont, {events ++ more, conn}}
      end
    end)
  end

  defp body(events), do: for({:data, d} <- events, into: "", do: d)

  describe "framing" do
    @chunked "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream" <>
               "\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\nIGNORED"

    test "a chunked body read a byte at a time, or in any piece size, is the same body" do
      for size <- [1, 2, 3, 7, 16, 1000] do
        {events, conn} = feed(@chunked, size)

        assert [{:head, 200, [{"transfer-encoding", "chunked"}, {"content-type", _}]} | _] =
                 events

        assert body(events) == "hello world"
        assert List.last(events) == :done
        assert conn.phase == :done
      end
    end

    test "content-length, then the end of the connection, then no body at all" do
      {events, _} = feed("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabcdef", 4)
      assert {body(events), List.last(events)} == {"abc", :done}

      {events, conn} = feed("HTTP/1.0 500 Oops\r\nContent-Type: text/plain\r\n\r\nuntil close", 5)
      assert body(events) == "until close"
      refute :done in events
      assert Conn.closed(conn) == :done

      for head <- [
            "HTTP/1.1 204 No Content\r\n\r\n",
            "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
          ] do
        {events, _} = feed(head, 3)
        assert [{:head, _, _}, :done] = events
      end

      {events, _} = feed("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n", 100, "HEAD")
      assert [{:head, 200, _}, :done] = events
    end

    test "an interim 100 Continue is skipped" do
      {events, _} =
        feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 6)

      assert [{:head, 200, _} | _] = events
      assert body(events) == "ok"
    end

    test "a connection closed midway is told apart from a complete answer" do
      {_, conn} = feed("HTTP/1.1 200 OK\r\nContent-Le", 100)
      assert Conn.closed(conn) == {:cut, :head}
      {_, conn} = feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 100)
      assert Conn.closed(conn) == {:cut, :body}
      {_, conn} = feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 100)
      assert Conn.closed(conn) == {:cut, :body}
    end
  end

  describe "broken answers are clear errors" do
    for {name, text, expected} <- [
          {"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP answer"},
          {"a bad header line", "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
           "malformed HTTP header"},
          {"a bad chunk size", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
           "malformed chunk size"},
          {"a chunk without CRLF",
           "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" <>
             "2\r\nabXY", "not followed by CRLF"},
          {"two content-lengths",
           "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2" <>
             "\r\n\r\n", "content-length given twice"},
          {"a negative content-length", "HTTP/1.1 200 OK\r\ncontent-length: -4\r\n\r\n",
           "malformed content-length"}
        ] do
      test name do
        assert {:error, reason} = feed(unquote(text), 3)
        assert reason =~ unquote(expected)
      end
    end

    test "a head that never ends is refused past 64 kB, whatever the piece size" do
      endless =
        "HTTP/1.1 200 OK\r\n" <>
          String.duplicate("x-pad: #{String.duplicate("y", 100)}\r\n", 1_000)

      for size <- [100, 4096, 65_536] do
        assert {:error, reason} = feed(endless, size)
        assert reason =~ "HTTP head" or reason =~ "unreadable"
      end

      assert {:error, reason} = feed("HTTP/1.1 200 OK\r\n" <> String.duplicate("a", 70_000), 4096)
      assert reason =~ "over 65536 bytes" or reason =~ "unreadable"
    end

    test "an endless chunk-size line is refused" do
      text =
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" <> String.duplicate("0", 9_000)

      assert {:error, reason} = feed(text, 1000)
      assert reason =~ "chunk line over"
    end
  end

  describe "real connections" do
    test "the request as sent: target, host, headers, body; a header with a line break is " <>
           "refused before anything is sent" do
      {:ok, listen} = :gen_tcp.listen(0, [:binary, active: false, packet: :raw, reuseaddr: true])
      {:ok, port} = :inet.port(listen)
      uri = URI.parse("http://127.0.0.1:#{port}/mcp?x=1")

      {ref, _} = Conn.open(uri, "POST", [{"mcp-method", "tools/call"}], ~s({"a":1}))
      {:ok, server} = :gen_tcp.accept(listen, 5_000)
      assert_receive {:cmdc_mcp_conn, ^ref, {:ok, conn}}, 5_000
      {:ok, request} = :gen_tcp.recv(server, 0, 5_000)

      assert request =~
               "POST /mcp?x=1 HTTP/1.1\r\nhost: 127.0.0.1:#{port}\r\nmcp-method: tools/call\r\n"

      assert String.ends_with?(request, "content-length: 7\r\nconnection: close\r\n\r\n{\"a\":1}")

      :ok = :gen_tcp.send(server, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
      :ok = Conn.next(conn)
      assert_receive msg, 5_000
      assert {_socket, {:data, bytes}} = Conn.message(msg)
      assert {[{:head, 200, _}, {:data, "ok"}, :done], _} = Conn.data(conn, bytes)
      Conn.close(conn)

      {ref, _} = Conn.open(uri, "POST", [{"mcp-session-id", "s\r\nx-evil: 1"}], "{}")
      assert_receive {:cmdc_mcp_conn, ^ref, {:error, {:send, reason}}}, 5_000
      assert reason =~ "line break"
      assert {:error, :timeout} = :gen_tcp.accept(listen, 200)
    end

    test "nothing listening: a connect error" do
      {:ok, listen} = :gen_tcp.listen(0, [])
      {:ok, port} = :inet.port(listen)
      :gen_tcp.close(listen)
      {ref, _} = Conn.open(URI.parse("http://127.0.0.1:#{port}/"), "GET", [], "")
      assert_receive {:cmdc_mcp_conn, ^ref, {:error, {:connect, :econnrefused}}}, 5_000
    end

    test "TLS is verified: a trusted certificate for the name passes; an unknown CA or " <>
           "another name is refused" do
      {listen, port, cacerts} = tls_listen()
      serve = fn -> spawn(fn -> accept_once(listen) end) end
      trusted = [cacerts: cacerts]

      serve.()
      {ref, _} = Conn.open(URI.parse("https://localhost:#{port}/"), "GET", [], "", trusted)
      assert_receive {:cmdc_mcp_conn, ^ref, {:ok, conn}}, 10_000
      :ok = Conn.next(conn)
      assert_receive {:ssl, _, bytes}, 10_000
      assert {[{:head, 200, _}, {:data, "tls"}, :done], _} = Conn.data(conn, bytes)

      serve.()
      {ref, _} = Conn.open(URI.parse("https://localhost:#{port}/"), "GET", [], "")

      assert_receive {:cmdc_mcp_conn, ^ref, {:error, {:connect, {:tls_alert, {alert, _}}}}},
                     10_000

      assert alert == :unknown_ca

      serve.()
      {ref, _} = Conn.open(URI.parse("https://127.0.0.1:#{port}/"), "GET", [], "", trusted)

      assert_receive {:cmdc_mcp_conn, ^ref, {:error, {:connect, {:tls_alert, {alert, _}}}}},
                     10_000

      assert alert == :handshake_failure
    end

    test "keep-alive over TLS: a second request on the same verified connection" do
      {listen, port, cacerts} = tls_listen()
      test = self()
      spawn(fn -> serve_two(listen, test) end)
      uri = URI.parse("https://localhost:#{port}/mcp")
      opts = [cacerts: cacerts, keep_alive: true]

      {ref, _} = Conn.open(uri, "POST", [], "one", opts)
      assert_receive {:cmdc_mcp_conn, ^ref, {:ok, conn}}, 10_000
      assert {[{:head, 200, _}, {:data, "one"}, :done], done} = read_all(conn, [])
      assert Conn.reusable?(done)
      :ok = Conn.passive(done)

      {ref, _} = Conn.open(uri, "POST", [], "two", [reuse: done] ++ opts)
      assert_receive {:cmdc_mcp_conn, ^ref, {:ok, again}}, 10_000
      assert again.socket == conn.socket
      assert {[{:head, 200, _}, {:data, "two"}, :done], _} = read_all(again, [])
      # one TLS connection carried both, and the requests left it open
      assert_receive {:served, 2, requests}, 5_000
      refute Enum.any?(requests, &(&1 =~ "connection: close"))
      Conn.close(again)
    end
  end

  # A TLS listener on loopback with a certificate for `localhost` from a test CA: `{listen,
  # port, the CA's certificates}`.
  defp tls_listen do
    {:ok, _} = Application.ensure_all_started(:ssl)
    curve = [key: {:namedCurve, :secp256r1}, digest: :sha256]
    san = {:Extension, {2, 5, 29, 17}, false, [dNSName: ~c"localhost"]}

    data =
      :public_key.pkix_test_data(%{
        server_chain: %{root: curve, intermediates: [], peer: curve ++ [extensions: [san]]},
        client_chain: %{root: curve, intermediates: [], peer: curve}
      })

    tls = Keyword.take(data.server_config, [:cert, :key])
    {:ok, listen} = :ssl.listen(0, [:binary, active: false, reuseaddr: true] ++ tls)
    {:ok, {_, port}} = :ssl.sockname(listen)
    {listen, port, data.client_config[:cacerts]}
  end

  # Reads until the answer is complete: its events and the final state.
  defp read_all(conn, acc) do
    :ok = Conn.next(conn)
    assert_receive {:ssl, _, _} = msg, 10_000
    {_socket, {:data, bytes}} = Conn.message(msg)
    {events, conn} = Conn.data(conn, bytes)
    acc = acc ++ events
    if List.last(acc) == :done, do: {acc, conn}, else: read_all(conn, acc)
  end

  # Answers two requests on one TLS connection, echoing each body.
  defp serve_two(listen, test) do
    {:ok, socket} = :ssl.transport_accept(listen, 10_000)
    {:ok, socket} = :ssl.handshake(socket, 10_000)

    requests =
      for _ <- 1..2 do
        {:ok, request} = :ssl.recv(socket, 0, 10_000)
        [_, body] = String.split(request, "\r\n\r\n", parts: 2)
        :ssl.send(socket, "HTTP/1.1 200 OK\r\ncontent-length: #{byte_size(body)}\r\n\r\n" <> body)
        request
      end

    send(test, {:served, 2, requests})
    Process.sleep(1_000)
  end

  defp accept_once(listen) do
    with {:ok, socket} <- :ssl.transport_accept(listen, 10_000),
         {:ok, socket} <- :ssl.handshake(socket, 10_000),
         {:ok, _request} <- :ssl.recv(socket, 0, 10_000) do
      :ssl.send(socket, "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\ntls")
      Process.sleep(500)
    end
  end
end
