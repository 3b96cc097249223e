defmodule CMDC.Tool.MCP.Server do
  @moduledoc """
  An MCP server over stdio: newline-delimited JSON-RPC 2.0 on stdin/stdout.

  stdout carries protocol frames and nothing else. Started by `CMDC.Tool.MCP.Main` (what
  `bin/cmdc-mcp` and `mix cmdc.mcp` run), frames go to the real stdout through a dedicated
  port while file descriptor 1 itself points at stderr (`CMDC.Tool.MCP.Stdio`), so output from
  any process of the VM and from any program it starts lands on stderr. Within `serve/2` the
  tool calls also run under a group leader that writes to stderr, so a tool's `IO.puts/1` never
  reaches the protocol stream, whatever the output device.

  Both MCP eras are served (`CMDC.Tool.MCP`): `initialize` sessions and stateless
  `2026-07-28` requests, on the same stream; `subscriptions/listen` streams stay registered
  until the client cancels them (`notifications/cancelled` with the listen request's id).

  Each `tools/call` runs through `CMDC.Tool.Runner` (`CMDC.Tool.MCP.Calls`), so calls overlap, a cancelled call
  (`notifications/cancelled`) is killed with everything it started, and partial results stream
  as `notifications/progress` when the client sent a `progressToken`. A malformed line gets a
  JSON-RPC error and the server reads on. At end of input (the client is gone) the calls still
  running are cancelled — tools and their OS processes killed — and `serve/2` returns.

  `serve/2` can run in any process that owns stdio.
  """

  @behaviour CMDC.Tool.MCP.Transport

  require Logger

  alias CMDC.Tool.{MCP, Pending, Runner}
  alias CMDC.Tool.MCP.{Calls, Protocol, Transport}

  # How long shutdown waits for cancelled calls to end (their tools are killed, not asked).
  @shutdown_ms 800

  @doc """
  Serves `tools` until stdin closes. Options: `:page_size` (tools per `tools/list` page),
  `:input` (an IO device, the caller's group leader by default), `:output` (an IO device or a
  port from `CMDC.Tool.MCP.Stdio.open/0`; stdio by default), `:list_changed` (advertise and send
  `notifications/tools/list_changed`: pass it when something calls `refresh/2`), `:context`
  (the `CMDC.Context` for calls).
  """
  @spec serve([module()], keyword()) :: :ok
  def serve(tools, opts \\ []) do
    CMDC.Tool.Options.check!(
      opts,
      [:page_size, :server_name, :input, :output, :list_changed, :context],
      "CMDC.Tool.MCP.Server.serve/2"
    )

    output = Keyword.get_lazy(opts, :output, &Process.group_leader/0)

    input =
      Keyword.get_lazy(opts, :input, fn ->
        # Raw bytes: with the default unicode encoding, binread would transcode UTF-8 input to
        # Latin-1 and break every non-ASCII argument.
        :io.setopts(Process.group_leader(), binary: true, encoding: :latin1)
        Process.group_leader()
      end)

    server = self()
    {reader, ref} = spawn_monitor(fn -> read_loop(input, server) end)
    registered? = Process.whereis(__MODULE__) == nil and Process.register(self(), __MODULE__)
    # Everything the calls print goes to stderr (tools inherit the group leader).
    leader = Process.group_leader()
    Process.group_leader(self(), Process.whereis(:standard_error))
    if is_port(output), do: Process.flag(:trap_exit, true)

    state = %{
      mcp: MCP.new(tools, Keyword.take(opts, [:page_size, :server_name, :list_changed])),
      output: output,
      calls: %{},
      subscriptions: MapSet.new(),
      described: describe(tools),
      reader: {reader, ref},
      context: Keyword.get_lazy(opts, :context, fn -> Calls.context() end)
    }

    try do
      loop(state)
    after
      Process.group_leader(self(), leader)
      if registered?, do: Process.unregister(__MODULE__)
    end
  end

  @doc """
  Gives a running server a new tool list (e.g. from a file watcher) and returns once the server
  uses it (or is gone): the old list's modules can be deleted then. It sends
  `notifications/tools/list_changed` when the listed tools differ, and only when it was started
  with `list_changed: true`.
  """
  @spec refresh(pid() | atom(), [module()]) :: :ok
  def refresh(server \\ __MODULE__, tools) do
    case GenServer.whereis(server) do
      nil ->
        :ok

      pid ->
        mon = Process.monitor(pid)
        send(pid, {:tools, tools, {self(), mon}})

        receive do
          {^mon, :ok} -> Process.demonitor(mon, [:flush])
          {:DOWN, ^mon, :process, _, _} -> :ok
        end

        :ok
    end
  end

  defp read_loop(input, server) do
    case IO.binread(input, :line) do
      :eof ->
        send(server, :eof)

      {:error, reason} ->
        send(server, {:read_error, reason})

      line ->
        send(server, {:line, line})
        read_loop(input, server)
    end
  end

  defp loop(state) do
    receive do
      {:line, line} ->
        state |> line(line) |> loop()

      {Runner, ref, {:update, payload}} ->
        state |> progress(ref, payload) |> loop()

      {Runner, ref, {:done, result}} ->
        state |> done(ref, result) |> loop()

      {:DOWN, ref, :process, _, reason} ->
        down(state, ref, reason)

      {:tools, tools, {from, ref}} ->
        state = new_tools(state, tools)
        send(from, {ref, :ok})
        loop(state)

      :eof ->
        shutdown(state)

      {:read_error, reason} ->
        Logger.error("mcp: stdin: #{inspect(reason)}")
        shutdown(state)

      {:EXIT, port, reason} when port == state.output ->
        # The client closed our stdout: nobody is listening any more.
        Logger.error("mcp: stdout closed (#{inspect(reason)})")
        shutdown(state)

      {:EXIT, _pid, _reason} ->
        loop(state)
    end
  end

  defp line(state, line) do
    case Protocol.decode_frame(line) do
      {:ok, msg} ->
        # While the session has pending actions, `resolve` is listed and callable too.
        tools = state.mcp.tools
        session = state.context.session_id

        {outgoing, mcp} =
          MCP.handle(msg, MCP.put_tools(state.mcp, Pending.Resolve.offer(tools, session)))

        Transport.perform(outgoing, __MODULE__, %{state | mcp: %{mcp | tools: tools}})

      :empty ->
        state

      {:error, reply} ->
        write(state, reply)
    end
  end

  @impl Transport
  def reply(msg, state), do: write(state, msg)

  @impl Transport
  def call(call, state) do
    handle = Calls.start(state.mcp, call, state.context)
    mon = Process.monitor(handle.pid)
    entry = %{call: call, handle: handle, mon: mon, count: 0}
    put_in(state.calls[handle.ref], entry)
  end

  @impl Transport
  def listen(id, _filter, state),
    do: %{state | subscriptions: MapSet.put(state.subscriptions, id)}

  @impl Transport
  def cancel(id, state) do
    case Enum.find(state.calls, fn {_, entry} -> entry.call.id == id end) do
      nil ->
        # A subscription ends the same way; the client expects nothing more on it.
        %{state | subscriptions: MapSet.delete(state.subscriptions, id)}

      {ref, entry} ->
        # A cancelled request gets no response (MCP cancellation rules); the runner kills the
        # tool and what it started, then reports a result we drop.
        Runner.cancel(entry.handle)
        Process.demonitor(entry.mon, [:flush])
        %{state | calls: Map.delete(state.calls, ref)}
    end
  end

  defp progress(state, ref, payload) do
    case state.calls[ref] do
      %{call: call, count: count} = entry ->
        case Calls.progress(call, count + 1, payload) do
          nil -> state
          message -> write(put_in(state.calls[ref], %{entry | count: count + 1}), message)
        end

      nil ->
        state
    end
  end

  defp done(state, ref, result) do
    case Map.pop(state.calls, ref) do
      {nil, _} ->
        state

      {entry, calls} ->
        Process.demonitor(entry.mon, [:flush])
        state = write(%{state | calls: calls}, MCP.call_reply(state.mcp, entry.call, result))
        pending_changed(state)
    end
  end

  # `resolve` comes and goes with the session's pending actions (`CMDC.Tool.Pending`): a client
  # told that the list can change hears of it.
  defp pending_changed(state) do
    now = Pending.any?(state.context.session_id)
    changed? = now != Map.get(state, :pending, false)
    state = Map.put(state, :pending, now)

    if changed? and state.mcp.list_changed, do: announce(state), else: state
  end

  defp down(%{reader: {_, ref}} = state, ref, _reason), do: shutdown(state)

  defp down(state, ref, reason) do
    case Enum.find(state.calls, fn {_, call} -> call.mon == ref end) do
      nil ->
        loop(state)

      {call_ref, %{call: call}} ->
        Logger.error("mcp: call #{inspect(call.id)} crashed: #{inspect(reason)}")
        state = %{state | calls: Map.delete(state.calls, call_ref)}
        loop(write(state, MCP.call_reply(state.mcp, call, {:error, "the tool crashed"})))
    end
  end

  # Each list is described once: comparing needs no call into the old list's modules.
  defp new_tools(state, tools) do
    described = describe(tools)
    changed? = described != state.described
    state = %{state | mcp: MCP.put_tools(state.mcp, tools), described: described}

    if changed? and state.mcp.list_changed, do: announce(state), else: state
  end

  # To the initialize session (if any) and to every subscription that asked.
  defp announce(state) do
    state = if state.mcp.version != nil, do: write(state, MCP.list_changed()), else: state
    Enum.reduce(state.subscriptions, state, &write(&2, MCP.list_changed(&1)))
  end

  # In the order tools/list gives them: a list that only changed order is no change.
  defp describe(tools), do: tools |> Enum.sort_by(& &1.name()) |> Enum.map(&MCP.describe/1)

  # The client is gone: cancel what still runs and wait (briefly) until the runner has killed
  # each tool, so no tool and no program it started outlives the server.
  defp shutdown(state) do
    Enum.each(state.calls, fn {_, entry} -> Runner.cancel(entry.handle) end)
    deadline = System.monotonic_time(:millisecond) + @shutdown_ms
    Enum.each(state.calls, fn {_, entry} -> await_down(entry.mon, deadline) end)
    :ok
  end

  defp await_down(mon, deadline) do
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {:DOWN, ^mon, :process, _, _} -> :ok
    after
      left -> :ok
    end
  end

  defp write(state, msg) do
    frame = Protocol.encode_frame(msg)

    case state.output do
      port when is_port(port) -> send_port(port, frame)
      device -> IO.binwrite(device, frame)
    end

    state
  end

  defp send_port(port, frame) do
    Port.command(port, frame)
  rescue
    # The port is closed (the client went away); the {:EXIT, port, _} message ends the loop.
    ArgumentError -> :ok
  end
end
