defmodule CMDC.Tool.MCP.HTTP.Exchange do
  @moduledoc """
  The answers of `CMDC.Tool.MCP.HTTP` that take time, served in the request's own process:

    * a `tools/call`: run through `CMDC.Tool.MCP.Calls`; answered as JSON once done, or as an
      SSE stream when the request has a `progressToken` and accepts `text/event-stream`
      (progress notifications, then the result);
    * a subscription (`subscriptions/listen`, or a 2025-era session's GET stream): an SSE
      stream of `notifications/tools/list_changed` until the client leaves.

  A stream is bounded (`CMDC.Tool.MCP.HTTP.Limits`, in `CMDC.Tool.MCP.HTTP.Wire`): while the
  client lags, progress notifications and keep-alive comments are dropped; if it stops
  reading, the stream is closed and the call cancelled (the tool and its OS processes killed).
  The same happens when the client leaves (`{:cmdc_http_gone, id}`), cancels the call
  (`notifications/cancelled`), or ends its session (DELETE).
  """

  alias CMDC.Tool.{MCP, Runner}
  alias CMDC.Tool.MCP.Calls
  alias CMDC.Tool.MCP.HTTP.{Sessions, Wire}

  # How long a cancelled call may take to die before the process moves on.
  @cancel_wait_ms 2_000
  # An SSE comment this often on a quiet subscription: proxies keep it, dead peers show.
  @keep_alive_ms 15_000

  @doc "Runs a call and answers it (`:sent` when streamed or the client left, else a response)."
  @spec call(map(), MCP.call()) :: :sent | {pos_integer(), list(), iodata()}
  def call(req, call) do
    handle = Calls.start(req.mcp, call, context(req))
    mon = Process.monitor(handle.pid)
    busy(req, {:call, call.id}, true)
    stream? = call.progress_token != nil and accepts_sse?(req.headers)

    try do
      if stream?,
        do: stream_call(req, call, handle, mon),
        else: await_call(req, call, handle, mon)
    after
      busy(req, {:call, call.id}, false)
      Process.demonitor(mon, [:flush])
    end
  end

  # A call or stream in flight on a session: cancellable by id, and the session not idle.
  defp busy(%{session: nil}, _what, _on?), do: :ok

  defp busy(req, what, on?) do
    key =
      case what do
        {:call, id} -> {:call, req.session, id}
        :stream -> {:stream, req.session, self()}
      end

    if on?,
      do: :ets.insert(req.table, {key, self()}),
      else: :ets.delete(req.table, key)

    Sessions.busy(req.config.sessions, req.session, if(on?, do: 1, else: -1))
  end

  defp context(%{config: %{context: %CMDC.Context{} = context}}), do: context
  defp context(%{session: nil, config: config}), do: Calls.context("mcp-http", config.working_dir)

  defp context(%{session: session, config: config}),
    do: CMDC.Context.new(session_id: "mcp-http-" <> session, working_dir: config.working_dir)

  defp accepts_sse?(headers), do: String.contains?(headers["accept"] || "", "text/event-stream")

  defp await_call(req, call, handle, mon) do
    case next(req, handle, mon) do
      {:update, _payload} -> await_call(req, call, handle, mon)
      {:done, result} -> Wire.json(200, req.extra, MCP.call_reply(req.mcp, call, result))
      :cancelled -> Wire.json(200, req.extra, cancelled(call))
      :gone -> :sent
    end
  end

  defp stream_call(req, call, handle, mon) do
    case open_stream(req) do
      {:ok, stream} -> stream_loop(req, call, handle, mon, stream, 0)
      {:error, _} -> stop(handle, mon, :sent)
    end
  end

  defp stream_loop(req, call, handle, mon, stream, count) do
    case next(req, handle, mon) do
      {:update, payload} ->
        message = Calls.progress(call, count + 1, payload)

        # Progress may be dropped while the client lags; a client that stops reading closes
        # the stream, and the call goes with it.
        case message && event(stream, message, true) do
          {:error, _} -> stop(handle, mon, :sent)
          _ -> stream_loop(req, call, handle, mon, stream, count + 1)
        end

      {:done, result} ->
        event(stream, MCP.call_reply(req.mcp, call, result), false)
        Wire.finish(stream)
        :sent

      :cancelled ->
        Wire.finish(stream)
        :sent

      :gone ->
        :sent
    end
  end

  # The client cancelled (notifications/cancelled, DELETE of its session) but still waits for
  # an HTTP answer: an error it will drop, as it drops any answer to a cancelled request.
  defp cancelled(call),
    do: MCP.error(call.id, :invalid_request, "Request cancelled by the client")

  # The call's next event; :gone once the client left, :cancelled once it cancelled (the call is
  # dead then, or given up on after @cancel_wait_ms).
  defp next(req, %{ref: ref} = handle, mon) do
    rid = req.rid

    receive do
      {Runner, ^ref, {:update, payload}} ->
        {:update, latest(ref, payload)}

      {Runner, ^ref, {:done, result}} ->
        {:done, result}

      {:DOWN, ^mon, :process, _, reason} ->
        {:done, {:error, "the tool crashed: #{inspect(reason)}"}}

      {:cmdc_http_gone, ^rid} ->
        stop(handle, mon, :gone)

      {__MODULE__, :cancel} ->
        stop(handle, mon, :cancelled)
    end
  end

  # Progress coalesces: of the updates already waiting, only the newest is sent, so a tool
  # reporting faster than this process can encode never grows its mailbox.
  defp latest(ref, payload) do
    receive do
      {Runner, ^ref, {:update, newer}} -> latest(ref, newer)
    after
      0 -> payload
    end
  end

  defp stop(handle, mon, outcome) do
    Runner.cancel(handle)

    receive do
      {:DOWN, ^mon, :process, _, _} -> outcome
    after
      @cancel_wait_ms -> outcome
    end
  end

  @doc """
  Keeps a `subscriptions/listen` stream (`ack` first, notifications tagged with `id`), or a
  2025-era session's GET stream (`nil`, `nil`: plain notifications), open until the client
  leaves or stops reading.
  """
  @spec listen(map(), map() | nil, term()) :: :sent
  def listen(req, ack, id) do
    # Subscribed before the client hears the stream is open: a change it makes on hearing so
    # waits in the mailbox rather than going to no one.
    :ets.insert(req.table, {{:sub, self()}, id})
    busy(req, :stream, true)

    try do
      with {:ok, stream} <- open_stream(req),
           :ok <- if(ack, do: ok(event(stream, ack, false)), else: :ok) do
        listen_loop(req, id, stream)
      end
    after
      :ets.delete(req.table, {:sub, self()})
      busy(req, :stream, false)
    end

    :sent
  end

  defp ok({:error, _} = error), do: error
  defp ok(_), do: :ok

  defp listen_loop(req, id, stream) do
    rid = req.rid

    receive do
      {:cmdc_mcp_http, :list_changed} ->
        case event(stream, MCP.list_changed(id), false) do
          {:error, _} -> :sent
          _ -> listen_loop(req, id, stream)
        end

      {:cmdc_http_gone, ^rid} ->
        :sent
    after
      @keep_alive_ms ->
        case Wire.send(stream, ": keep-alive\n\n", true) do
          {:error, _} -> :sent
          _ -> listen_loop(req, id, stream)
        end
    end
  end

  defp open_stream(req) do
    headers = [
      {"content-type", "text/event-stream"},
      {"cache-control", "no-cache"},
      {"x-accel-buffering", "no"} | req.extra
    ]

    Wire.stream(req.exchange, 200, headers)
  end

  defp event(stream, message, droppable) do
    Wire.send(
      stream,
      ["event: message\ndata: ", CMDC.Tool.JSON.encode!(message), "\n\n"],
      droppable
    )
  end
end
