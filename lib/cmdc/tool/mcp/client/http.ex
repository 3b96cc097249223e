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

  Bodies are bounded: a JSON body or one SSE event over `max_response_bytes` fails its request
  and the stream is closed; a request that times out or whose caller goes away has its stream
  closed too (`cancel/2`), so nothing keeps reading for it.

  The HTTP client is OTP's `:httpc` (no dependency, TLS through `:ssl`): responses stream into
  the client process as messages (`stream: {:self, :once}`), one chunk at a time, so a slow
  SSE stream never blocks anything. A Rust client on the NIF's tokio runtime would have meant
  a TLS stack and an HTTP crate in the native build (minutes of compile time on this project's
  machines, a larger attack surface) for no measurable gain: a tool call's cost is the
  server's work and the network, not the parsing of one response.
  """

  @behaviour CMDC.Tool.MCP.Client.Transport

  require Logger

  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.Client.SSE

  @profile :cmdc_mcp

  defstruct [
    :url,
    :name,
    max_body: 16_777_216,
    headers: [],
    session: nil,
    version: nil,
    requests: %{},
    get: nil,
    last_event_id: nil,
    closed?: false
  ]

  @type t :: %__MODULE__{}

  @doc "Prepares the transport for `spec` (`:url`, `:headers` map). Nothing is sent yet."
  @impl true
  def connect(spec, name, limits) do
    with :ok <- start_httpc(spec.url) do
      headers = Enum.map(Map.get(spec, :headers, %{}), fn {k, v} -> {to_string(k), v} end)

      {:ok,
       %__MODULE__{
         url: spec.url,
         name: name,
         headers: headers,
         max_body: limits.max_response_bytes
       }}
    end
  end

  defp start_httpc(url) do
    apps = if String.starts_with?(url, "https:"), do: [:inets, :ssl], else: [:inets]

    with :ok <- Enum.reduce_while(apps, :ok, &ensure_started/2) do
      case :inets.start(:httpc, profile: @profile) do
        {:ok, _} ->
          # Every pending call holds a connection while its SSE stream is open.
          :httpc.set_options(
            [max_sessions: 64, max_keep_alive_length: 0, keep_alive_timeout: 60_000],
            @profile
          )

        {:error, {:already_started, _}} ->
          :ok

        {:error, reason} ->
          {:error, "cannot start the HTTP client: #{inspect(reason)}"}
      end
    end
  end

  defp ensure_started(app, :ok) do
    case Application.ensure_all_started(app) do
      {:ok, _} -> {:cont, :ok}
      {:error, reason} -> {:halt, {:error, "cannot start #{app}: #{inspect(reason)}"}}
    end
  end

  @doc """
  Records the era and version; a legacy session also opens the server's event stream (a `GET`).
  """
  @impl true
  def ready(t, :legacy, version), do: open_get(%{t | version: version})
  def ready(t, :modern, _version), do: t

  @doc "Closes the stream of request `id` (it timed out or its caller went away)."
  @impl true
  def cancel(t, id) do
    case Enum.find(t.requests, fn {_, e} -> e.kind == :post and e[:id] == id end) do
      {ref, _} ->
        :httpc.cancel_request(ref, @profile)
        %{t | requests: Map.delete(t.requests, ref)}

      nil ->
        t
    end
  end

  @doc "POSTs one message; its answer arrives as messages to `handle_info/2`."
  @impl true
  def send_message(%__MODULE__{} = t, message) do
    with {:ok, json} <- JSON.encode(message) do
      headers =
        [{~c"accept", ~c"application/json, text/event-stream"} | modern_headers(message)] ++
          headers(t)

      request = {String.to_charlist(t.url), headers, ~c"application/json", json}

      case :httpc.request(
             :post,
             request,
             [timeout: :infinity, connect_timeout: 10_000],
             opts(),
             @profile
           ) do
        {:ok, ref} ->
          entry = %{kind: :post, id: message["id"], sse: nil, body: [], answered?: false}
          {:ok, put_in(t.requests[ref], entry)}

        {:error, reason} ->
          {:error, "HTTP request to #{t.url} failed: #{inspect(reason)}"}
      end
    end
  end

  defp opts, do: [sync: false, stream: {:self, :once}, body_format: :binary]

  # A modern request names its version, method and tool in headers (the server may route on
  # them without reading the body); a legacy one has none of them.
  defp modern_headers(%{"method" => method, "params" => %{"_meta" => meta} = params})
       when is_map_key(meta, "io.modelcontextprotocol/protocolVersion") do
    version = meta["io.modelcontextprotocol/protocolVersion"]
    name = if method == "tools/call", do: params["name"]

    [{"mcp-protocol-version", version}, {"mcp-method", method}, {"mcp-name", name}]
    |> Enum.reject(fn {_, v} -> not is_binary(v) end)
    |> Enum.map(fn {k, v} -> {String.to_charlist(k), String.to_charlist(v)} end)
  end

  defp modern_headers(_message), do: []

  defp headers(t) do
    [
      {"mcp-session-id", t.session},
      {"mcp-protocol-version", t.version},
      {"last-event-id", nil}
      | t.headers
    ]
    |> Enum.reject(fn {_, v} -> v == nil end)
    |> Enum.map(fn {k, v} -> {String.to_charlist(k), String.to_charlist(to_string(v))} end)
  end

  defp open_get(%{closed?: true} = t), do: t

  defp open_get(t) do
    headers =
      [{~c"accept", ~c"text/event-stream"} | headers(t)] ++
        if(t.last_event_id,
          do: [{~c"last-event-id", String.to_charlist(t.last_event_id)}],
          else: []
        )

    case :httpc.request(
           :get,
           {String.to_charlist(t.url), headers},
           [timeout: :infinity],
           opts(),
           @profile
         ) do
      {:ok, ref} ->
        %{
          t
          | get: ref,
            requests: Map.put(t.requests, ref, %{kind: :get, sse: SSE.new(), body: []})
        }

      {:error, _} ->
        t
    end
  end

  @doc """
  Handles a message the client process received: `{:messages, [decoded], t}`, `{:ok, t}`,
  `{:failed, id, reason, t}` (a request's answer will never come), `{:closed, reason, t}`
  (the session is gone), or `:unknown`.
  """
  @impl true
  def handle_info({:http, reply}, %__MODULE__{requests: requests} = t)
      when is_map_key(requests, elem(reply, 0)) do
    ref = elem(reply, 0)

    event =
      case reply do
        {_, :stream_start, headers, pid} -> {:stream_start, headers, pid}
        {_, :stream, chunk} -> {:stream, chunk}
        {_, :stream_end, headers} -> {:stream_end, headers}
        {_, result} -> result
      end

    event(event, ref, requests[ref], t)
  end

  def handle_info({:cmdc_mcp_http, :reopen}, t), do: {:ok, open_get(t)}
  def handle_info(_, _), do: :unknown

  defp event({:stream_start, headers, pid}, ref, entry, t) do
    t = capture_session(t, headers)
    :httpc.stream_next(pid)

    entry =
      if sse?(headers),
        do: Map.merge(entry, %{sse: SSE.new(), pid: pid}),
        else: Map.put(entry, :pid, pid)

    {:ok, put_in(t.requests[ref], entry)}
  end

  defp event({:stream, chunk}, ref, %{sse: nil} = entry, t) do
    size = Map.get(entry, :size, 0) + byte_size(chunk)

    if size > t.max_body do
      too_big(ref, entry, t)
    else
      :httpc.stream_next(entry.pid)
      entry = entry |> Map.put(:body, [entry.body | chunk]) |> Map.put(:size, size)
      {:ok, put_in(t.requests[ref], entry)}
    end
  end

  defp event({:stream, chunk}, ref, entry, t) do
    {events, sse} = SSE.parse(entry.sse, chunk)

    if SSE.pending_bytes(sse) > t.max_body,
      do: too_big(ref, entry, t),
      else: sse_events(events, sse, ref, entry, t)
  end

  defp event({:stream_end, _headers}, ref, %{kind: :get}, t) do
    # The server closed its event stream: open it again a little later (resuming from the last
    # event id it gave).
    Process.send_after(self(), {:cmdc_mcp_http, :reopen}, 1_000)
    {:ok, %{t | requests: Map.delete(t.requests, ref), get: nil}}
  end

  defp event({:stream_end, _headers}, ref, %{sse: nil} = entry, t) do
    t = %{t | requests: Map.delete(t.requests, ref)}

    case JSON.decode(IO.iodata_to_binary(entry.body)) do
      {:ok, message} -> {:messages, List.wrap(message), t}
      {:error, reason} -> failed(entry, "the server's answer is not JSON: #{reason}", t)
    end
  end

  defp event({:stream_end, _headers}, ref, entry, t) do
    t = %{t | requests: Map.delete(t.requests, ref)}

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

  defp event({{_version, status, _reason}, headers, body}, ref, entry, t) do
    t = %{capture_session(t, headers) | requests: Map.delete(t.requests, ref)}
    http_status(status, body, entry, t)
  end

  defp event({:error, reason}, ref, entry, t) do
    t = %{t | requests: Map.delete(t.requests, ref)}

    case {entry.kind, reason} do
      {:get, _} ->
        {:ok, %{t | get: nil}}

      {:post, {:failed_connect, _}} ->
        {:closed, "cannot reach #{t.url}: #{inspect(reason)}", t}

      {:post, _} ->
        failed(entry, "HTTP request to #{t.url} failed: #{inspect(reason)}", t)
    end
  end

  defp sse_events(events, sse, ref, entry, t) do
    :httpc.stream_next(entry.pid)

    last_id = Enum.find_value(Enum.reverse(events), & &1.id) || t.last_event_id
    messages = Enum.flat_map(events, &decode_event/1)
    answered? = Map.get(entry, :answered?, false) or Enum.any?(messages, &answers?(&1, entry))
    entry = %{entry | sse: sse} |> Map.put(:answered?, answered?)
    {:messages, messages, %{put_in(t.requests[ref], entry) | last_event_id: last_id}}
  end

  # Over max_body: the stream is closed now (httpc drops what it holds) and the request fails.
  defp too_big(ref, entry, t) do
    :httpc.cancel_request(ref, @profile)
    t = %{t | requests: Map.delete(t.requests, ref)}
    reason = "an answer over #{t.max_body} bytes (max_response_bytes); its stream was closed"

    case entry.kind do
      :get -> {:ok, %{t | get: nil}}
      :post -> failed(entry, reason, t)
    end
  end

  defp http_status(status, _body, _entry, t) when status in [200, 202, 204], do: {:ok, t}

  defp http_status(status, _body, %{kind: :get}, t) when status in [404, 405],
    do: {:ok, %{t | get: nil}}

  defp http_status(404, _body, %{kind: :post}, %{session: session} = t) when session != nil,
    do: {:lost, "the server ended the session (HTTP 404)", %{t | session: nil}}

  defp http_status(status, body, entry, t) do
    text = body |> to_string() |> String.slice(0, 300)

    case {entry.kind, JSON.decode(text)} do
      {:post, {:ok, %{"jsonrpc" => "2.0", "error" => _} = msg}} when entry.id != nil ->
        {:messages, [Map.put(msg, "id", entry.id)], t}

      {:post, _} ->
        failed(entry, "HTTP #{status} from #{t.url}: #{text}", t)

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
      :string.lowercase(k) == ~c"content-type" and
        String.starts_with?(to_string(v), "text/event-stream")
    end)
  end

  defp capture_session(t, headers) do
    Enum.find_value(headers, t, fn {k, v} ->
      if :string.lowercase(k) == ~c"mcp-session-id", do: %{t | session: to_string(v)}
    end)
  end

  @doc "Ends the session (`DELETE`, when there is one) and drops every open request."
  @impl true
  def close(t) do
    Enum.each(Map.keys(t.requests), &:httpc.cancel_request(&1, @profile))

    if t.session do
      request = {String.to_charlist(t.url), headers(t)}

      :httpc.request(
        :delete,
        request,
        [timeout: 2_000],
        [sync: false, receiver: fn _ -> :ok end],
        @profile
      )
    end

    :ok
  end

  @doc "What a time-out message adds about this transport."
  @impl true
  def diagnosis(_t), do: ""
end
