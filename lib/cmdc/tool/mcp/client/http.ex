defmodule CMDC.Tool.MCP.Client.HTTP do
  @moduledoc """
  The Streamable HTTP transport of `CMDC.Tool.MCP.Client` (MCP 2025-06-18 and 2025-11-25).

  Every client message is a `POST` to the server's one endpoint (`Accept: application/json,
  text/event-stream`); the answer is either one JSON body or an SSE stream carrying
  notifications (progress), server requests and finally the response. The `Mcp-Session-Id` the
  server gives at `initialize` and the negotiated `MCP-Protocol-Version` go on every later
  request. Once initialized, a `GET` stream (when the server offers one; `405` means it does
  not) carries server-initiated messages such as `notifications/tools/list_changed`.
  Resumption: an SSE stream that breaks before its response arrived is resumed with a `GET`
  carrying `Last-Event-ID` when the server numbered its events. A `404` on a request that
  carried the session id means the session expired: the transport closes and the client
  initializes again.

  The HTTP client is OTP's `:httpc` (no dependency, TLS through `:ssl`): responses stream into
  the client process as messages (`stream: {:self, :once}`), one chunk at a time, so a slow
  SSE stream never blocks anything. A Rust client on the NIF's tokio runtime would have meant
  a TLS stack and an HTTP crate in the native build (minutes of compile time on this project's
  machines, a larger attack surface) for no measurable gain: a tool call's cost is the
  server's work and the network, not the parsing of one response.
  """

  require Logger

  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.Client.SSE

  @profile :cmdc_mcp

  defstruct [
    :url,
    :name,
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
  @spec connect(map(), String.t()) :: {:ok, t()} | {:error, String.t()}
  def connect(spec, name) do
    with :ok <- start_httpc(spec.url) do
      headers = Enum.map(Map.get(spec, :headers, %{}), fn {k, v} -> {to_string(k), v} end)
      {:ok, %__MODULE__{url: spec.url, name: name, headers: headers}}
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

  @doc "Records the negotiated version and opens the server's event stream (a `GET`)."
  @spec ready(t(), String.t()) :: t()
  def ready(t, version), do: open_get(%{t | version: version})

  @doc "POSTs one message; its answer arrives as messages to `handle_info/2`."
  @spec send_message(t(), map()) :: {:ok, t()} | {:error, String.t()}
  def send_message(%__MODULE__{} = t, message) do
    with {:ok, json} <- JSON.encode(message) do
      headers = [{~c"accept", ~c"application/json, text/event-stream"} | headers(t)]
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
  @spec handle_info(term(), t()) ::
          {:messages, [map()], t()}
          | {:ok, t()}
          | {:failed, term(), String.t(), t()}
          | {:closed, String.t(), t()}
          | :unknown
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
    :httpc.stream_next(entry.pid)
    {:ok, put_in(t.requests[ref], %{entry | body: [entry.body | chunk]})}
  end

  defp event({:stream, chunk}, ref, entry, t) do
    :httpc.stream_next(entry.pid)
    {events, sse} = SSE.parse(entry.sse, chunk)
    last_id = Enum.find_value(Enum.reverse(events), & &1.id) || t.last_event_id
    messages = Enum.flat_map(events, &decode_event/1)
    answered? = Map.get(entry, :answered?, false) or Enum.any?(messages, &answers?(&1, entry))
    entry = %{entry | sse: sse} |> Map.put(:answered?, answered?)
    {:messages, messages, %{put_in(t.requests[ref], entry) | last_event_id: last_id}}
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

    case entry.kind do
      :get -> {:ok, %{t | get: nil}}
      :post -> failed(entry, "HTTP request to #{t.url} failed: #{inspect(reason)}", t)
    end
  end

  defp http_status(status, _body, _entry, t) when status in [200, 202, 204], do: {:ok, t}

  defp http_status(status, _body, %{kind: :get}, t) when status in [404, 405],
    do: {:ok, %{t | get: nil}}

  defp http_status(404, _body, %{kind: :post}, %{session: session} = t) when session != nil,
    do: {:closed, "the server ended the session (HTTP 404)", %{t | session: nil}}

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
  @spec close(t()) :: :ok
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
  @spec diagnosis(t()) :: String.t()
  def diagnosis(_t), do: ""
end
