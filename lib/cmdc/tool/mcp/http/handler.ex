defmodule CMDC.Tool.MCP.HTTP.Handler do
  @moduledoc """
  One request of `CMDC.Tool.MCP.HTTP`, in a process of its own: the transport
  (`CMDC.Tool.MCP.HTTP.Wire`) has parsed it and checked what needs no protocol knowledge
  (Host, Origin, sizes, times); this module routes it (the endpoint, RFC 9728 metadata),
  checks its token (`CMDC.Tool.MCP.HTTP.Auth`) and content type, finds its 2025-era session
  (`CMDC.Tool.MCP.HTTP.Sessions`, bound to the principal that opened it) and hands the
  JSON-RPC message to the protocol core. The core's output is applied through the
  `CMDC.Tool.MCP.Transport` callbacks into one answer: a JSON message, 202, or a stream served
  by `CMDC.Tool.MCP.HTTP.Exchange` (a call's progress and result, a subscription).
  """

  @behaviour CMDC.Tool.MCP.Transport

  require Logger

  alias CMDC.Tool.MCP
  alias CMDC.Tool.MCP.HTTP.{Auth, Exchange, Sessions, Wire}
  alias CMDC.Tool.MCP.{Protocol, Transport}

  @doc """
  Serves the request `head` (as `CMDC.Tool.MCP.HTTP.Wire` delivers it) answered through
  `exchange`, for the server whose `config` is given.
  """
  @spec serve(Wire.exchange(), non_neg_integer(), map(), map()) :: :ok
  def serve(exchange, id, head, config) do
    Wire.watch(exchange)
    req = request(exchange, id, head, config)

    case answer(req) do
      :sent -> :ok
      {status, headers, body} -> Wire.reply(exchange, status, headers, body)
    end

    :ok
  end

  defp request(exchange, id, head, config) do
    headers =
      Enum.reduce(head.headers, %{}, fn {k, v}, acc ->
        Map.update(acc, k, v, &(&1 <> ", " <> v))
      end)

    %{
      exchange: exchange,
      rid: id,
      config: config,
      table: config.table,
      method: head.method,
      path: head.path,
      headers: headers,
      peer: head.peer,
      body: head.body
    }
  end

  defp answer(req) do
    route(req)
  rescue
    e ->
      Logger.error("mcp http: #{Exception.format(:error, e, __STACKTRACE__)}")
      json(500, [], Protocol.error(nil, :internal_error, "Internal error"))
  end

  defp route(%{method: "GET", path: path, config: config} = req) when path != config.path do
    if path == Auth.metadata_path(config.auth, config.path),
      do: json(200, [], Auth.metadata(config.auth)),
      else: not_found(req)
  end

  defp route(%{path: path, config: %{path: path}} = req) do
    case check_auth(req) do
      {:ok, principal} ->
        req = Map.put(req, :principal, principal)

        case req.method do
          "POST" ->
            post(req)

          "DELETE" ->
            delete(req)

          "GET" ->
            stream(req)

          _ ->
            json(
              405,
              [{"allow", "GET, POST, DELETE"}],
              rpc_error("use POST (MCP Streamable HTTP)")
            )
        end

      {:error, response} ->
        response
    end
  end

  defp route(req), do: not_found(req)

  defp not_found(req), do: json(404, [], rpc_error("no MCP endpoint at #{req.path}"))

  defp rpc_error(message, code \\ :invalid_request), do: Protocol.error(nil, code, message)

  # The token's subject under OAuth; else the client's address (a static bearer token is
  # shared by every client that holds it).
  defp check_auth(%{config: config, headers: headers, peer: {ip, _port}}) do
    metadata = Auth.metadata_path(config.auth, config.path)
    metadata_url = metadata && String.replace_suffix(config.url, config.path, metadata)

    case Auth.check(config.auth, headers, metadata_url) do
      {:ok, nil} ->
        {:ok, "addr:" <> to_string(:inet.ntoa(ip))}

      {:ok, subject} ->
        {:ok, subject}

      {:error, challenge, why} ->
        {:error, json(401, [{"www-authenticate", challenge}], rpc_error(why))}
    end
  end

  defp now(config), do: config.clock.()

  # --- POST: one JSON-RPC message -------------------------------------------------------------

  defp post(req) do
    with :ok <- check_content_type(req.headers),
         {:ok, msg} <- decode(req.body) do
      case session(req, msg) do
        {:ok, session, mcp} -> dispatch(req, msg, session, mcp)
        {:error, response} -> response
      end
    end
  end

  defp check_content_type(%{"content-type" => "application/json" <> _}), do: :ok

  defp check_content_type(headers) do
    type = headers["content-type"] || "none"
    json(415, [], rpc_error("Content-Type must be application/json (got #{type})"))
  end

  defp decode(body) do
    case CMDC.Tool.JSON.decode(body) do
      {:ok, msg} -> {:ok, msg}
      {:error, reason} -> json(400, [], MCP.parse_error(reason))
    end
  end

  # Which protocol state serves the message: its session's, a new session's, or the shared
  # stateless one.
  defp session(%{headers: %{"mcp-session-id" => id}, config: config} = req, _msg) do
    case Sessions.fetch(config.sessions, id, req.principal, config.limits, now(config)) do
      {:ok, mcp} ->
        # The session keeps its version; its tools are the server's current ones (refresh/2).
        {:ok, id, %{mcp | tools: current(req).tools}}

      :error ->
        {:error, unknown_session(id)}
    end
  end

  defp session(%{config: config} = req, %{"method" => "initialize"}) do
    mcp = current(req)

    case GenServer.call(config.server, {:open_session, req.principal, mcp}) do
      {:ok, id} ->
        {:ok, id, mcp}

      {:error, :full} ->
        {:error, json(503, [], rpc_error("every session is busy, try again later"))}
    end
  end

  defp session(req, _msg), do: {:ok, nil, current(req)}

  defp current(req) do
    [{:mcp, mcp}] = :ets.lookup(req.table, :mcp)
    mcp
  end

  defp unknown_session(id) do
    message = "unknown session #{id} (ended, expired or the server restarted): initialize again"
    json(404, [], rpc_error(message))
  end

  defp dispatch(req, msg, session, mcp) do
    {outgoing, mcp} = MCP.handle(msg, mcp, req.headers)
    if session, do: Sessions.put(req.config.sessions, session, mcp, now(req.config))
    extra = if session, do: [{"mcp-session-id", session}], else: []
    req = Map.merge(req, %{session: session, extra: extra, mcp: mcp})

    Transport.perform(outgoing, __MODULE__, %{req: req, replies: [], action: nil})
    |> respond()
  end

  # --- the protocol core's output, as one HTTP answer ------------------------------------------

  @impl Transport
  def reply(message, acc), do: %{acc | replies: acc.replies ++ [message]}

  @impl Transport
  def call(call, acc), do: %{acc | action: {:call, call}}

  @impl Transport
  def listen(id, _filter, acc), do: %{acc | action: {:listen, id}}

  @impl Transport
  def cancel(id, acc) do
    req = acc.req

    if req.session do
      for {_, pid} <- :ets.lookup(req.table, {:call, req.session, id}),
          do: send(pid, {Exchange, :cancel})
    end

    acc
  end

  defp respond(%{req: req, action: {:call, call}}), do: Exchange.call(req, call)

  defp respond(%{req: req, action: {:listen, id}, replies: replies}),
    do: Exchange.listen(req, List.first(replies), id)

  defp respond(%{req: req, replies: []}), do: {202, req.extra, ""}

  defp respond(%{req: req, replies: [reply | _]}),
    do: json(status(req.session, reply), req.extra, reply)

  # Inside a legacy session errors are ordinary JSON-RPC answers; stateless requests use the
  # modern transport's status codes.
  defp status(nil, reply), do: Protocol.http_status(reply)
  defp status(_session, _reply), do: 200

  # A 2025-era session's server-to-client stream (GET, text/event-stream): list changes when the
  # server announces them. Modern clients use subscriptions/listen instead; others get 405.
  defp stream(%{headers: %{"mcp-session-id" => id} = headers, config: config} = req) do
    cond do
      not Sessions.member?(config.sessions, id, req.principal, config.limits, now(config)) ->
        unknown_session(id)

      not String.contains?(headers["accept"] || "", "text/event-stream") ->
        json(406, [], rpc_error("the session stream is text/event-stream"))

      true ->
        Exchange.listen(Map.merge(req, %{session: id, extra: [{"mcp-session-id", id}]}), nil, nil)
    end
  end

  defp stream(_req) do
    json(
      405,
      [{"allow", "POST, DELETE"}],
      rpc_error("use POST; 2026-07-28 clients send subscriptions/listen")
    )
  end

  defp delete(%{headers: %{"mcp-session-id" => id}, config: config} = req) do
    case Sessions.delete(config.sessions, id, req.principal) do
      :ok ->
        for {_, pid} <- :ets.match_object(req.table, {{:call, id, :_}, :_}),
            do: send(pid, {Exchange, :cancel})

        {204, [], ""}

      :error ->
        unknown_session(id)
    end
  end

  defp delete(_req), do: json(400, [], rpc_error("DELETE needs an Mcp-Session-Id header"))

  defp json(status, extra, body), do: Wire.json(status, extra, body)
end
