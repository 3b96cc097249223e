defmodule CMDC.Tool.MCP.HTTP.Exchange do
  @moduledoc """
  The answers that take time on `CMDC.Tool.MCP.HTTP`, served in the httpd request process:

    * a `tools/call`: run by `CMDC.Tool.MCP.Calls`; answered with one JSON response, or with
      an SSE stream when the request has a `progressToken` and the client accepts
      `text/event-stream` (progress notifications, then the result);
    * a `subscriptions/listen`: an SSE stream with the acknowledgment first, then
      `notifications/tools/list_changed` for each change, until the client goes away.

  While it waits, the process watches its socket (`active: once`): a client that closes the
  connection cancels its call, and the runner kills the tool and every OS process it started.
  """

  require Record

  alias CMDC.Tool.{MCP, Runner}
  alias CMDC.Tool.MCP.Calls
  alias CMDC.Tool.MCP.HTTP.Body

  Record.defrecordp(:mod, Record.extract(:mod, from_lib: "inets/include/httpd.hrl"))

  # How long a cancelled call may take to die before the process moves on.
  @cancel_wait_ms 2_000
  # An SSE comment this often on a quiet subscription: proxies keep it, dead peers show.
  @keep_alive_ms 15_000

  @doc "Runs a call and answers it (`:sent` when streamed, else a response for the handler)."
  @spec call(map(), MCP.call()) :: :sent | {pos_integer(), list(), iodata()}
  def call(req, call) do
    handle = Calls.start(req.mcp, call, context(req))
    mon = Process.monitor(handle.pid)
    key = req.session && {:call, req.session, call.id}
    if key, do: :ets.insert(req.table, {key, self()})
    stream? = call.progress_token != nil and accepts_sse?(req.headers)
    watch(req.mod, :once)

    try do
      if stream?,
        do: stream_call(req, call, handle, mon),
        else: await_call(req, call, handle, mon)
    after
      watch(req.mod, false)
      if key, do: :ets.delete(req.table, key)
      Process.demonitor(mon, [:flush])
    end
  end

  defp context(%{config: %{context: %CMDC.Context{} = context}}), do: context
  defp context(%{session: nil, config: config}), do: Calls.context("mcp-http", config.working_dir)

  defp context(%{session: session, config: config}),
    do: CMDC.Context.new(session_id: "mcp-http-" <> session, working_dir: config.working_dir)

  defp accepts_sse?(headers), do: String.contains?(headers["accept"] || "", "text/event-stream")

  defp await_call(req, call, handle, mon) do
    case next(handle, mon) do
      {:update, _payload} -> await_call(req, call, handle, mon)
      {:done, result} -> Body.json(200, req.extra, MCP.call_reply(req.mcp, call, result))
      :cancelled -> Body.json(200, req.extra, cancelled(call))
      :gone -> :sent
    end
  end

  defp stream_call(req, call, handle, mon) do
    open_stream(req)
    stream_loop(req, call, handle, mon, 0)
  end

  defp stream_loop(req, call, handle, mon, count) do
    case next(handle, mon) do
      {:update, payload} ->
        if message = Calls.progress(call, count + 1, payload), do: event(req.mod, message)
        stream_loop(req, call, handle, mon, count + 1)

      {:done, result} ->
        event(req.mod, MCP.call_reply(req.mcp, call, result))
        :httpd_response.send_final_chunk(req.mod, false)
        :sent

      :cancelled ->
        :httpd_response.send_final_chunk(req.mod, false)
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
  defp next(%{ref: ref} = handle, mon) do
    receive do
      {Runner, ^ref, {:update, payload}} ->
        {:update, payload}

      {Runner, ^ref, {:done, result}} ->
        {:done, result}

      {:DOWN, ^mon, :process, _, reason} ->
        {:done, {:error, "the tool crashed: #{inspect(reason)}"}}

      {closed, _socket} when closed in [:tcp_closed, :tcp_error] ->
        stop(handle, mon, :gone)

      {:tcp_error, _socket, _reason} ->
        stop(handle, mon, :gone)

      {__MODULE__, :cancel} ->
        stop(handle, mon, :cancelled)
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
  leaves.
  """
  @spec listen(map(), map() | nil, term()) :: :sent
  def listen(req, ack, id) do
    # Subscribed before the client hears the stream is open: a change it makes on hearing so
    # waits in the mailbox rather than going to no one.
    :ets.insert(req.table, {{:sub, self()}, id})
    open_stream(req)
    if ack, do: event(req.mod, ack)
    watch(req.mod, :once)

    try do
      listen_loop(req, id)
    after
      :ets.delete(req.table, {:sub, self()})
    end
  end

  defp listen_loop(req, id) do
    receive do
      {:cmdc_mcp_http, :list_changed} ->
        event(req.mod, MCP.list_changed(id))
        listen_loop(req, id)

      {closed, _socket} when closed in [:tcp_closed, :tcp_error] ->
        :sent

      {:tcp_error, _socket, _reason} ->
        :sent
    after
      @keep_alive_ms ->
        :httpd_response.send_chunk(req.mod, ": keep-alive\n\n", false)
        listen_loop(req, id)
    end
  end

  defp open_stream(req) do
    headers =
      [
        {:content_type, ~c"text/event-stream"},
        {:cache_control, ~c"no-cache"},
        {~c"x-accel-buffering", ~c"no"}
      ] ++ Enum.map(req.extra, fn {k, v} -> {String.to_charlist(k), String.to_charlist(v)} end)

    :httpd_response.send_header(req.mod, 200, headers)
  end

  defp event(mod, message) do
    data = CMDC.Tool.JSON.encode!(message)

    :httpd_response.send_chunk(
      mod,
      IO.iodata_to_binary(["event: message\ndata: ", data, "\n\n"]),
      false
    )
  end

  # `active: :once` turns the peer closing the connection into a {:tcp_closed, socket} message
  # while this process waits; set back to passive before httpd reads the next request.
  defp watch(mod, mode) do
    case mod(mod, :socket_type) do
      :ip_comm -> :inet.setopts(mod(mod, :socket), active: mode)
      _ -> :ok
    end
  end
end
