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

  Each request is an HTTP/1.1 exchange on a connection of its own
  (`CMDC.Tool.MCP.Client.HTTP.Conn`, over `:gen_tcp` or verified `:ssl`), read in the client
  process one socket read at a time (`active: :once`): a slow SSE stream never blocks anything,
  and a fast one waits in the server's socket buffers, not in the VM. `https` servers are
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
  alias CMDC.Tool.MCP.Client.HTTP.Conn
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
    closed?: false
  ]

  @type t :: %__MODULE__{}

  @doc """
  Prepares the transport for `spec` (`:url`, `:headers` map). Nothing is sent yet; a URL that
  is not `http(s)://host…` is refused.
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
         timeout: limits.request_timeout
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

      {ref, pid} = Conn.open(t.uri, "POST", headers, json)
      id = message["id"]

      # A notification's answer is a bare 202; one that takes longer is cut. A request's
      # answer is bounded by the client's own time-out (`cancel/2`).
      if id == nil, do: Process.send_after(self(), {:cmdc_mcp_http, :deadline, ref}, t.timeout)

      entry = %{kind: :post, id: id, pid: pid, conn: nil, sse: nil, answered?: false}
      {:ok, put_in(t.requests[ref], entry)}
    end
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

    {ref, pid} =
      Conn.open(t.uri, "GET", [{"accept", "text/event-stream"} | headers(t)] ++ resume, "")

    entry = %{kind: :get, id: nil, pid: pid, conn: nil, sse: SSE.new(), answered?: false}
    %{t | get: ref, requests: Map.put(t.requests, ref, entry)}
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

  def handle_info(msg, t) do
    case Conn.message(msg) do
      {socket, what} when is_map_key(t.sockets, socket) ->
        ref = t.sockets[socket]
        socket_event(what, ref, t.requests[ref], t)

      _ ->
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

  defp socket_event(:closed, ref, entry, t), do: ended(Conn.closed(entry.conn), ref, entry, t)
  # A socket error (a reset) cuts the answer wherever it was, even one framed by the close.
  defp socket_event({:error, _}, ref, entry, t) do
    case Conn.closed(entry.conn) do
      :done -> ended({:cut, :body}, ref, entry, t)
      cut -> ended(cut, ref, entry, t)
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
    t = drop(t, ref)

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
    do: http_status(entry.status, IO.iodata_to_binary(entry.body), entry, drop(t, ref))

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
  defp drop(t, ref) do
    case t.requests[ref] do
      %{conn: conn, pid: pid} ->
        if conn, do: Conn.close(conn), else: Process.exit(pid, :kill)
        forget(t, ref)

      nil ->
        t
    end
  end

  defp forget(t, ref) do
    {entry, requests} = Map.pop(t.requests, ref)
    sockets = if entry[:conn], do: Map.delete(t.sockets, entry.conn.socket), else: t.sockets
    %{t | requests: requests, sockets: sockets}
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
    t = Enum.reduce(Map.keys(t.requests), t, &drop(&2, &1))

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
