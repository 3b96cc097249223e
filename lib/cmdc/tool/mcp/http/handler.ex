defmodule CMDC.Tool.MCP.HTTP.Handler do
  @moduledoc """
  The `inets` httpd module behind `CMDC.Tool.MCP.HTTP`: httpd parses HTTP (request line,
  headers, body limit, time-outs); this module checks the request (path, `Origin`, `Host`,
  token, content type), keeps legacy sessions, and hands each JSON-RPC message to the protocol
  core. Replies that take time (tool calls, subscriptions) are served by
  `CMDC.Tool.MCP.HTTP.Exchange` in the same request process.
  """

  require Logger
  require Record

  alias CMDC.Tool.MCP
  alias CMDC.Tool.MCP.HTTP.{Auth, Body, Exchange}
  alias CMDC.Tool.MCP.Protocol

  Record.defrecordp(:mod, Record.extract(:mod, from_lib: "inets/include/httpd.hrl"))

  @loopback_hosts ["localhost", "127.0.0.1", "::1", "[::1]"]

  @doc "httpd's module callback: answers one request."
  @spec unquote(:do)(tuple()) :: {:proceed, list()}
  def unquote(:do)(mod) do
    nodelay(mod)
    table = :httpd_util.lookup(mod(mod, :config_db), :cmdc_mcp)
    [{:config, config}] = :ets.lookup(table, :config)

    case Body.take(mod, config) do
      {:ok, body} -> {:proceed, [{:response, send_response(answer(mod, table, config, body))}]}
      {:continue, state} -> {:continue, state}
      {:sent, status} -> {:proceed, [{:response, {:already_sent, status, 0}}]}
    end
  end

  # An answer's head and body leave in separate writes: with Nagle on, a kept-alive client
  # waited for its own delayed ACK (~40 ms a request, measured). (httpd's `{ip_comm, opts}`
  # socket type would set it once, but OTP 25's `http_transport:listen/4` has no clause for it.)
  defp nodelay(mod) do
    case mod(mod, :socket_type) do
      :ip_comm -> :inet.setopts(mod(mod, :socket), nodelay: true)
      {type, _} when type in [:essl, :ssl] -> :ssl.setopts(mod(mod, :socket), nodelay: true)
      _ -> :ok
    end
  end

  defp answer(mod, table, config, body) do
    req = request(mod, table, config) |> Map.put(:body, body)

    try do
      route(req)
    rescue
      e ->
        Logger.error("mcp http: #{Exception.format(:error, e, __STACKTRACE__)}")
        json(500, [], Protocol.error(nil, :internal_error, "Internal error"))
    end
  end

  defp request(mod, table, config) do
    headers =
      Map.new(mod(mod, :parsed_header), fn {k, v} ->
        {:erlang.list_to_binary(k), :erlang.list_to_binary(v)}
      end)

    [path | _] =
      mod |> mod(:request_uri) |> :erlang.list_to_binary() |> String.split("?", parts: 2)

    %{
      mod: mod,
      table: table,
      config: config,
      method: List.to_string(mod(mod, :method)),
      path: path,
      headers: headers
    }
  end

  defp route(%{method: "GET", path: path, config: config} = req) when path != config.path do
    if path == Auth.metadata_path(config.auth, config.path),
      do: json(200, [], Auth.metadata(config.auth)),
      else: not_found(req)
  end

  defp route(%{path: path, config: %{path: path}} = req) do
    with :ok <- check_origin(req),
         :ok <- check_host(req),
         :ok <- check_auth(req) do
      case req.method do
        "POST" ->
          post(req)

        "DELETE" ->
          delete(req)

        "GET" ->
          stream(req)

        _ ->
          json(405, [{"allow", "GET, POST, DELETE"}], rpc_error("use POST (MCP Streamable HTTP)"))
      end
    end
  end

  defp route(req), do: not_found(req)

  defp not_found(req), do: json(404, [], rpc_error("no MCP endpoint at #{req.path}"))

  defp rpc_error(message, code \\ :invalid_request), do: Protocol.error(nil, code, message)

  # --- checks -------------------------------------------------------------------------------

  # DNS rebinding: a web page may only reach this server from an origin it trusts.
  defp check_origin(%{headers: %{"origin" => origin}, config: config}) do
    if origin in config.allowed_origins or loopback_origin?(origin),
      do: :ok,
      else: json(403, [], rpc_error("Origin #{origin} is not allowed"))
  end

  defp check_origin(_req), do: :ok

  defp loopback_origin?(origin) do
    case URI.parse(origin) do
      %URI{scheme: scheme, host: host} when scheme in ["http", "https"] -> host in @loopback_hosts
      _ -> false
    end
  end

  defp check_host(%{config: %{loopback?: false}}), do: :ok

  defp check_host(%{headers: headers}) do
    host = headers |> Map.get("host", "") |> host_name()

    if host in @loopback_hosts,
      do: :ok,
      else: json(403, [], rpc_error("Host #{inspect(headers["host"])} is not this server"))
  end

  defp host_name("[" <> rest), do: "[" <> (rest |> String.split("]") |> hd()) <> "]"
  defp host_name(host), do: host |> String.split(":") |> hd()

  defp check_auth(%{config: config, headers: headers}) do
    metadata = Auth.metadata_path(config.auth, config.path)
    metadata_url = metadata && String.replace_suffix(config.url, config.path, metadata)

    case Auth.check(config.auth, headers, metadata_url) do
      :ok -> :ok
      {:error, challenge, why} -> json(401, [{"www-authenticate", challenge}], rpc_error(why))
    end
  end

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

  # Which protocol state serves the message: an initialize session's, a new session's, or the
  # shared stateless one.
  defp session(%{headers: %{"mcp-session-id" => id}} = req, _msg) do
    case :ets.lookup(req.table, {:session, id}) do
      [{_, %{mcp: mcp}}] ->
        # The session keeps its version; its tools are the server's current ones (refresh/2).
        [{:mcp, current}] = :ets.lookup(req.table, :mcp)
        {:ok, id, %{mcp | tools: current.tools}}

      [] ->
        message =
          "unknown session #{id} (ended, expired or the server restarted): initialize again"

        {:error, json(404, [], rpc_error(message))}
    end
  end

  defp session(req, %{"method" => "initialize"}) do
    if :ets.info(req.table, :size) > req.config.max_sessions do
      {:error, json(503, [], rpc_error("too many open sessions, try again later"))}
    else
      [{:mcp, mcp}] = :ets.lookup(req.table, :mcp)
      {:ok, Base.url_encode64(:crypto.strong_rand_bytes(18)), mcp}
    end
  end

  defp session(req, _msg) do
    [{:mcp, mcp}] = :ets.lookup(req.table, :mcp)
    {:ok, nil, mcp}
  end

  defp dispatch(req, msg, session, mcp) do
    {outgoing, mcp} = MCP.handle(msg, mcp, req.headers)

    if session do
      entry = %{mcp: mcp, touched: System.monotonic_time(:millisecond)}
      :ets.insert(req.table, {{:session, session}, entry})
    end

    extra = if session, do: [{"mcp-session-id", session}], else: []
    req = Map.merge(req, %{session: session, extra: extra, mcp: mcp})

    case outgoing do
      [] -> {202, extra, ""}
      [%{} = reply] -> json(status(session, reply), extra, reply)
      [{:call, call}] -> Exchange.call(req, call)
      [%{} = ack, {:listen, id, _filter}] -> Exchange.listen(req, ack, id)
      [{:cancel, id}] -> cancel(req, id)
    end
  end

  # Inside a legacy session errors are ordinary JSON-RPC answers; stateless requests use the
  # modern transport's status codes.
  defp status(nil, reply), do: Protocol.http_status(reply)
  defp status(_session, _reply), do: 200

  defp cancel(%{session: nil} = req, _id), do: {202, req.extra, ""}

  defp cancel(req, id) do
    for {_, pid} <- :ets.lookup(req.table, {:call, req.session, id}),
        do: send(pid, {Exchange, :cancel})

    {202, req.extra, ""}
  end

  # A 2025-era session's server-to-client stream (GET, text/event-stream): list changes when the
  # server announces them. Modern clients use subscriptions/listen instead; others get 405.
  defp stream(%{headers: %{"mcp-session-id" => id} = headers} = req) do
    cond do
      not :ets.member(req.table, {:session, id}) ->
        json(404, [], rpc_error("unknown session #{id}"))

      not String.contains?(headers["accept"] || "", "text/event-stream") ->
        json(406, [], rpc_error("the session stream is text/event-stream"))

      true ->
        Exchange.listen(Map.put(req, :extra, [{"mcp-session-id", id}]), nil, nil)
    end
  end

  defp stream(_req) do
    json(
      405,
      [{"allow", "POST, DELETE"}],
      rpc_error("use POST; 2026-07-28 clients send subscriptions/listen")
    )
  end

  defp delete(%{headers: %{"mcp-session-id" => id}} = req) do
    if :ets.member(req.table, {:session, id}) do
      :ets.delete(req.table, {:session, id})

      for {_, pid} <- :ets.match_object(req.table, {{:call, id, :_}, :_}),
          do: send(pid, {Exchange, :cancel})

      {204, [], ""}
    else
      json(404, [], rpc_error("unknown session #{id}"))
    end
  end

  defp delete(_req), do: json(400, [], rpc_error("DELETE needs an Mcp-Session-Id header"))

  # --- responses ----------------------------------------------------------------------------

  defp json(status, extra, body), do: Body.json(status, extra, body)

  defp send_response(:sent), do: {:already_sent, 200, 0}

  defp send_response({status, headers, body}) do
    body = IO.iodata_to_binary(body)

    head =
      [code: status, content_length: Integer.to_charlist(byte_size(body))] ++
        Enum.map(headers, fn {k, v} -> {header_key(k), String.to_charlist(v)} end)

    {:response, head, [body]}
  end

  # httpd wants atoms for header names; these are the few this module sends.
  defp header_key("content-type"), do: :content_type
  defp header_key("mcp-session-id"), do: :"mcp-session-id"
  defp header_key("www-authenticate"), do: :"www-authenticate"
  defp header_key("allow"), do: :allow
end
