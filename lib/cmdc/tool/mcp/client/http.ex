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

  The HTTP itself is the native client (`CMDC.Tool.HTTP.Client`: hyper and rustls on the NIF's
  tokio runtime), one per transport, keeping up to `http_connections` idle connections for
  `http_idle_ms` (`keep_alive: false` in the spec: a connection per request). `https` servers
  are verified, with their host name, against the operating system's trust store; the spec's
  `ca_file:` (a PEM file) trusts its CA certificates instead, and `verify: :verify_none` turns
  the check off (loudly; for tests only).

  Every answer is bounded, whatever its status, size or pace: a JSON body or one SSE event over
  `max_response_bytes` fails its request and its connection is closed; the body of an error
  status (4xx, 5xx) is read only up to 64 kB, enough for its error text, then the connection is
  closed; a request that times out or whose caller goes away (`cancel/2`) has its connection
  closed, and so does the answer to a notification that takes longer than `request_timeout`.
  An event stream is read one event at a time: the next is read only once this process took
  the one before (a credit window of four events), so a fast stream waits in the server's
  socket buffers, not in the VM, and a slow one blocks nothing. A connection is kept for the
  next request only when its answer was read to its end. At most `http_connections`
  (`CMDC.Tool.MCP.Client.Limits`) requests hold a connection at once; the others wait their
  turn, in order (the session's one long-lived stream is not counted).
  """

  @behaviour CMDC.Tool.MCP.Client.Transport

  require Logger

  alias CMDC.Tool.HTTP.Client, as: Native
  alias CMDC.Tool.JSON

  # What an error status's body may hold: enough for a JSON-RPC error or a page of text.
  @error_body 65_536

  defstruct [
    :url,
    :name,
    :client,
    max_body: 16_777_216,
    timeout: 30_000,
    headers: [],
    session: nil,
    version: nil,
    requests: %{},
    ids: %{},
    get: nil,
    last_event_id: nil,
    closed?: false,
    keep_alive: true,
    max_connections: 8,
    waiting: :queue.new(),
    streams: 0
  ]

  @type t :: %__MODULE__{}

  @doc """
  Prepares the transport for `spec` (`:url`, `:headers` map, `:keep_alive`: `false` for a
  connection per request, `:ca_file`, `:verify`). Nothing is sent yet; a URL that is not
  `http(s)://host…` is refused.
  """
  @impl true
  def connect(spec, name, limits) do
    with :ok <- check_uri(URI.parse(spec.url), spec.url),
         {:ok, client} <- client(spec, limits) do
      headers =
        Enum.map(Map.get(spec, :headers, %{}), fn {k, v} -> {to_string(k), to_string(v)} end)

      {:ok,
       %__MODULE__{
         url: spec.url,
         name: name,
         client: client,
         headers: headers,
         max_body: limits.max_response_bytes,
         timeout: limits.request_timeout,
         keep_alive: Map.get(spec, :keep_alive, true) != false,
         max_connections: limits.http_connections
       }}
    end
  end

  defp check_uri(%URI{scheme: scheme, host: host}, _url)
       when scheme in ["http", "https"] and is_binary(host) and host != "",
       do: :ok

  defp check_uri(_uri, url), do: {:error, "not an http:// or https:// URL: #{inspect(url)}"}

  defp client(spec, limits) do
    keep_alive = Map.get(spec, :keep_alive, true) != false

    Native.new(
      idle_ms: limits.http_idle_ms,
      max_idle: if(keep_alive, do: limits.http_connections, else: 0),
      ca_file: Map.get(spec, :ca_file),
      verify: Map.get(spec, :verify, :verify_peer)
    )
  end

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

      entry = entry(:post, id, {"POST", headers, json})
      start(t, ref, %{entry | stream?: message["method"] == "subscriptions/listen"})
    end
  end

  defp entry(kind, id, request) do
    %{kind: kind, id: id, handle: nil, status: nil, answered?: false, request: request}
    |> Map.merge(%{waiting?: false, stream?: kind == :get})
  end

  # --- connections: at most `max_connections` in use; the rest wait their turn in order ---
  # The session's long-lived streams (a legacy `GET`, `subscriptions/listen`: one each at
  # most) never wait: held for the session, they would starve every request behind them.

  defp start(t, ref, entry) do
    if entry.stream? or (busy(t) < t.max_connections and not t.closed?) do
      launch(t, ref, entry)
    else
      entry = %{entry | waiting?: true}
      {:ok, %{t | requests: Map.put(t.requests, ref, entry), waiting: :queue.in(ref, t.waiting)}}
    end
  end

  defp busy(t), do: map_size(t.requests) - :queue.len(t.waiting) - t.streams

  defp launch(t, ref, entry) do
    {method, headers, body} = entry.request
    headers = if t.keep_alive, do: headers, else: headers ++ [{"connection", "close"}]
    opts = [max_body: t.max_body, max_error_body: @error_body, events: true]

    case Native.request(t.client, method, t.url, headers, body, opts) do
      {:ok, {_handle, nid} = handle} ->
        entry = %{entry | handle: handle, waiting?: false}
        # (a stream waiting is launched again while counted)
        streams = if entry.stream? and not is_map_key(t.requests, ref), do: 1, else: 0

        {:ok,
         %{
           t
           | requests: Map.put(t.requests, ref, entry),
             ids: Map.put(t.ids, nid, ref),
             streams: t.streams + streams
         }}

      {:error, reason} ->
        {:error, "HTTP request to #{t.url} failed: #{reason}"}
    end
  end

  defp pump(%{closed?: false} = t) do
    with true <- busy(t) < t.max_connections,
         {{:value, ref}, waiting} <- :queue.out(t.waiting) do
      t = %{t | waiting: waiting}
      entry = t.requests[ref]

      case launch(t, ref, entry) do
        {:ok, t} ->
          pump(t)

        {:error, reason} ->
          Logger.warning("mcp #{t.name}: #{reason}")
          pump(forget(t, ref))
      end
    else
      _ -> t
    end
  end

  defp pump(t), do: t

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

    case start(t, ref, entry(:get, nil, {"GET", headers, ""})) do
      {:ok, t} ->
        %{t | get: ref}

      {:error, reason} ->
        Logger.warning("mcp #{t.name}: #{reason}")
        t
    end
  end

  @doc """
  Handles a message the client process received: `{:messages, [decoded], t}`, `{:ok, t}`,
  `{:failed, id, reason, t}` (a request's answer will never come), `{:lost, reason, t}`,
  `{:closed, reason, t}` (the session is gone), or `:unknown`.
  """
  @impl true
  def handle_info({:cmdc_http, nid, part}, t) do
    case t.ids do
      %{^nid => ref} -> part(part, ref, t.requests[ref], t)
      # What a request sent before it was dropped.
      _ -> {:ok, t}
    end
  end

  def handle_info({:cmdc_mcp_http, :reopen}, t), do: {:ok, open_get(t)}

  def handle_info({:cmdc_mcp_http, :deadline, ref}, t) when is_map_key(t.requests, ref) do
    Logger.warning("mcp #{t.name}: no answer to a notification within #{t.timeout} ms; closed")
    {:ok, drop(t, ref)}
  end

  def handle_info({:cmdc_mcp_http, :deadline, _ref}, t), do: {:ok, t}
  def handle_info(_msg, _t), do: :unknown

  # --- the parts of an answer ---

  defp part({:head, status, headers}, ref, entry, t) do
    t = capture_session(t, headers)
    {:ok, put_in(t.requests[ref], %{entry | status: status})}
  end

  defp part({:event, type, data, event_id}, ref, entry, t) do
    Native.ack(entry.handle, 1)
    t = if event_id, do: %{t | last_event_id: event_id}, else: t
    messages = if type == "message", do: decode_event(data), else: []
    answered? = entry.answered? or Enum.any?(messages, &answers?(&1, entry))

    # Once a request's stream has carried its response nothing more is owed on it (the server
    # SHOULD close it then): it is closed here, so one that stays open holds nothing.
    if answered? and entry.kind == :post,
      do: {:messages, messages, drop(t, ref)},
      else: {:messages, messages, put_in(t.requests[ref], %{entry | answered?: answered?})}
  end

  defp part(:end, ref, %{kind: :get}, t) do
    # The server closed its event stream: open it again a little later (resuming from the last
    # event id it gave).
    Process.send_after(self(), {:cmdc_mcp_http, :reopen}, 1_000)
    {:ok, %{forget(t, ref) | get: nil}}
  end

  defp part(:end, ref, entry, t) do
    t = forget(t, ref)

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

  defp part({:body, body}, ref, %{status: status} = entry, t) when status in [200, 206] do
    t = forget(t, ref)

    case JSON.decode(body) do
      {:ok, message} -> {:messages, List.wrap(message), t}
      {:error, reason} -> failed(entry, "the server's answer is not JSON: #{reason}", t)
    end
  end

  defp part({:body, body}, ref, entry, t),
    do: http_status(entry.status, body, entry, forget(t, ref))

  defp part({:error, stage, reason}, ref, entry, t) do
    t = forget(t, ref)

    case {entry.kind, stage} do
      {:get, _} -> {:ok, %{t | get: nil}}
      {:post, :connect} -> {:closed, "cannot reach #{t.url}: #{reason}", t}
      {:post, :too_big} -> failed(entry, reason, t)
      {:post, :send} -> failed(entry, "HTTP request to #{t.url} failed: #{reason}", t)
      {:post, :answer} -> failed(entry, "the answer of #{t.url} broke off: #{reason}", t)
    end
  end

  # Aborts the request (its connection is closed) and forgets it.
  defp drop(t, ref) do
    case t.requests[ref] do
      %{handle: handle} when handle != nil ->
        Native.cancel(handle)
        forget(t, ref)

      %{} ->
        forget(t, ref)

      nil ->
        t
    end
  end

  # Forgets a request; a connection it held frees a turn for the next waiting one.
  defp forget(t, ref) do
    {entry, requests} = Map.pop(t.requests, ref)

    case entry do
      nil ->
        t

      entry ->
        ids = if entry.handle, do: Map.delete(t.ids, elem(entry.handle, 1)), else: t.ids
        waiting = if entry.waiting?, do: :queue.delete(ref, t.waiting), else: t.waiting
        streams = if entry.stream? and not entry.waiting?, do: t.streams - 1, else: t.streams
        get = if t.get == ref, do: nil, else: t.get

        pump(%{
          t
          | requests: requests,
            ids: ids,
            waiting: waiting,
            streams: streams,
            get: get
        })
    end
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

  defp decode_event(data) do
    case JSON.decode(data) do
      {:ok, message} -> List.wrap(message)
      {:error, _} -> []
    end
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

    # The DELETE is sent and its answer awaited (2 s at most) by a process of its own.
    if t.session do
      {client, url, headers} = {t.client, t.url, headers(t)}
      spawn(fn -> Native.fetch(client, "DELETE", url, headers, "", timeout: 2_000) end)
    end

    :ok
  end

  @doc "What a time-out message adds about this transport."
  @impl true
  def diagnosis(_t), do: ""
end
