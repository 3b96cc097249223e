defmodule CMDC.Tool.MCP.Client.HTTP do
  @moduledoc """
  The Streamable HTTP transport of `CMDC.Tool.MCP.Client` (MCP 2026-07-28, 2025-11-25 and
  2025-06-18; see `CMDC.Tool.MCP.Client.Era`).

  A modern request (one whose `_meta` names the protocol version) carries the headers
  `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` (the tool's name for `tools/call`) and
  has no session. A legacy server gets the flow below.

  Every client message is a `POST` to the server's one endpoint (`Accept: application/json,
  text/event-stream`); the answer is either one JSON body or an SSE stream carrying
  notifications (progress), server requests and finally the response. The `Mcp-Session-Id` the
  server gives at `initialize` and the negotiated `MCP-Protocol-Version` go on every later
  request. Once initialized, a `GET` stream (when the server offers one; `405` means it does
  not) carries server-initiated messages such as `notifications/tools/list_changed`.
  Resumption: an SSE stream that breaks before its response arrived is resumed with a `GET`
  carrying `Last-Event-ID` when the server numbered its events. A `404` on a request that
  carried the session id means the session expired: the client initializes again and re-sends
  the calls that were waiting, once. A server that cannot be reached closes the transport (the
  client's status leaves `:ready` and it reconnects with backoff).

  Every answer is bounded, whatever its status, size or pace: a JSON body or one SSE event over
  `max_response_bytes` fails its request and its connection is closed; the body of an error
  status (4xx, 5xx) is read only up to 64 kB, enough for its error text, then the connection is
  closed; a request that times out or whose caller goes away (`cancel/2`) has its connection
  closed, and so does the answer to a notification that takes longer than `request_timeout`.
  Closing the socket frees everything held for the request at once.

  Each request is an HTTP/1.1 exchange (`CMDC.Tool.MCP.Client.HTTP.Conn`, over `:gen_tcp` or
  verified `:ssl`) on a kept-alive connection when one is idle (`CMDC.Tool.MCP.Client.HTTP.Pool`,
  per scheme, host and port; `keep_alive: false` in the spec opens one per request), else on a
  new one. A connection is kept only after an answer read to its end that both sides left
  open: an event stream, an answer cut short, `Connection: close`, HTTP/1.0, a timed-out or
  cancelled request closes it. A request whose kept-alive connection the server closed before
  one byte of the answer is sent again, once, on a new connection. At most `http_connections`
  (`CMDC.Tool.MCP.Client.Limits`) requests hold a connection at once; the others wait their
  turn, in order (the session's one long-lived stream is not counted). Each answer is read in
  the client process one socket read at a time (`active: :once`): a slow SSE stream never
  blocks anything, and a fast one waits in the server's socket buffers, not in the VM. `https` servers are
  verified against the operating system's CA store (`:public_key.cacerts_get/0`), with SNI and
  a hostname check: a server with a private CA needs that CA added to the system's store.
  OTP's `:httpc` was used
  before: it streams only 200/206 answers and buffers any other one whole in its handler (a
  hostile server's 2 GB `500` body or endless chunked `400` grew the VM without bound) and has
  no body limit to set. A Rust client on the NIF's tokio runtime would have meant a TLS stack
  and an HTTP crate in the native build (minutes of compile time, a larger attack surface) for
  no measurable gain: a tool call's cost is the server's work and the network, not the parsing
  of one response.
  """

  @behaviour CMDC.Tool.MCP.Client.Transport

  require Logger

  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.Client.HTTP.{Conn, Pool}
  alias CMDC.Tool.MCP.Client.SSE

  # What an error status's body may hold: enough for a JSON-RPC error or a page of text.
  @error_body 65_536

  defstruct [
    :url,
    :uri,
    :name,
    max_body: 16_777_216,
    timeout: 30_000,
    headers: [],
    session: nil,
    version: nil,
    requests: %{},
    sockets: %{},
    get: nil,
    last_event_id: nil,
    closed?: false,
    keep_alive: true,
    max_connections: 8,
    pool: nil,
    waiting: :queue.new(),
    streams: 0
  ]

  @type t :: %__MODULE__{}

  @doc """
  Prepares the transport for `spec` (`:url`, `:headers` map, `:keep_alive`: `false` for a
  connection per request). Nothing is sent yet; a URL that is not `http(s)://host…` is refused.
  """
  @impl true
  def connect(spec, name, limits) do
    uri = URI.parse(spec.url)

    with :ok <- check_uri(uri, spec.url), :ok <- start_ssl(uri) do
      headers =
        Enum.map(Map.get(spec, :headers, %{}), fn {k, v} -> {to_string(k), to_string(v)} end)

      {:ok,
       %__MODULE__{
         url: spec.url,
         uri: uri,
         name: name,
         headers: headers,
         max_body: limits.max_response_bytes,
         timeout: limits.request_timeout,
         keep_alive: Map.get(spec, :keep_alive, true) != false,
         max_connections: limits.http_connections,
         pool: Pool.new(limits.http_connections, limits.http_idle_ms)
       }}
    end
  end

  defp check_uri(%URI{scheme: scheme, host: host}, _url)
       when scheme in ["http", "https"] and is_binary(host) and host != "",
       do: :ok

  defp check_uri(_uri, url), do: {:error, "not an http:// or https:// URL: #{inspect(url)}"}

  defp start_ssl(%URI{scheme: "https"}) do
    case Application.ensure_all_started(:ssl) do
      {:ok, _} -> :ok
      {:error, reason} -> {:error, "cannot start ssl: #{inspect(reason)}"}
    end
  end

  defp start_ssl(_uri), do: :ok

  @doc """
  Records the era and version; a legacy session also opens the server's event stream (a `GET`).
  """
  @impl true
  def ready(t, :legacy, version), do: open_get(%{t | version: version})
  def ready(t, :modern, _version), do: t

  @doc "Closes the connection of request `id` (it timed out or its caller went away)."
  @impl true
  def cancel(t, id) do
    case Enum.find(t.requests, fn {_, e} -> e.kind == :post and e.id == id end) do
      {ref, _} -> drop(t, ref)
      nil -> t
    end
  end

  @doc "POSTs one message; its answer arrives as messages to `handle_info/2`."
  @impl true
  def send_message(%__MODULE__{} = t, message) do
    with {:ok, json} <- JSON.encode(message) do
      headers =
        [{"accept", "application/json, text/event-stream"}, {"content-type", "application/json"}] ++
          modern_headers(message) ++ headers(t)

      ref = make_ref()
      id = message["id"]

      # A notification's answer is a bare 202; one that takes longer is cut. A request's
      # answer is bounded by the client's own time-out (`cancel/2`).
      if id == nil, do: Process.send_after(self(), {:cmdc_mcp_http, :deadline, ref}, t.timeout)

      entry = entry(:post, id, nil, {"POST", headers, json})
      {:ok, start(t, ref, %{entry | stream?: message["method"] == "subscriptions/listen"})}
    end
  end

  defp entry(kind, id, sse, request) do
    %{kind: kind, id: id, pid: nil, conn: nil, sse: sse, answered?: false, request: request}
    |> Map.merge(%{waiting?: false, reused?: false, retried?: false, stream?: kind == :get})
  end

  # --- connections: at most `max_connections` in use; the rest wait their turn in order ---
  # The session's long-lived streams (a legacy `GET`, `subscriptions/listen`: one each at
  # most) never wait: held for the session, they would starve every request behind them.

  defp start(t, ref, entry) do
    if entry.stream? or (busy(t) < t.max_connections and not t.closed?) do
      launch(t, ref, entry, t.keep_alive)
    else
      entry = %{entry | waiting?: true}
      %{t | requests: Map.put(t.requests, ref, entry), waiting: :queue.in(ref, t.waiting)}
    end
  end

  defp busy(t), do: map_size(t.requests) - :queue.len(t.waiting) - t.streams

  # Sends the request on an idle kept-alive connection when `reuse?` and there is one, else on
  # a new connection.
  defp launch(t, ref, entry, reuse?) do
    {method, headers, body} = entry.request
    {idle, pool} = if reuse?, do: Pool.checkout(t.pool, Pool.key(t.uri)), else: {nil, t.pool}
    opts = [ref: ref, keep_alive: t.keep_alive, reuse: idle]
    {^ref, pid} = Conn.open(t.uri, method, headers, body, opts)
    entry = %{entry | pid: pid, conn: idle, reused?: idle != nil, waiting?: false}
    sockets = if idle, do: Map.put(t.sockets, idle.socket, ref), else: t.sockets
    # (a retried stream is launched again while still counted)
    streams = if entry.stream? and not is_map_key(t.requests, ref), do: 1, else: 0
    requests = Map.put(t.requests, ref, entry)
    %{t | pool: pool, requests: requests, sockets: sockets, streams: t.streams + streams}
  end

  defp pump(%{closed?: false} = t) do
    with true <- busy(t) < t.max_connections,
         {{:value, ref}, waiting} <- :queue.out(t.waiting) do
      t = %{t | waiting: waiting}
      pump(launch(t, ref, t.requests[ref], t.keep_alive))
    else
      _ -> t
    end
  end

  defp pump(t), do: t

  # A kept-alive connection the server closed before one byte of the answer (it had timed
  # the connection out as the request left): sent again, once, on a new connection.
  defp retry?(%{reused?: true, retried?: false, conn: conn}),
    do: conn == nil or Conn.untouched?(conn)

  defp retry?(_entry), do: false

  defp retry(t, ref, entry) do
    if entry.conn, do: Conn.close(entry.conn)
    sockets = if entry.conn, do: Map.delete(t.sockets, entry.conn.socket), else: t.sockets
    {:ok, launch(%{t | sockets: sockets}, ref, %{entry | retried?: true}, false)}
  end

  # A modern request names its version, method and tool in headers (the server may route on
  # them without reading the body); a legacy one has none of them.
  defp modern_headers(%{"method" => method, "params" => %{"_meta" => meta} = params})
       when is_map_key(meta, "io.modelcontextprotocol/protocolVersion") do
    version = meta["io.modelcontextprotocol/protocolVersion"]
    name = if method == "tools/call", do: params["name"]

    Enum.filter(
      [{"mcp-protocol-version", version}, {"mcp-method", method}, {"mcp-name", name}],
      fn {_, v} -> is_binary(v) end
    )
  end

  defp modern_headers(_message), do: []

  defp headers(t) do
    Enum.reject(
      [{"mcp-session-id", t.session}, {"mcp-protocol-version", t.version} | t.headers],
      fn {_, v} -> v == nil end
    )
  end

  defp open_get(%{closed?: true} = t), do: t

  defp open_get(t) do
    resume = if t.last_event_id, do: [{"last-event-id", t.last_event_id}], else: []

    headers = [{"accept", "text/event-stream"} | headers(t)] ++ resume
    ref = make_ref()
    %{start(t, ref, entry(:get, nil, SSE.new(), {"GET", headers, ""})) | get: ref}
  end

  @doc """
  Handles a message the client process received: `{:messages, [decoded], t}`, `{:ok, t}`,
  `{:failed, id, reason, t}` (a request's answer will never come), `{:lost, reason, t}`,
  `{:closed, reason, t}` (the session is gone), or `:unknown`.
  """
  @impl true
  def handle_info({:cmdc_mcp_conn, ref, result}, t), do: connected(ref, result, t)
  def handle_info({:cmdc_mcp_http, :reopen}, t), do: {:ok, open_get(t)}

  def handle_info({:cmdc_mcp_http, :deadline, ref}, t) when is_map_key(t.requests, ref) do
    Logger.warning("mcp #{t.name}: no answer to a notification within #{t.timeout} ms; closed")
    {:ok, drop(t, ref)}
  end

  def handle_info({:cmdc_mcp_http, :deadline, _ref}, t), do: {:ok, t}
  def handle_info({:cmdc_mcp_http, :then, ending}, t), do: Tuple.append(ending, t)

  def handle_info({:cmdc_mcp_http, :idle, socket, stamp}, t),
    do: {:ok, %{t | pool: Pool.expire(t.pool, socket, stamp)}}

  def handle_info(msg, t) do
    case Conn.message(msg) do
      {socket, what} when is_map_key(t.sockets, socket) ->
        ref = t.sockets[socket]
        socket_event(what, ref, t.requests[ref], t)

      {socket, _what} ->
        if Pool.idle?(t.pool, socket),
          do: {:ok, %{t | pool: Pool.idle_message(t.pool, socket)}},
          else: :unknown

      :unknown ->
        :unknown
    end
  end

  # The request was cancelled while its connection was being made: close what arrives.
  defp connected(ref, {:ok, conn}, t) when not is_map_key(t.requests, ref) do
    Conn.close(conn)
    {:ok, t}
  end

  defp connected(ref, {:ok, conn}, t) do
    Conn.next(conn)
    t = put_in(t.requests[ref].conn, conn)
    {:ok, put_in(t.sockets[conn.socket], ref)}
  end

  defp connected(ref, {:error, _}, t) when not is_map_key(t.requests, ref), do: {:ok, t}

  defp connected(ref, {:error, {stage, reason}}, t) do
    entry = t.requests[ref]

    if stage == :send and retry?(entry),
      do: retry(t, ref, entry),
      else: connected_error(ref, entry, stage, reason, t)
  end

  defp connected_error(ref, entry, stage, reason, t) do
    if entry.conn, do: Conn.close(entry.conn)
    t = forget(t, ref)

    case {entry.kind, stage} do
      {:get, _} -> {:ok, %{t | get: nil}}
      {:post, :connect} -> {:closed, "cannot reach #{t.url}: #{describe(reason)}", t}
      {:post, :send} -> failed(entry, "HTTP request to #{t.url} failed: #{describe(reason)}", t)
    end
  end

  defp describe(reason) when is_binary(reason), do: reason
  defp describe(reason), do: inspect(reason)

  defp socket_event({:data, bytes}, ref, entry, t) do
    case Conn.data(entry.conn, bytes) do
      {:error, reason} ->
        t = drop(t, ref)
        answer_failed(entry, "the answer of #{t.url} is not HTTP/1.1: #{reason}", t)

      {events, conn} ->
        t = put_in(t.requests[ref].conn, conn)
        events |> run(ref, {:ok, t}) |> read_on(ref)
    end
  end

  defp socket_event(what, ref, entry, t) do
    cond do
      retry?(entry) -> retry(t, ref, entry)
      what == :closed -> ended(Conn.closed(entry.conn), ref, entry, t)
      # A socket error (a reset) cuts the answer wherever it was, even one framed by the close.
      Conn.closed(entry.conn) == :done -> ended({:cut, :body}, ref, entry, t)
      true -> ended(Conn.closed(entry.conn), ref, entry, t)
    end
  end

  # The response's parts in order, while its request lives. Messages decoded along the way are
  # gathered; an end (failed, lost) after some of them is delivered as the next event, since
  # the contract gives one event per call.
  defp run([], _ref, result), do: result

  defp run([event | rest], ref, result) do
    t = transport(result)

    case t.requests[ref] do
      nil -> result
      entry -> run(rest, ref, merge(result, part(event, ref, entry, t)))
    end
  end

  defp merge({:ok, _}, result), do: result
  defp merge({:messages, ms, _}, {:ok, t}), do: {:messages, ms, t}
  defp merge({:messages, ms, _}, {:messages, more, t}), do: {:messages, ms ++ more, t}

  defp merge({:messages, ms, _}, ending) do
    later = ending |> Tuple.delete_at(tuple_size(ending) - 1)
    send(self(), {:cmdc_mcp_http, :then, later})
    {:messages, ms, transport(ending)}
  end

  defp transport(result), do: elem(result, tuple_size(result) - 1)

  # One more socket read for a request still open.
  defp read_on(result, ref) do
    case transport(result).requests[ref] do
      %{conn: conn} when conn != nil -> Conn.next(conn)
      _ -> :ok
    end

    result
  end

  defp ended(:done, ref, entry, t), do: part(:done, ref, entry, t)

  defp ended({:cut, :head}, ref, entry, t) do
    t = drop(t, ref)
    answer_failed(entry, "#{t.url} closed the connection before answering", t)
  end

  # A cut event stream ends like a closed one (it may be resumed); a cut error body still says
  # what it could; a cut JSON body is lost.
  defp ended({:cut, :body}, ref, entry, t) do
    if entry.sse != nil or error_status?(entry) do
      part(:done, ref, entry, t)
    else
      t = drop(t, ref)
      answer_failed(entry, "#{t.url} closed the connection in the middle of its answer", t)
    end
  end

  defp answer_failed(%{kind: :get}, _reason, t), do: {:ok, %{t | get: nil}}
  defp answer_failed(entry, reason, t), do: failed(entry, reason, t)

  defp error_status?(entry), do: Map.get(entry, :status) not in [nil, 200, 206]

  # --- the parts of a response ---

  defp part({:head, status, headers}, ref, entry, t) do
    t = capture_session(t, headers)

    entry =
      cond do
        status not in [200, 206] -> %{entry | sse: nil}
        entry.kind == :get -> entry
        sse?(headers) -> %{entry | sse: SSE.new()}
        true -> entry
      end

    {:ok, put_in(t.requests[ref], Map.merge(entry, %{status: status, body: [], size: 0}))}
  end

  defp part({:data, chunk}, ref, %{sse: nil} = entry, t) do
    size = entry.size + byte_size(chunk)

    cond do
      error_status?(entry) and size >= @error_body ->
        keep = binary_part(chunk, 0, @error_body - entry.size)
        part(:done, ref, %{entry | body: [entry.body | keep]}, t)

      size > t.max_body ->
        too_big(ref, entry, t)

      true ->
        {:ok, put_in(t.requests[ref], %{entry | body: [entry.body | chunk], size: size})}
    end
  end

  defp part({:data, chunk}, ref, entry, t) do
    {events, sse} = SSE.parse(entry.sse, chunk)

    if SSE.pending_bytes(sse) > t.max_body,
      do: too_big(ref, entry, t),
      else: sse_events(events, sse, ref, entry, t)
  end

  defp part(:done, ref, %{kind: :get} = entry, t) when entry.status in [200, 206] do
    # The server closed its event stream: open it again a little later (resuming from the last
    # event id it gave).
    Process.send_after(self(), {:cmdc_mcp_http, :reopen}, 1_000)
    {:ok, %{drop(t, ref) | get: nil}}
  end

  defp part(:done, ref, %{sse: nil} = entry, t) when entry.status in [200, 206] do
    t = release(t, ref)

    case JSON.decode(IO.iodata_to_binary(entry.body)) do
      {:ok, message} -> {:messages, List.wrap(message), t}
      {:error, reason} -> failed(entry, "the server's answer is not JSON: #{reason}", t)
    end
  end

  defp part(:done, ref, %{status: status} = entry, t) when status in [200, 206] do
    t = drop(t, ref)

    cond do
      entry.answered? or entry.id == nil ->
        {:ok, t}

      t.last_event_id != nil and t.get == nil ->
        # The stream broke before the response: resume it from the last event seen.
        {:ok, open_get(t)}

      t.last_event_id != nil ->
        {:ok, t}

      true ->
        failed(entry, "the server closed the event stream before answering", t)
    end
  end

  defp part(:done, ref, entry, t),
    do: http_status(entry.status, IO.iodata_to_binary(entry.body), entry, release(t, ref))

  defp sse_events(events, sse, ref, entry, t) do
    last_id = Enum.find_value(Enum.reverse(events), & &1.id) || t.last_event_id
    messages = Enum.flat_map(events, &decode_event/1)
    answered? = entry.answered? or Enum.any?(messages, &answers?(&1, entry))
    t = %{t | last_event_id: last_id}

    # Once a request's stream has carried its response nothing more is owed on it (the server
    # SHOULD close it then): it is closed here, so one that stays open holds nothing.
    if answered? and entry.kind == :post,
      do: {:messages, messages, drop(t, ref)},
      else:
        {:messages, messages, put_in(t.requests[ref], %{entry | sse: sse, answered?: answered?})}
  end

  # Over max_body: the connection is closed now (the kernel drops what it holds) and the
  # request fails.
  defp too_big(ref, entry, t) do
    t = drop(t, ref)
    reason = "an answer over #{t.max_body} bytes (max_response_bytes); its stream was closed"

    case entry.kind do
      :get -> {:ok, %{t | get: nil}}
      :post -> failed(entry, reason, t)
    end
  end

  # Closes the request's connection (or stops its connecting process) and forgets it.
  # (A connection being made is aborted; one being written to is closed under its writer.)
  defp drop(t, ref) do
    case t.requests[ref] do
      %{conn: conn, pid: pid} ->
        if conn, do: Conn.close(conn)
        if pid, do: Process.exit(pid, :kill)
        forget(t, ref)

      nil ->
        t
    end
  end

  # The request's answer was read: its connection is kept for the next request when it is
  # fit for one (`Conn.reusable?/1`: read to its end, kept alive by both sides), else closed.
  # Event streams and answers cut short never come here.
  defp release(t, ref) do
    case t.requests[ref] do
      %{conn: conn} when conn != nil and t.keep_alive and not t.closed? ->
        if Conn.reusable?(conn) do
          pool = Pool.checkin(t.pool, Pool.key(t.uri), conn)
          forget(%{t | pool: pool}, ref)
        else
          drop(t, ref)
        end

      _ ->
        drop(t, ref)
    end
  end

  # Forgets a request; a connection it held frees a turn for the next waiting one.
  defp forget(t, ref) do
    {entry, requests} = Map.pop(t.requests, ref)
    sockets = if entry[:conn], do: Map.delete(t.sockets, entry.conn.socket), else: t.sockets
    waiting = if entry[:waiting?], do: :queue.delete(ref, t.waiting), else: t.waiting
    streams = if entry[:stream?], do: t.streams - 1, else: t.streams
    pump(%{t | requests: requests, sockets: sockets, waiting: waiting, streams: streams})
  end

  defp http_status(status, _body, _entry, t) when status in [200, 202, 204], do: {:ok, t}

  defp http_status(status, _body, %{kind: :get}, t) when status in [404, 405],
    do: {:ok, %{t | get: nil}}

  defp http_status(404, _body, %{kind: :post}, %{session: session} = t) when session != nil,
    do: {:lost, "the server ended the session (HTTP 404)", %{t | session: nil}}

  defp http_status(status, body, entry, t) do
    case {entry.kind, JSON.decode(body)} do
      {:post, {:ok, %{"jsonrpc" => "2.0", "error" => _} = msg}} when entry.id != nil ->
        {:messages, [Map.put(msg, "id", entry.id)], t}

      {:post, _} ->
        failed(entry, "HTTP #{status} from #{t.url}: #{String.slice(body, 0, 300)}", t)

      {:get, _} ->
        {:ok, %{t | get: nil}}
    end
  end

  defp failed(%{id: nil}, reason, t) do
    Logger.warning("mcp #{t.name}: #{reason}")
    {:ok, t}
  end

  defp failed(%{id: id}, reason, t), do: {:failed, id, reason, t}

  defp answers?(%{"id" => id} = msg, %{id: id}),
    do: is_map_key(msg, "result") or is_map_key(msg, "error")

  defp answers?(_, _), do: false

  defp decode_event(%{event: "message", data: data}) do
    case JSON.decode(data) do
      {:ok, message} -> List.wrap(message)
      {:error, _} -> []
    end
  end

  defp decode_event(_), do: []

  defp sse?(headers) do
    Enum.any?(headers, fn {k, v} ->
      k == "content-type" and String.starts_with?(String.downcase(v), "text/event-stream")
    end)
  end

  defp capture_session(t, headers) do
    case List.keyfind(headers, "mcp-session-id", 0) do
      {_, id} -> %{t | session: id}
      nil -> t
    end
  end

  @doc "Ends the session (`DELETE`, when there is one) and closes every open request."
  @impl true
  def close(t) do
    t = Enum.reduce(Map.keys(t.requests), %{t | closed?: true}, &drop(&2, &1))
    Pool.close_all(t.pool)

    # The DELETE is sent and its answer awaited (2 s at most) by a process of its own.
    if t.session do
      uri = t.uri
      headers = headers(t)

      spawn(fn ->
        {ref, _pid} = Conn.open(uri, "DELETE", headers, "", connect_timeout: 2_000)

        receive do
          {:cmdc_mcp_conn, ^ref, {:ok, conn}} -> await_status(conn)
        after
          2_000 -> :ok
        end
      end)
    end

    :ok
  end

  defp await_status(conn) do
    Conn.next(conn)

    receive do
      msg -> if Conn.message(msg) != :unknown, do: Conn.close(conn)
    after
      2_000 -> Conn.close(conn)
    end
  end

  @doc "What a time-out message adds about this transport."
  @impl true
  def diagnosis(_t), do: ""
end
