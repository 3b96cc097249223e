defmodule CMDC.Tool.MCP.HTTP.Body do
  @moduledoc """
  The request body of `CMDC.Tool.MCP.HTTP`, read in pieces so that its limits are answered as
  JSON-RPC errors (`application/json`) a client SDK can show, where httpd's own limits answer
  with an HTML page:

    * over `:max_body` bytes: **413**. A `Content-Length` over it is answered as soon as the
      headers are read (`CMDC.Tool.MCP.HTTP.Custom`), none of the body read; a body that grows
      over it anyway is counted here;
    * not complete `:body_timeout_ms` after its first piece arrived: **408**.

  httpd (`max_client_body_chunk`) hands a body longer than one piece to the handler as
  `{:first, piece}`, then `{:continue, piece, state}`, and the rest as `{:last, piece, state}`;
  a body of one piece comes whole as `{:last, body, :undefined}`. The handler returns
  `{:continue, state}` for every piece but the last. After a 413 or 408 the connection is
  closed (`Connection: close`), within `@linger_ms` however the client behaves.

  Not covered, because httpd answers before any module sees the request: a request whose
  headers arrive too slowly (httpd's own 408, `:idle_timeout_ms`) or are too large
  (`:max_header_size`, httpd's 413), and a body sent with `Transfer-Encoding: chunked` that
  grows over `:max_body` (httpd reads chunked bodies whole, bounded by the same limit, and
  answers its own 413). A body of one piece arriving slowly is cut off by httpd's
  `:min_bytes_per_second` check, which closes without an answer.
  """

  require Record

  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.Protocol

  Record.defrecordp(:mod, Record.extract(:mod, from_lib: "inets/include/httpd.hrl"))

  # httpd's max_client_body_chunk: most JSON-RPC requests fit in one piece.
  @piece 16 * 1024
  # After a 413 or 408 the client may keep sending: the connection ends this much later.
  @linger_ms 1_000

  @doc false
  # A JSON response (status, headers, body) as the handler and the exchanges answer.
  def json(status, extra, body) do
    {status, [{"content-type", "application/json"} | extra], CMDC.Tool.JSON.encode!(body)}
  end

  @doc "The piece size to give httpd as `max_client_body_chunk`."
  @spec piece_size() :: pos_integer()
  def piece_size, do: @piece

  @doc """
  Takes what httpd handed over: `{:ok, body}` once whole, `{:continue, state}` for httpd to
  keep reading (also after a 413 answered mid-body: the rest is read and dropped), or
  `{:sent, status}` when the last piece came after a 413 or 408 was answered.
  """
  @spec take(tuple(), map()) :: {:ok, binary()} | {:continue, term()} | {:sent, 408 | 413}
  def take(mod, config) do
    case mod(mod, :entity_body) do
      {:last, body, :undefined} -> whole(mod, config, body)
      {:last, _piece, {:rejected, status}} -> {:sent, status}
      {:last, piece, state} -> finish(mod, config, add(state, piece))
      {:first, piece} -> more(mod, config, start(mod, config, piece))
      {:continue, piece, :undefined} -> more(mod, config, start(mod, config, piece))
      {:continue, _piece, {:rejected, _} = rejected} -> {:continue, rejected}
      {:continue, piece, state} -> more(mod, config, add(state, piece))
      body -> whole(mod, config, IO.iodata_to_binary(body))
    end
  end

  defp whole(mod, config, body) do
    if byte_size(body) > config.max_body,
      do: {:sent, reject(mod, nil, too_large(config))},
      else: {:ok, body}
  end

  defp start(mod, config, piece) do
    state = %{size: 0, pieces: [], timer: nil}

    case declared(mod) do
      length when length > config.max_body -> {:too_large, state}
      _ -> add(%{state | timer: watch(mod, config)}, piece)
    end
  end

  defp declared(mod) do
    case List.keyfind(mod(mod, :parsed_header), ~c"content-length", 0) do
      {_, value} -> value |> List.to_string() |> String.trim() |> Integer.parse() |> elem(0)
      nil -> 0
    end
  rescue
    _ -> 0
  end

  defp add(state, piece),
    do: %{state | size: state.size + byte_size(piece), pieces: [piece | state.pieces]}

  defp more(mod, config, {:too_large, state}),
    do: {:continue, {:rejected, reject(mod, state, too_large(config))}}

  defp more(mod, config, state) do
    if state.size > config.max_body,
      do: {:continue, {:rejected, reject(mod, state, too_large(config))}},
      else: {:continue, state}
  end

  defp finish(mod, config, state) do
    cond do
      state.size > config.max_body ->
        {:sent, reject(mod, state, too_large(config))}

      claim(state) ->
        {:ok, state.pieces |> Enum.reverse() |> IO.iodata_to_binary()}

      true ->
        {:sent, 408}
    end
  end

  defp too_large(config), do: {413, too_large_message(config.max_body)}

  @doc false
  def too_large_message(max),
    do: "the request body is over #{max} bytes (the server's :max_body)"

  @doc false
  # An error answered on a raw socket by its owner, which is then closed: the rest of the
  # request is never read.
  @spec refuse(port(), 400..599, String.t()) :: :ok
  def refuse(socket, status, message) do
    body = JSON.encode!(Protocol.error(nil, :invalid_request, message))

    :gen_tcp.send(socket, [
      "HTTP/1.1 #{status} #{:httpd_util.reason_phrase(status)}\r\n",
      "content-type: application/json\r\ncontent-length: #{byte_size(body)}\r\n",
      "connection: close\r\n\r\n",
      body
    ])

    :gen_tcp.close(socket)
    :ok
  end

  # A 413 from the handler's own process, unless the 408 timer answered first: the status sent.
  defp reject(mod, state, {status, message}) do
    if claim(state) do
      answer(mod, status, message)
      :gen_tcp.shutdown(mod(mod, :socket), :write)
      ending(self(), :body_too_large)
      status
    else
      408
    end
  end

  # The 408 timer: one process per body longer than a piece; whoever claims the body first
  # (the timer or the last piece) answers it.
  defp watch(mod, config) do
    claimed = :atomics.new(1, [])
    handler = self()

    pid =
      spawn(fn ->
        ref = Process.monitor(handler)

        receive do
          {:DOWN, ^ref, _, _, _} -> :ok
        after
          config.body_timeout_ms ->
            if :atomics.compare_exchange(claimed, 1, 0, 1) == :ok do
              message =
                "the request body was not complete after #{config.body_timeout_ms} ms " <>
                  "(the server's :body_timeout_ms)"

              answer(mod, 408, message)
              Process.exit(handler, {:shutdown, :request_timeout})
            end
        end
      end)

    {pid, claimed}
  end

  defp claim(%{timer: {pid, claimed}}) do
    Process.exit(pid, :kill)
    :atomics.compare_exchange(claimed, 1, 0, 1) == :ok
  end

  defp claim(_state), do: true

  # httpd's request process traps exits: the signal reaches it as a message it stops on, once
  # back in its loop; the client meanwhile may still be sending (read and dropped).
  defp ending(handler, why) do
    spawn(fn ->
      Process.sleep(@linger_ms)
      Process.exit(handler, {:shutdown, why})
    end)
  end

  defp answer(mod, status, message) do
    body = JSON.encode!(Protocol.error(nil, :invalid_request, message))
    mod = mod(mod, connection: false)

    :httpd_response.send_header(mod, status, [
      {:content_type, ~c"application/json"},
      {:content_length, Integer.to_charlist(byte_size(body))}
    ])

    :httpd_socket.deliver(mod(mod, :socket_type), mod(mod, :socket), body)
  end
end
