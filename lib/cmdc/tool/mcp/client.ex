defmodule CMDC.Tool.MCP.Client do
  @moduledoc """
  An MCP client: one process per server, whose tools become `CMDC.Tool` modules.

      {:ok, client} =
        CMDC.Tool.MCP.Client.start_link(
          name: "files",
          transport: {:stdio, %{command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."]}}
        )

      :ok = CMDC.Tool.MCP.Client.await_ready(client)
      [tool | _] = CMDC.Tool.MCP.Client.tools(client)
      tool.name()  #=> "files__read_file"

  Transports (`CMDC.Tool.MCP.Client.Transport`, the behaviour; `CMDC.Tool.MCP.Client.Transports`,
  the one table of them):
  `{:stdio, %{command, args, env, cwd}}` (`CMDC.Tool.MCP.Client.Stdio`: the server runs through
  the native exec layer in its own process group) and `{:http, %{url, headers}}`
  (`CMDC.Tool.MCP.Client.HTTP`, Streamable HTTP).

  Both eras of MCP (`CMDC.Tool.MCP.Client.Era`): the client probes `server/discover`; a server
  of revision `2026-07-28` is then spoken to statelessly (`_meta` on every request, modern HTTP
  headers, a `subscriptions/listen` stream for `list_changed`), any other answer falls back to
  `initialize` (`2025-11-25` or `2025-06-18`, `CMDC.Tool.MCP.Protocol`), then
  `notifications/initialized`. The era found is kept for the server's reconnections. The client
  reads every page of `tools/list`, answers the server's `ping`, and reads the list again on
  `notifications/tools/list_changed`.

  Each listed tool becomes a tool module (a reusable slot of `CMDC.Tool.MCP.Slots`; see
  `CMDC.Tool.MCP.Remote`) named `server__tool` (see `tool_name/2`), whose `execute/2` validates
  the arguments natively against the tool's `inputSchema` and sends `tools/call`.

  ## Failures

  A server is untrusted input. Everything it sends is shape-checked before use
  (`CMDC.Tool.MCP.Client.Check`) and bounded (`CMDC.Tool.MCP.Client.Limits`, the `:limits`
  option): a malformed or oversized answer fails the request it answers at once, with a
  message naming the server and the rule; a bad tool in a listing is left out (`info/1`'s
  `problems`); a listing over a limit fails (the first one fails `await_ready/2`, a later one
  keeps the earlier tools).

    * The handshake unanswered after `:init_timeout` ms (default 30 s), or any request the
      client makes itself unanswered after `request_timeout`: the server is stopped and
      `await_ready/2` returns an error saying so (and what the server wrote instead, if any).
    * The server exits or the connection drops (an HTTP server that cannot be reached): every
      running call ends at once with an error naming the server and how it ended (quoting only
      stderr written since its last message); the status leaves `:ready`; the client starts it
      again after a backoff (0.2 s doubling to 30 s) and lists its tools again. Calls made
      meanwhile wait for it. A failure repeated by retries is logged once.
    * An HTTP session the server forgot (404): the client connects again and re-sends the
      calls that were waiting, once.
    * A server that sends faster than it is read is slowed down, never stopped: its stdout
      flows under a credit window (`stdio_window`: past it the server blocks on its own full
      pipe; its stderr over the window is dropped and counted), HTTP bodies one chunk at a
      time. One that fails `max_restarts` times within `restart_window` is marked `:failed`
      with its reason (`info/1`) and not retried; its calls fail at once.
    * A server that refuses to run at all (a `cmdc-mcp` started below a serving one exits with
      status 3 and says so, `CMDC.Tool.MCP.SelfGuard`): marked `:failed` at once with that
      reason, never retried (each retry would start a VM only to be refused).
    * A time-out or a cancelled caller sends `notifications/cancelled` for the request (and
      over HTTP closes its stream).

  ## Errors

  `await_ready/2`, `ping/2`, `call_tool/4` and `request/4` answer `{:error, message}`, a binary
  naming the server and what happened (JSON-RPC error, time-out, server gone, client not
  running). A tool that fails is not an error: `call_tool/4` answers `{:ok, result}` with
  `"isError" => true`, as MCP defines it; the generated modules' `execute/2` turns either into
  `{:error, text}`, as `CMDC.Tool` defines it. `tools/1`, `info/1` and `stop/1` do not fail.

  Options of `start_link/1`: `:name` (the server's name, required), `:transport` (required),
  `:init_timeout`, `:timeout` (per call, default 60 s), `:registry` (a `CMDC.Tool.Registry` kept
  in sync with the tools), `:namespace` (`true`, default: names are `server__tool`; `false`:
  the server's names as they are), `:on_change` (a function called with the new module list
  after every listing that changed it), `:gen_name` (a name for the process),
  `:protocol_version` (a legacy version to ask for: skips the probe), `:era` (`:legacy` skips
  the probe), `:limits` (see `CMDC.Tool.MCP.Client.Limits`).
  """

  use GenServer
  require Logger

  alias CMDC.Tool.MCP.Client.{Check, Era, Limits, LogLimit, Transports}
  alias CMDC.Tool.MCP.Protocol
  alias CMDC.Tool.MCP.Client.Request
  alias CMDC.Tool.MCP.Remote

  @max_backoff 30_000
  @progress_backlog 1_000

  defstruct [
    :name,
    :spec,
    :transport_mod,
    :transport,
    :version,
    :server_info,
    :last_error,
    :init_timer,
    :opts,
    :era,
    :limits,
    :logs,
    status: :connecting,
    capabilities: %{},
    next_id: 1,
    pending: %{},
    queued: [],
    waiters: [],
    tools: [],
    defs: [],
    backoff: 200,
    restarts: 0,
    held: %{},
    problems: [],
    failures: [],
    relists: [],
    relist_again?: false
  ]

  @type t :: GenServer.server()

  @doc "Starts a client (and its server); see the module doc for the options."
  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts) do
    CMDC.Tool.Options.check!(
      opts,
      [:name, :transport, :gen_name, :init_timeout, :timeout, :namespace, :registry] ++
        [:protocol_version, :on_change, :era, :limits, :probe_timeout],
      "CMDC.Tool.MCP.Client.start_link/1"
    )

    gen_opts = if opts[:gen_name], do: [name: opts[:gen_name]], else: []
    GenServer.start_link(__MODULE__, opts, gen_opts)
  end

  @doc false
  def child_spec(opts) do
    # Transient: a client stopped on purpose stays stopped; its server's crashes are handled
    # inside (reconnect with backoff), not by restarting the client.
    %{
      id: {__MODULE__, opts[:name]},
      start: {__MODULE__, :start_link, [opts]},
      restart: :transient
    }
  end

  @doc """
  Waits until the server is initialized and its tools are listed: `:ok`, or
  `{:error, message}` when the connection attempt failed (or `timeout` ms passed).
  """
  @spec await_ready(t(), timeout()) :: :ok | {:error, String.t()}
  def await_ready(client, timeout \\ 60_000) do
    GenServer.call(client, :await_ready, timeout)
  catch
    :exit, {:timeout, _} -> {:error, "the MCP client was not ready within #{timeout} ms"}
    :exit, reason -> {:error, "the MCP client is not running: #{inspect(reason)}"}
  end

  @doc "The tool modules of the server (as last listed)."
  @spec tools(t()) :: [module()]
  def tools(client), do: GenServer.call(client, :tools)

  @doc """
  What the client knows: `%{name, status, era, version, server_info, tools, restarts,
  last_error, problems}` (`status` is `:ready`, `:connecting`, `:down` (retrying) or `:failed`
  (given up); `problems` lists the tools of the last listing that were left out, and why).
  """
  @spec info(t()) :: map()
  def info(client), do: GenServer.call(client, :info)

  @doc "Sends `ping` (`server/discover` to a modern server); `:ok` or `{:error, message}`."
  @spec ping(t(), timeout()) :: :ok | {:error, String.t()}
  def ping(client, timeout \\ 5_000) do
    # The 2026-07-28 revision removed `ping`: a modern server is asked `server/discover`.
    method = if era(client) == :modern, do: "server/discover", else: "ping"
    with {:ok, _} <- request(client, method, %{}, timeout: timeout), do: :ok
  end

  defp era(client) do
    GenServer.call(client, :era)
  catch
    :exit, _ -> nil
  end

  @doc """
  Calls a tool by the server's own name: `{:ok, result}` (the MCP result map, `isError`
  included) or `{:error, message}` (JSON-RPC error, time-out, server gone).

  Options: `:timeout` (ms; on expiry the request is cancelled on the server), `:on_progress`
  (a function receiving each `notifications/progress` params map).
  """
  @spec call_tool(t(), String.t(), map(), keyword()) :: {:ok, map()} | {:error, String.t()}
  def call_tool(client, name, args, opts \\ []) do
    request(client, "tools/call", %{"name" => name, "arguments" => args}, opts)
  end

  @doc """
  Sends any request and waits for its result (in the calling process, so many calls run at
  once). Options as for `call_tool/4`.
  """
  @spec request(t(), String.t(), map(), keyword()) :: {:ok, term()} | {:error, String.t()}
  def request(client, method, params, opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:timeout, :on_progress], "CMDC.Tool.MCP.Client.request/4")
    Request.run(client, method, params, opts)
  end

  defp now, do: System.monotonic_time(:millisecond)

  @doc """
  The name a server's tool gets: `server__tool`, made to follow the one tool-name rule (MCP's:
  1 to 128 of `A-Za-z0-9_.-`; other characters become `_`, and a longer name keeps its head and
  ends with a hash of the whole, so names stay distinct). A provider with a narrower rule gets
  a mapped name, which the runner maps back (`CMDC.Tool.RoundTrip`).

      iex> CMDC.Tool.MCP.Client.tool_name("files", "read_file")
      "files__read_file"

      iex> CMDC.Tool.MCP.Client.tool_name("my server", "get.weather")
      "my_server__get.weather"
  """
  @spec tool_name(String.t(), String.t()) :: String.t()
  def tool_name(server, tool), do: CMDC.Tool.Native.tool_name_namespaced(server, tool)

  @doc "Stops the client and its server."
  @spec stop(t()) :: :ok
  def stop(client), do: GenServer.stop(client)

  # --- the process ---

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    # A flooding server's messages wait outside the heap: no garbage collection copies them.
    Process.flag(:message_queue_data, :off_heap)
    name = Keyword.fetch!(opts, :name)
    {kind, spec} = Keyword.fetch!(opts, :transport)
    {:ok, mod} = Transports.fetch(kind)

    opts =
      Keyword.merge([init_timeout: 30_000, timeout: 60_000, namespace: true], opts)
      |> Map.new()

    state = %__MODULE__{
      name: name,
      spec: Map.new(spec),
      transport_mod: mod,
      opts: opts,
      era: opts[:era] || if(opts[:protocol_version] in Protocol.versions(), do: :legacy),
      limits: Limits.new(opts[:limits]),
      logs: LogLimit.new(20)
    }

    {:ok, state, {:continue, :connect}}
  end

  @impl true
  def handle_continue(:connect, state), do: {:noreply, connect(state)}

  @impl true
  def handle_call(:await_ready, _from, %{status: :ready} = state), do: {:reply, :ok, state}

  def handle_call(:await_ready, _from, %{status: status, last_error: error} = state)
      when status in [:down, :failed] and error != nil,
      do: {:reply, {:error, error}, state}

  def handle_call(:await_ready, from, state),
    do: {:noreply, %{state | waiters: [from | state.waiters]}}

  def handle_call(:tools, _from, state), do: {:reply, state.tools, state}
  def handle_call(:timeout, _from, state), do: {:reply, state.opts.timeout, state}
  def handle_call(:era, _from, state), do: {:reply, state.era, state}

  def handle_call(:info, _from, state) do
    info = %{
      name: state.name,
      status: state.status,
      era: state.era,
      version: state.version,
      server_info: state.server_info,
      tools: state.tools,
      restarts: state.restarts,
      last_error: state.last_error,
      problems: state.problems
    }

    {:reply, info, state}
  end

  @impl true
  def handle_cast({:request, method, params, caller, ref, progress?}, state) do
    call = %{
      caller: caller,
      ref: ref,
      mon: Process.monitor(caller),
      method: method,
      params: params,
      progress?: progress?,
      resent?: false
    }

    case state.status do
      :ready -> {:noreply, send_call(state, call)}
      :failed -> {:noreply, tap(state, fn _ -> reply(call, {:error, state.last_error}) end)}
      _ -> {:noreply, %{state | queued: state.queued ++ [call]}}
    end
  end

  def handle_cast({:cancel, ref, reason}, state), do: {:noreply, cancel(state, ref, reason)}

  @impl true
  def handle_info(:reconnect, %{status: :down} = state), do: {:noreply, connect(state)}
  def handle_info(:reconnect, state), do: {:noreply, state}

  def handle_info({:init_timeout, attempt}, %{init_timer: {attempt, _}} = state) do
    ms = state.opts.init_timeout
    what = if state.era == :modern, do: "`server/discover`", else: "`initialize`"

    message =
      "MCP server #{state.name} did not answer #{what} within #{ms} ms" <>
        state.transport_mod.diagnosis(state.transport)

    {:noreply, down(state, message)}
  end

  def handle_info({:init_timeout, _}, state), do: {:noreply, state}

  def handle_info({:request_timeout, id, ms}, state) do
    case state.pending[id] do
      %{kind: kind} when kind != :call ->
        # Its stream is closed too: an answer trickling in after the limit holds nothing.
        state =
          if state.transport,
            do: %{state | transport: state.transport_mod.cancel(state.transport, id)},
            else: state

        {:noreply, fail_request(state, id, "#{label(kind)} unanswered after #{ms} ms")}

      _ ->
        {:noreply, state}
    end
  end

  def handle_info(:relist, %{status: :ready} = state), do: {:noreply, relist(state)}
  def handle_info(:relist, state), do: {:noreply, state}

  def handle_info({:DOWN, _mon, :process, pid, _}, state) do
    # A caller went away (killed by its runner's time-out, say): cancel what it had running.
    refs = for {_, %{caller: ^pid, ref: ref}} <- state.pending, do: ref
    queued = Enum.reject(state.queued, &(&1.caller == pid))

    {:noreply,
     Enum.reduce(refs, %{state | queued: queued}, &cancel(&2, &1, "the caller stopped"))}
  end

  def handle_info({:EXIT, _, _}, state), do: {:noreply, state}

  def handle_info(msg, %{transport: transport} = state) when transport != nil do
    case state.transport_mod.handle_info(msg, transport) do
      :unknown -> {:noreply, state}
      event -> {:noreply, guarded(state, event)}
    end
  end

  def handle_info(_msg, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    if state.transport, do: state.transport_mod.close(state.transport)

    if state.opts[:registry] do
      old = for m <- state.tools, do: {m, Remote.field(m, :name, nil)}
      sync_registry(state.opts.registry, old, [])
    end

    Remote.undefine_all(state.tools)
    :ok
  end

  # --- one server's events, each isolated: a bug or a flood ends this connection only ---

  # No mailbox cap: the transports bound what waits (stdio's credit window, HTTP's one
  # socket read at a time), so a chatty server is slowed down, not stopped.
  defp guarded(state, event) do
    transport_event(state, event)
  rescue
    error ->
      down(state, "MCP server #{state.name}: protocol error: " <> Exception.message(error))
  end

  defp transport_event(state, {:messages, messages, transport}),
    do: Enum.reduce(messages, %{state | transport: transport}, &checked/2)

  defp transport_event(state, {:ok, transport}), do: %{state | transport: transport}

  defp transport_event(state, {:failed, id, reason, transport}),
    do: fail_request(%{state | transport: transport}, id, reason)

  defp transport_event(state, {:lost, reason, transport}),
    do: relink(%{state | transport: transport}, reason)

  defp transport_event(state, {:closed, reason, transport}),
    do: down(%{state | transport: transport}, "MCP server #{state.name}: " <> reason)

  defp transport_event(state, {:refused, reason, transport}),
    do: down(%{state | transport: transport}, "MCP server #{state.name}: " <> reason, :final)

  defp checked(msg, state) do
    case Check.message(msg) do
      {:ok, msg} ->
        message(msg, state)

      {:error, reason} ->
        protocol_error(state, msg, reason)
    end
  end

  # A malformed message: logged for this server; the request it answers (when its id can be
  # read) fails now rather than at its time-out.
  defp protocol_error(state, msg, reason) do
    logs =
      LogLimit.log(state.logs, :warning, fn -> "mcp #{state.name}: protocol error: #{reason}" end)

    state = %{state | logs: logs}

    case msg do
      %{"id" => id} when is_map_key(state.pending, id) -> fail_request(state, id, reason)
      _ -> state
    end
  end

  # --- connecting ---

  defp connect(state) do
    case state.transport_mod.connect(state.spec, state.name, state.limits) do
      {:ok, transport} ->
        attempt = make_ref()
        timer = Process.send_after(self(), {:init_timeout, attempt}, state.opts.init_timeout)
        state = %{state | transport: transport, status: :connecting, init_timer: {attempt, timer}}
        handshake(state)

      {:error, message} ->
        down(state, "MCP server #{state.name}: #{message}")
    end
  end

  defp handshake(%{era: :legacy} = state) do
    params = %{
      "protocolVersion" => state.opts[:protocol_version] || Protocol.latest(),
      "capabilities" => %{},
      "clientInfo" => %{"name" => "cmdc_tool", "version" => vsn()}
    }

    internal(state, "initialize", params, :initialize)
  end

  defp handshake(state) do
    # The probe has the handshake's whole time: a slow server that answered late would already
    # be serving the modern era and refuse `initialize`. One that ignores the probe costs one
    # slow attempt; the next says `initialize` (see `down/2`).
    ms = state.opts[:probe_timeout] || state.opts.init_timeout
    internal(state, "server/discover", %{}, :discover, ms)
  end

  defp vsn, do: to_string(Application.spec(:cmdc_tool, :vsn) || "0.1.0")

  # The connection failed or ended: fail what was running, retry later (or give up; at once
  # when the server refused to run, `:final`).
  defp down(state, message, retry \\ :retry) do
    # Retries failing the same way say so once (a broken config entry, a missing command): the
    # same failure again is only a debug line.
    if message == state.last_error, do: Logger.debug(message), else: Logger.warning(message)
    state = stop_transport(state)

    for {_id, %{kind: :call} = call} <- state.pending, do: reply(call, {:error, message})
    for from <- state.waiters, do: GenServer.reply(from, {:error, message})

    # Calls made while connecting fail only once the retry fails too; a failed first attempt
    # fails them at once (nothing says the next one will do better).
    queued =
      if state.status == :connecting do
        for c <- state.queued, do: reply(c, {:error, message})
        []
      else
        state.queued
      end

    # A probe that ended the connection means an older server: the next attempt says initialize.
    era = if state.era == nil and probing?(state), do: :legacy, else: state.era
    now = now()
    failures = Enum.filter([now | state.failures], &(&1 > now - state.limits.restart_window))

    state = %{
      state
      | pending: %{},
        waiters: [],
        queued: queued,
        era: era,
        last_error: message,
        failures: failures,
        restarts: state.restarts + 1
    }

    cond do
      retry == :final -> fail_final(state, message)
      length(failures) > state.limits.max_restarts -> give_up(state, message)
      true -> retry(state)
    end
  end

  defp probing?(state), do: Enum.any?(state.pending, fn {_, p} -> p.kind == :discover end)

  defp retry(state) do
    Process.send_after(self(), :reconnect, state.backoff)
    %{state | status: :down, backoff: min(state.backoff * 2, @max_backoff)}
  end

  defp give_up(state, message) do
    text =
      "MCP server #{state.name} failed #{length(state.failures)} times within " <>
        "#{state.limits.restart_window} ms and is marked failed (restart the client to try " <>
        "again); last: #{message}"

    Logger.error(text)
    for c <- state.queued, do: reply(c, {:error, text})
    %{state | status: :failed, queued: [], last_error: text}
  end

  # A refusal (logged by `down/3`) is the server's last word: what waits fails with it.
  defp fail_final(state, message) do
    for c <- state.queued, do: reply(c, {:error, message})
    %{state | status: :failed, queued: []}
  end

  defp stop_transport(state) do
    if state.transport, do: state.transport_mod.close(state.transport)
    cancel_timer(state.init_timer)
    for {_, %{timer: t}} <- state.pending, do: Process.cancel_timer(t)
    %{state | transport: nil, init_timer: nil}
  end

  # The server forgot this client (an HTTP session gone): connect again at once and re-send,
  # once, every call it had not answered.
  defp relink(state, reason) do
    Logger.info("mcp #{state.name}: #{reason}; connecting again")
    calls = for {_, %{kind: :call} = c} <- Enum.sort(state.pending), do: c
    {again, failed} = Enum.split_with(calls, &(not &1.resent?))
    for c <- failed, do: reply(c, {:error, "MCP server #{state.name}: #{reason} (twice)"})
    again = Enum.map(again, &%{&1 | resent?: true})
    state = stop_transport(%{state | pending: %{}})
    connect(%{state | status: :connecting, queued: again ++ state.queued})
  end

  defp cancel_timer({_, timer}), do: Process.cancel_timer(timer)
  defp cancel_timer(nil), do: :ok

  # --- sending ---

  # Every request the client makes has a time limit, but the subscription (`:infinity`): its
  # answer comes only when the server ends the stream.
  defp internal(state, method, params, kind, ms \\ nil) do
    ms = ms || state.limits.request_timeout
    {id, state} = next_id(state)

    entry =
      if ms == :infinity,
        do: %{kind: kind},
        else: %{kind: kind, timer: Process.send_after(self(), {:request_timeout, id, ms}, ms)}

    state = put_in(state.pending[id], entry)
    era = if kind == :discover, do: :probe, else: state.era || :legacy
    write(state, Protocol.request(id, method, Era.params(era, params, vsn())))
  end

  defp send_call(state, call) do
    {id, state} = next_id(state)

    params =
      if call.progress?,
        do: Map.put(call.params, "_meta", %{"progressToken" => id}),
        else: call.params

    state = put_in(state.pending[id], Map.put(call, :kind, :call))
    write(state, Protocol.request(id, call.method, Era.params(state.era, params, vsn())))
  end

  defp next_id(state), do: {state.next_id, %{state | next_id: state.next_id + 1}}

  defp notify(state, method, params \\ nil),
    do: write(state, Protocol.notification(method, params))

  defp write(%{transport: nil} = state, _msg), do: state

  defp write(state, msg) do
    case state.transport_mod.send_message(state.transport, msg) do
      {:ok, transport} ->
        %{state | transport: transport}

      {:error, reason} ->
        case msg do
          %{"id" => id} -> fail_request(state, id, reason)
          _ -> state
        end
    end
  end

  defp cancel(state, ref, reason) do
    case Enum.find(state.pending, fn {_, p} -> Map.get(p, :ref) == ref end) do
      {id, call} ->
        Process.demonitor(call.mon, [:flush])
        state = %{state | pending: Map.delete(state.pending, id)}
        state = notify(state, "notifications/cancelled", %{"requestId" => id, "reason" => reason})

        if state.transport,
          do: %{state | transport: state.transport_mod.cancel(state.transport, id)},
          else: state

      nil ->
        {gone, queued} = Enum.split_with(state.queued, &(&1.ref == ref))
        Enum.each(gone, &Process.demonitor(&1.mon, [:flush]))
        %{state | queued: queued}
    end
  end

  defp fail_request(state, id, reason) do
    case Map.pop(state.pending, id) do
      {nil, _} ->
        Logger.warning("mcp #{state.name}: #{reason}")
        state

      {entry, pending} ->
        if entry[:timer], do: Process.cancel_timer(entry.timer)
        failed(entry, reason, %{state | pending: pending})
    end
  end

  defp failed(%{kind: :call} = call, reason, state) do
    reply(call, {:error, "MCP server #{state.name}: #{reason}"})
    state
  end

  # No modern answer to the probe: an older server; say `initialize` on the same connection.
  defp failed(%{kind: :discover}, _reason, state), do: handshake(%{state | era: :legacy})

  defp failed(%{kind: {:list, _, _}}, reason, state), do: list_failed(state, reason)

  defp failed(%{kind: :listen}, reason, state) do
    Logger.info("mcp #{state.name}: subscriptions/listen ended: #{reason}")
    state
  end

  defp failed(%{kind: _}, reason, state), do: down(state, "MCP server #{state.name}: #{reason}")

  defp label(:discover), do: "server/discover"
  defp label(:initialize), do: "initialize"
  defp label({:list, _, _}), do: "tools/list"

  # --- receiving ---

  defp message(%{"id" => id} = msg, state)
       when is_map_key(msg, "result") or is_map_key(msg, "error") do
    case Map.pop(state.pending, id) do
      {nil, _} ->
        state

      {entry, pending} ->
        if entry[:timer], do: Process.cancel_timer(entry.timer)
        response(entry, msg, %{state | pending: pending})
    end
  end

  defp message(%{"method" => "ping", "id" => id}, state),
    do: write(state, Protocol.reply(id, %{}))

  defp message(%{"method" => method, "id" => id}, state) do
    error =
      Protocol.error(
        id,
        :method_not_found,
        "Method not found: #{method} (cmdc_tool's MCP client)"
      )

    write(state, error)
  end

  defp message(%{"method" => "notifications/progress", "params" => params}, state) do
    with {:ok, params} <- Check.progress(params),
         %{kind: :call, progress?: true} = call <- state.pending[params["progressToken"]] do
      progress(state, params["progressToken"], call, params)
    else
      {:error, reason} -> protocol_error(state, %{}, reason)
      _ -> state
    end
  end

  defp message(%{"method" => "notifications/tools/list_changed"}, %{status: :ready} = state),
    do: relist(state)

  defp message(%{"method" => "notifications/message", "params" => params}, state) do
    text = fn -> "mcp #{state.name} log: #{Check.show(params["data"])}" end
    %{state | logs: LogLimit.log(state.logs, :info, text)}
  end

  defp message(_other, state), do: state

  # Progress is advice: while the caller has a backlog, more of it is dropped, so a server's
  # flood of progress never piles up in the caller's mailbox.
  defp progress(state, _id, call, params) do
    case Process.info(call.caller, :message_queue_len) do
      {:message_queue_len, n} when n < @progress_backlog ->
        send(call.caller, {:cmdc_mcp, call.ref, {:progress, params}})

      _ ->
        :dropped
    end

    state
  end

  defp response(%{kind: :discover}, %{"result" => result}, state) do
    with {:ok, result} <- Check.discover(result), true <- Era.modern?(result) do
      cancel_timer(state.init_timer)

      state = %{
        state
        | era: :modern,
          version: Era.modern(),
          server_info: result["serverInfo"],
          capabilities: result["capabilities"],
          init_timer: nil
      }

      state = %{
        state
        | transport: state.transport_mod.ready(state.transport, :modern, Era.modern())
      }

      listed(listen(state))
    else
      _not_modern -> handshake(%{state | era: :legacy})
    end
  end

  defp response(%{kind: :discover}, %{"error" => _}, state),
    do: handshake(%{state | era: :legacy})

  defp response(%{kind: :initialize}, %{"result" => result}, state) do
    cancel_timer(state.init_timer)
    state = %{state | init_timer: nil}

    with {:ok, result} <- Check.initialize(result),
         version when is_binary(version) <- result["protocolVersion"],
         true <- version in Protocol.versions() do
      state = %{
        state
        | era: :legacy,
          version: version,
          server_info: result["serverInfo"],
          capabilities: result["capabilities"]
      }

      state = notify(state, "notifications/initialized")
      listed(%{state | transport: state.transport_mod.ready(state.transport, :legacy, version)})
    else
      {:error, reason} ->
        down(state, "MCP server #{state.name}: protocol error: #{reason}")

      _ ->
        down(
          state,
          "MCP server #{state.name} speaks protocol version " <>
            "#{Check.show(result["protocolVersion"])}; this client speaks " <>
            Enum.join([Era.modern() | Protocol.versions()], ", ")
        )
    end
  end

  # A refused `initialize` proves nothing about the era (a modern server that saw the probe
  # refuses it): unless the caller chose the era, the next attempt probes again.
  defp response(%{kind: :initialize}, %{"error" => error}, state) do
    era = if state.opts[:era] || state.opts[:protocol_version], do: state.era

    down(
      %{state | era: era},
      "MCP server #{state.name} refused `initialize`: #{error_text(error)}"
    )
  end

  defp response(%{kind: {:list, acc, pages}}, %{"result" => result}, state) do
    with :ok <- complete(result, "tools/list"),
         {:ok, {tools, cursor}} <- Check.tools_page(result),
         acc = acc ++ tools,
         :ok <-
           within(length(acc) <= state.limits.max_tools, "max_tools", state.limits.max_tools),
         :ok <-
           within(
             cursor == nil or pages < state.limits.max_pages,
             "max_pages",
             state.limits.max_pages
           ) do
      if cursor, do: list_tools(state, cursor, acc, pages + 1), else: ready(state, acc)
    else
      {:error, reason} -> list_failed(state, reason)
    end
  end

  defp response(%{kind: {:list, _, _}}, %{"error" => error}, state),
    do: list_failed(state, "tools/list failed: " <> error_text(error))

  # The server ended its notification stream (shutting down, say): nothing to do.
  defp response(%{kind: :listen}, _msg, state), do: state

  defp response(%{kind: :call} = call, %{"result" => result}, state) do
    answer =
      with :ok <- complete(result, call.method),
           {:ok, result} <- call_result(call.method, result) do
        {:result, result}
      else
        {:error, reason} -> {:error, "MCP server #{state.name}: #{reason}"}
      end

    reply(call, answer)
    state
  end

  defp response(%{kind: :call} = call, %{"error" => error}, state) do
    reply(call, {:error, "MCP server #{state.name}: #{error_text(error)}"})
    state
  end

  defp call_result("tools/call", result), do: Check.call_result(result)
  defp call_result(_method, result), do: {:ok, result}

  # A modern result may ask for more input (multi round-trip requests), which no caller here
  # can give: say so rather than hand over a result without content.
  defp complete(%{"resultType" => type}, method) when type not in ["complete", nil],
    do:
      {:error,
       "#{method}: the server answered resultType #{Check.show(type)}, which this client does not handle"}

  defp complete(_result, _method), do: :ok

  defp within(true, _limit, _max), do: :ok

  defp within(false, limit, max),
    do:
      {:error,
       "tools/list: over #{limit} (#{max}); raise it in the client's limits if this server is trusted"}

  defp reply(call, answer) do
    Process.demonitor(call.mon, [:flush])
    send(call.caller, {:cmdc_mcp, call.ref, answer})
  end

  defp error_text(%{"message" => message, "code" => code}), do: "#{message} (#{code})"
  defp error_text(other), do: Check.show(other)

  # --- listing ---

  # Modern servers send `list_changed` only on a `subscriptions/listen` stream asked for it.
  defp listen(%{capabilities: %{"tools" => %{"listChanged" => true}}} = state) do
    params = %{"notifications" => %{"toolsListChanged" => true}}
    internal(state, "subscriptions/listen", params, :listen, :infinity)
  end

  defp listen(state), do: state

  defp listed(state) do
    if Map.has_key?(state.capabilities || %{}, "tools"),
      do: list_tools(state, nil, [], 1),
      else: ready(state, [])
  end

  defp list_tools(state, cursor, acc, pages) do
    params = if cursor, do: %{"cursor" => cursor}, else: %{}
    internal(state, "tools/list", params, {:list, acc, pages})
  end

  # `list_changed`: read the list again, at most `max_relists_per_minute` times a minute; a
  # notification past that is served when the window allows (one read covers many).
  defp relist(state) do
    now = now()
    recent = Enum.filter(state.relists, &(&1 > now - 60_000))

    cond do
      Enum.any?(state.pending, fn {_, p} -> match?({:list, _, _}, p.kind) end) ->
        %{state | relists: recent, relist_again?: true}

      length(recent) >= state.limits.max_relists_per_minute ->
        unless state.relist_again?,
          do: Process.send_after(self(), :relist, List.last(recent) + 60_000 - now + 1)

        %{state | relists: recent, relist_again?: true}

      true ->
        list_tools(%{state | relists: [now | recent], relist_again?: false}, nil, [], 1)
    end
  end

  defp list_failed(%{status: :connecting} = state, reason),
    do: down(state, "MCP server #{state.name}: #{reason}")

  defp list_failed(state, reason) do
    Logger.warning("mcp #{state.name}: #{reason} (its earlier tools stay)")
    %{state | last_error: reason}
  end

  defp ready(state, defs) do
    {defs, problems} = check_tools(defs, state.limits)

    # The names the old modules had, read before their slots change or are freed.
    old = for m <- state.tools, do: {m, Remote.field(m, :name, nil)}

    case Remote.define(state.name, self(), defs, state.held, define_opts(state)) do
      {:ok, held, modules, more} ->
        problems = problems ++ more
        for p <- problems, do: Logger.warning("mcp #{state.name}: #{p}")
        now_ready(%{state | held: held, problems: problems}, old, modules)

      {:error, reason} ->
        list_failed(state, reason)
    end
  end

  defp define_opts(state) do
    [
      namespace: state.opts.namespace,
      timeout: state.opts.timeout,
      max_total_tools: state.limits.max_total_tools
    ]
  end

  defp check_tools(defs, limits) do
    Enum.reduce(Enum.reverse(defs), {[], []}, fn tool, {ok, problems} ->
      case Check.tool(tool, limits) do
        {:ok, tool} -> {[tool | ok], problems}
        {:error, reason} -> {ok, ["left out: " <> reason | problems]}
      end
    end)
  end

  defp now_ready(state, old, modules) do
    if state.opts[:registry], do: sync_registry(state.opts.registry, old, modules)

    if modules != state.tools and is_function(state.opts[:on_change], 1),
      do: state.opts.on_change.(modules)

    for from <- state.waiters, do: GenServer.reply(from, :ok)
    state = %{state | status: :ready, tools: modules, waiters: [], backoff: 200}
    state = if state.relist_again?, do: relist(%{state | relist_again?: false}), else: state
    queued = state.queued
    Enum.reduce(queued, %{state | queued: []}, &send_call(&2, &1))
  end

  # Names already held by another module stay theirs (first wins), with a warning.
  defp sync_registry(registry, old, new) do
    for {m, name} <- old,
        CMDC.Tool.Registry.find(registry, name) == {:ok, m},
        do: CMDC.Tool.Registry.unregister(registry, name)

    for m <- new do
      case CMDC.Tool.Registry.register(registry, m) do
        :ok -> :ok
        {:error, error} -> Logger.warning("mcp: #{m.name()} not registered: #{inspect(error)}")
      end
    end

    :ok
  end
end
