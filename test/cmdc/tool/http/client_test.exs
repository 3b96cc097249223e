defmodule CMDC.Tool.HTTP.ClientTest do
  # The native client's message protocol, against servers written here on :gen_tcp: what
  # arrives, in which order, and that every way a request ends closes its connection.
  use ExUnit.Case, async: true

  alias CMDC.Tool.HTTP.Client

  doctest CMDC.Tool.HTTP.Client
  doctest CMDC.Tool.MCP.HTTP.Introspection
  doctest CMDC.Tool.MCP.HTTP.IntrospectionCache

  # A server that sends `answer` to each request it reads, then tells the test when the client
  # closed the connection: `{:server, :closed, n}` (n: requests served on it).
  defp serve(answer) do
    test = self()
    {:ok, listen} = :gen_tcp.listen(0, [:binary, active: false, ip: {127, 0, 0, 1}])
    {:ok, port} = :inet.port(listen)

    spawn_link(fn -> accept(listen, answer, test) end)
    "http://127.0.0.1:#{port}/mcp"
  end

  defp accept(listen, answer, test) do
    {:ok, socket} = :gen_tcp.accept(listen)
    send(test, {:server, :accepted})
    pid = spawn(fn -> loop(socket, answer, test, "", 0) end)
    :gen_tcp.controlling_process(socket, pid)
    accept(listen, answer, test)
  end

  defp loop(socket, answer, test, seen, served) do
    case :binary.split(seen, "\r\n\r\n") do
      [_head, rest] ->
        :gen_tcp.send(socket, answer)
        send(test, {:server, :answered})
        loop(socket, answer, test, rest, served + 1)

      [_] ->
        case :gen_tcp.recv(socket, 0) do
          {:ok, data} -> loop(socket, answer, test, seen <> data, served)
          {:error, _} -> send(test, {:server, :closed, served})
        end
    end
  end

  defp sse(events) do
    body = Enum.map_join(events, fn {id, data} -> "id: #{id}\ndata: #{data}\n\n" end)
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" <> body
  end

  test "fetch: the whole answer; the kept-alive connection serves the next request" do
    url =
      serve("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")

    {:ok, client} = Client.new()

    for _ <- 1..3 do
      assert {:ok, %{status: 200, body: "{}", headers: headers}} =
               Client.fetch(client, "POST", url, [{"x-a", "1"}], "{}")

      assert {"content-type", "application/json"} in headers
    end

    assert_received {:server, :accepted}
    refute_received {:server, :accepted}
  end

  test "an event stream: one event per credit, in order; cancel closes the connection" do
    url = serve(sse(for i <- 1..20, do: {i, ~s({"n":#{i}})}))
    {:ok, client} = Client.new()
    {:ok, {_, id} = request} = Client.request(client, "GET", url, [], "", events: true, window: 2)

    assert_receive {:cmdc_http, ^id, {:head, 200, _}}
    assert_receive {:cmdc_http, ^id, {:event, "message", ~s({"n":1}), "1"}}
    assert_receive {:cmdc_http, ^id, {:event, "message", ~s({"n":2}), "2"}}
    # Two credits taken, none given back: the third waits in the socket.
    refute_receive {:cmdc_http, ^id, {:event, _, _, _}}, 200
    :ok = Client.ack(request, 2)
    assert_receive {:cmdc_http, ^id, {:event, "message", ~s({"n":3}), "3"}}

    :ok = Client.cancel(request)
    assert_receive {:server, :closed, 1}, 5_000
  end

  test "the owner's exit aborts its requests (the connection closes)" do
    url = serve(sse([{1, "{}"}]))
    {:ok, client} = Client.new()
    test = self()

    {pid, ref} =
      spawn_monitor(fn ->
        {:ok, _} = Client.request(client, "GET", url, [], "", events: true, window: 1)
        send(test, :started)
        receive do: (:never -> :ok)
      end)

    assert_receive :started
    assert_receive {:server, :answered}
    Process.exit(pid, :kill)
    assert_receive {:DOWN, ^ref, :process, ^pid, :killed}
    assert_receive {:server, :closed, 1}, 5_000
  end

  test "bounds: a success over max_body fails :too_big; an error body is cut" do
    big = "HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n" <> String.duplicate("x", 5000)
    {:ok, client} = Client.new()

    assert {:error, "an answer over 1000 bytes (max_response_bytes); its stream was closed"} =
             Client.fetch(client, "GET", serve(big), [], "", max_body: 1_000)

    error = "HTTP/1.1 500 Oops\r\ncontent-length: 5000\r\n\r\n" <> String.duplicate("e", 5000)

    assert {:ok, %{status: 500, body: body}} =
             Client.fetch(client, "GET", serve(error), [], "", max_error_body: 100)

    assert body == String.duplicate("e", 100)
  end

  test "a large request body goes through the dirty twin" do
    url = serve("HTTP/1.1 204 No Content\r\n\r\n")
    {:ok, client} = Client.new()
    body = String.duplicate("a", 1_000_000)
    assert {:ok, %{status: 204, body: ""}} = Client.fetch(client, "POST", url, [], body)
  end

  test "what cannot be sent says why, and names the stage" do
    {:ok, client} = Client.new()
    {:ok, listen} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(listen)
    :gen_tcp.close(listen)

    assert {:error, message} = Client.fetch(client, "GET", "http://127.0.0.1:#{port}/", [], "")
    assert message =~ "Connection refused" or message =~ "connect"

    assert {:error, message} = Client.fetch(client, "GET", "ftp://x/", [], "")
    assert message =~ "not an http:// or https:// URL"

    assert {:error, message} =
             Client.fetch(client, "GET", "http://127.0.0.1:1/", [{"x", "a\r\nb"}], "")

    assert message =~ ~s(the header "x" is not valid HTTP)

    assert {:error, message} = CMDC.Tool.Native.http_client_new(%{idle_ms: "soon"})
    assert message =~ "http_client_new: expected a map with idle_ms"
  end
end
