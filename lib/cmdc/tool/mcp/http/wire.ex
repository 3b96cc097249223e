defmodule CMDC.Tool.MCP.HTTP.Wire do
  @moduledoc """
  The HTTP side of `CMDC.Tool.MCP.HTTP`, in Rust (`native/cmdc_tool_core/src/http/server/`:
  hyper on the NIF's tokio runtime; `native/cmdc_tool_nif/src/http_server.rs`): it parses
  HTTP/1.1 (keep-alive; pipelined requests answered in order), refuses what needs no protocol
  knowledge (two `Host` or `Origin` headers: 400; a foreign `Origin`, or on a loopback bind a
  foreign `Host`: 403; limits: 413, 408, 431), and hands every other request to the process
  that called `listen/2` as

      {:cmdc_http, id, exchange, %{method: "POST", path: "/mcp", query: "",
                                   headers: [{"content-type", "application/json"}, ...],
                                   peer: {{127, 0, 0, 1}, 51234}, body: "..."}}

  Each request is answered once, with `reply/4` or `stream/3`. A process that called
  `watch/1` gets `{:cmdc_http_gone, id}` if the client leaves before its answer is complete.
  A stream is bounded (`CMDC.Tool.MCP.HTTP.Limits`): `send/3` says when an event was dropped
  or the stream closed because the client does not read.
  """

  import CMDC.Tool.Native, only: [with_dirty: 1]

  alias CMDC.Tool.MCP.HTTP.Limits
  alias CMDC.Tool.Native

  @typedoc "A listening server (a resource: it stops when its owner dies)."
  @type listener :: reference()
  @typedoc "One request's answer slot."
  @type exchange :: reference()
  @typedoc "An open event stream."
  @type stream :: reference()

  @doc """
  Listens on `ip:port` (0 picks a free port) with `limits`, allowing the `origins` besides
  loopback ones: `{:ok, {listener, port}}` or `{:error, message}`. The caller receives the
  requests; its death stops the listener.
  """
  @spec listen(:inet.ip_address(), :inet.port_number(), Limits.t(), [String.t()]) ::
          {:ok, {listener(), :inet.port_number()}} | {:error, String.t()}
  def listen(ip, port, %Limits{} = limits, origins) do
    limits
    |> Map.from_struct()
    |> Map.take([
      :max_body,
      :header_timeout_ms,
      :body_timeout_ms,
      :max_header_bytes,
      :max_connections,
      :stream_soft_bytes,
      :stream_hard_bytes
    ])
    |> Map.merge(%{ip: ip |> :inet.ntoa() |> to_string(), port: port, allowed_origins: origins})
    |> Native.http_listen()
  end

  @doc "Stops the listener: every connection ends, open streams and awaited answers too."
  @spec close(listener()) :: :ok
  def close(listener), do: Native.http_close(listener)

  @doc "The caller gets `{:cmdc_http_gone, id}` if the client leaves before its answer."
  @spec watch(exchange()) :: :ok
  def watch(exchange), do: Native.http_watch(exchange)

  @doc "Answers with a whole body: `:ok` or `{:error, message}` (e.g. the client has gone)."
  @spec reply(exchange(), 100..599, [{String.t(), String.t()}], iodata()) ::
          :ok | {:error, String.t()}
  def reply(exchange, status, headers, body) do
    case with_dirty(http_reply(exchange, status, headers, IO.iodata_to_binary(body))) do
      {:ok, :done} -> :ok
      {:error, _} = error -> error
    end
  end

  @doc "Answers with an event stream (chunked): `{:ok, stream}` or `{:error, message}`."
  @spec stream(exchange(), 100..599, [{String.t(), String.t()}]) ::
          {:ok, stream()} | {:error, String.t()}
  def stream(exchange, status, headers), do: Native.http_stream(exchange, status, headers)

  @doc """
  Queues one event: `:ok`, `:dropped` (a `droppable` event while the client lags behind),
  `{:error, :full}` (the client does not read: the stream is now closed, and what feeds it
  must stop) or `{:error, :closed}`.
  """
  @spec send(stream(), iodata(), boolean()) :: :ok | :dropped | {:error, :full | :closed}
  def send(stream, event, droppable) do
    case with_dirty(http_send(stream, IO.iodata_to_binary(event), droppable)) do
      {:ok, :queued} -> :ok
      {:ok, :dropped} -> :dropped
      {:error, _} = error -> error
    end
  end

  @doc """
  A JSON answer as `reply/4` takes it: `{status, headers, body}`.

      iex> CMDC.Tool.MCP.HTTP.Wire.json(200, [{"mcp-session-id", "s1"}], %{"ok" => true})
      {200, [{"content-type", "application/json"}, {"mcp-session-id", "s1"}], ~s({"ok":true})}
  """
  @spec json(100..599, [{String.t(), String.t()}], term()) ::
          {100..599, [{String.t(), String.t()}], binary()}
  def json(status, extra, body),
    do: {status, [{"content-type", "application/json"} | extra], CMDC.Tool.JSON.encode!(body)}

  @doc "Ends a stream once its queued events are sent."
  @spec finish(stream()) :: :ok
  def finish(stream), do: Native.http_finish(stream)
end
