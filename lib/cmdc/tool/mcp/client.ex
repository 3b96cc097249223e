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

  Transports: `{:stdio, %{command, args, env, cwd}}` (`CMDC.Tool.MCP.Client.Stdio`: the server
  runs through the native exec layer in its own process group) and `{:http, %{url, headers}}`
  (`CMDC.Tool.MCP.Client.HTTP`, Streamable HTTP). The client negotiates protocol version
  `2025-11-25` or `2025-06-18` (`CMDC.Tool.MCP.Protocol`, shared with our server), sends
  `notifications/initialized`, reads every page of `tools/list`, answers the server's `ping`, and
  reads the list again on `notifications/tools/list_changed`.

  Each listed tool becomes a generated module (see `CMDC.Tool.MCP.Remote`) named
  `server__tool` (see `tool_name/2`), whose `execute/2` validates the arguments natively
  against the tool's `inputSchema` and sends `tools/call`.

  ## Failures

    * `initialize` unanswered after `:init_timeout` ms (default 30 s): the server is stopped and
      `await_ready/2` returns an error saying so (and what the server wrote instead, if
      anything).
    * The server exits or the connection drops: every running call ends at once with an error
      naming the server and how it ended; the client starts it again after a backoff
      (0.2 s doubling to 30 s) and lists its tools again. Calls made meanwhile wait for it.
    * A time-out or a cancelled caller sends `notifications/cancelled` for the request.

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
  `:protocol_version` (the version to ask for; default the newest).
  """

  use GenServer
  require Logger

  alias CMDC.Tool.MCP.Client.{HTTP, Stdio}
  alias CMDC.Tool.MCP.Protocol
  alias CMDC.Tool.MCP.Remote

  @max_backoff 30_000

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
    status: :connecting,
    capabilities: %{},
    next_id: 1,
    pending: %{},
    queued: [],
    waiters: [],
    tools: [],
    defs: [],
    backoff: 200,
    restarts: 0
  ]

  @type t :: GenServer.server()

  @doc "Starts a client (and its server); see the module doc for the options."
  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts) do
    CMDC.Tool.Options.check!(
      opts,
      [:name, :transport, :gen_name, :init_timeout, :timeout, :namespace, :registry] ++
        [:protocol_version, :on_change],
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
  What the client knows: `%{name, status, version, server_info, tools, restarts, last_error}`
  (`status` is `:ready`, `:connecting` or `:down`).
  """
  @spec info(t()) :: map()
  def info(client), do: GenServer.call(client, :info)

  @doc "Sends `ping`; `:ok` or `{:error, message}`."
  @spec ping(t(), timeout()) :: :ok | {:error, String.t()}
  def ping(client, timeout \\ 5_000) do
    with {:ok, _} <- request(client, "ping", %{}, timeout: timeout), do: :ok
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
    pid = GenServer.whereis(client)
    ref = make_ref()
    on_progress = opts[:on_progress]

    if pid == nil do
      {:error, "the MCP client is not running"}
    else
      mon = Process.monitor(pid)
      timeout = Keyword.get_lazy(opts, :timeout, fn -> GenServer.call(pid, :timeout) end)
      GenServer.cast(pid, {:request, method, params, self(), ref, on_progress != nil})
      deadline = if timeout == :infinity, do: :infinity, else: now() + timeout
      result = await(pid, ref, mon, deadline, on_progress, method, timeout)
      Process.demonitor(mon, [:flush])
      result
    end
  end

  defp await(pid, ref, mon, deadline, on_progress, method, timeout) do
    wait = if deadline == :infinity, do: :infinity, else: max(deadline - now(), 0)

    receive do
      {:cmdc_mcp, ^ref, {:progress, params}} ->
        if on_progress, do: on_progress.(params)
        await(pid, ref, mon, deadline, on_progress, method, timeout)

      {:cmdc_mcp, ^ref, {:result, result}} ->
        {:ok, result}

      {:cmdc_mcp, ^ref, {:error, message}} ->
        {:error, message}

      {:DOWN, ^mon, :process, _, reason} ->
        {:error, "the MCP client stopped during #{method}: #{inspect(reason)}"}
    after
      wait ->
        GenServer.cast(pid, {:cancel, ref, "timed out after #{timeout} ms"})
        {:error, "#{method} timed out after #{timeout} ms (cancelled on the server)"}
    end
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
    name = Keyword.fetch!(opts, :name)

    {mod, spec} =
      case Keyword.fetch!(opts, :transport) do
        {:stdio, spec} -> {Stdio, Map.new(spec)}
        {:http, spec} -> {HTTP, Map.new(spec)}
      end

    opts =
      Keyword.merge([init_timeout: 30_000, timeout: 60_000, namespace: true], opts)
      |> Map.new()

    state = %__MODULE__{name: name, spec: spec, transport_mod: mod, opts: opts}
    {:ok, state, {:continue, :connect}}
  end

  @impl true
  def handle_continue(:connect, state), do: {:noreply, connect(state)}

  @impl true
  def handle_call(:await_ready, _from, %{status: :ready} = state), do: {:reply, :ok, state}

  def handle_call(:await_ready, _from, %{status: :down, last_error: error} = state)
      when error != nil,
      do: {:reply, {:error, error}, state}

  def handle_call(:await_ready, from, state),
    do: {:noreply, %{state | waiters: [from | state.waiters]}}

  def handle_call(:tools, _from, state), do: {:reply, state.tools, state}
  def handle_call(:timeout, _from, state), do: {:reply, state.opts.timeout, state}

  def handle_call(:info, _from, state) do
    info = %{
      name: state.name,
      status: state.status,
      version: state.version,
      server_info: state.server_info,
      tools: state.tools,
      restarts: state.restarts,
      last_error: state.last_error
    }

    {:reply, info, state}
  end

  @impl true
  def handle_cast({:request, method, params, caller, ref, progress?}, state) do
    mon = Process.monitor(caller)

    call = %{
      caller: caller,
      ref: ref,
      mon: mon,
      method: method,
      params: params,
      progress?: progress?
    }

    case state.status do
      :ready -> {:noreply, send_call(state, call)}
      _ -> {:noreply, %{state | queued: state.queued ++ [call]}}
    end
  end

  def handle_cast({:cancel, ref, reason}, state), do: {:noreply, cancel(state, ref, reason)}

  @impl true
  def handle_info(:reconnect, %{status: :down} = state), do: {:noreply, connect(state)}
  def handle_info(:reconnect, state), do: {:noreply, state}

  def handle_info({:init_timeout, attempt}, %{init_timer: {attempt, _}} = state) do
    ms = state.opts.init_timeout

    message =
      "MCP server #{state.name} did not answer `initialize` within #{ms} ms" <>
        state.transport_mod.diagnosis(state.transport)

    {:noreply, down(state, message)}
  end

  def handle_info({:init_timeout, _}, state), do: {:noreply, state}

  def handle_info({:DOWN, _mon, :process, pid, _}, state) do
    # A caller went away (killed by its runner's time-out, say): cancel what it had running.
    refs = for {_, %{caller: ^pid, ref: ref}} <- state.pending, do: ref
    queued = Enum.reject(state.queued, &(&1.caller == pid))

    {:noreply,
     Enum.reduce(refs, %{state | queued: queued}, &cancel(&2, &1, "the caller stopped"))}
  end

  def handle_info({:EXIT, _, _}, state), do: {:noreply, state}

  def handle_info(msg, %{transport: transport, transport_mod: mod} = state)
      when transport != nil do
    case mod.handle_info(msg, transport) do
      {:messages, messages, transport} ->
        {:noreply, Enum.reduce(messages, %{state | transport: transport}, &message/2)}

      {:ok, transport} ->
        {:noreply, %{state | transport: transport}}

      {:failed, id, reason, transport} ->
        {:noreply, fail_request(%{state | transport: transport}, id, reason)}

      {:closed, reason, transport} ->
        {:noreply, down(%{state | transport: transport}, "MCP server #{state.name}: " <> reason)}

      :unknown ->
        {:noreply, state}
    end
  end

  def handle_info(_msg, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    if state.transport, do: state.transport_mod.close(state.transport)
    if state.opts[:registry], do: sync_registry(state.opts.registry, state.tools, [])
    Remote.undefine_all(state.tools)
    :ok
  end

  # --- connecting ---

  defp connect(state) do
    case state.transport_mod.connect(state.spec, state.name) do
      {:ok, transport} ->
        attempt = make_ref()
        timer = Process.send_after(self(), {:init_timeout, attempt}, state.opts.init_timeout)
        state = %{state | transport: transport, status: :connecting, init_timer: {attempt, timer}}

        params = %{
          "protocolVersion" => state.opts[:protocol_version] || Protocol.latest(),
          "capabilities" => %{},
          "clientInfo" => %{"name" => "cmdc_tool", "version" => vsn()}
        }

        internal(state, "initialize", params, :initialize)

      {:error, message} ->
        down(state, "MCP server #{state.name}: #{message}")
    end
  end

  defp vsn, do: to_string(Application.spec(:cmdc_tool, :vsn) || "0.1.0")

  # The connection failed or ended: fail what was running, retry later.
  defp down(state, message) do
    Logger.warning(message)
    if state.transport, do: state.transport_mod.close(state.transport)
    cancel_timer(state.init_timer)

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

    Process.send_after(self(), :reconnect, state.backoff)

    %{
      state
      | status: :down,
        transport: nil,
        pending: %{},
        waiters: [],
        queued: queued,
        init_timer: nil,
        last_error: message,
        backoff: min(state.backoff * 2, @max_backoff),
        restarts: state.restarts + 1
    }
  end

  defp cancel_timer({_, timer}), do: Process.cancel_timer(timer)
  defp cancel_timer(nil), do: :ok

  # --- sending ---

  defp internal(state, method, params, kind) do
    {id, state} = next_id(state)
    state = put_in(state.pending[id], %{kind: kind})
    write(state, Protocol.request(id, method, params))
  end

  defp send_call(state, call) do
    {id, state} = next_id(state)

    params =
      if call.progress?,
        do: Map.put(call.params, "_meta", %{"progressToken" => id}),
        else: call.params

    state = put_in(state.pending[id], Map.put(call, :kind, :call))
    write(state, Protocol.request(id, call.method, params))
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
        notify(state, "notifications/cancelled", %{"requestId" => id, "reason" => reason})

      nil ->
        {gone, queued} = Enum.split_with(state.queued, &(&1.ref == ref))
        Enum.each(gone, &Process.demonitor(&1.mon, [:flush]))
        %{state | queued: queued}
    end
  end

  defp fail_request(state, id, reason) do
    case Map.pop(state.pending, id) do
      {%{kind: :call} = call, pending} ->
        reply(call, {:error, "MCP server #{state.name}: #{reason}"})
        %{state | pending: pending}

      {%{kind: :initialize}, _} ->
        down(state, "MCP server #{state.name}: #{reason}")

      {%{kind: _}, pending} ->
        Logger.warning("mcp #{state.name}: #{reason}")
        ready(%{state | pending: pending})

      {nil, _} ->
        state
    end
  end

  # --- receiving ---

  defp message(%{"id" => id} = msg, state)
       when is_map_key(msg, "result") or is_map_key(msg, "error") do
    case Map.pop(state.pending, id) do
      {nil, _} -> state
      {entry, pending} -> response(entry, msg, %{state | pending: pending})
    end
  end

  defp message(%{"method" => "ping", "id" => id}, state),
    do: write(state, Protocol.reply(id, %{}))

  defp message(%{"method" => method, "id" => id}, state) do
    write(
      state,
      Protocol.error(
        id,
        :method_not_found,
        "Method not found: #{method} (cmdc_tool's MCP client)"
      )
    )
  end

  defp message(%{"method" => "notifications/progress", "params" => params}, state) do
    case state.pending[params["progressToken"]] do
      %{kind: :call, caller: caller, ref: ref} ->
        send(caller, {:cmdc_mcp, ref, {:progress, params}})

      _ ->
        :ok
    end

    state
  end

  defp message(%{"method" => "notifications/tools/list_changed"}, %{status: :ready} = state),
    do: list_tools(state, nil, [])

  defp message(%{"method" => "notifications/message", "params" => params}, state) do
    Logger.info("mcp #{state.name} log: #{inspect(params["data"])}")
    state
  end

  defp message(_other, state), do: state

  defp response(%{kind: :initialize}, %{"result" => result}, state) do
    cancel_timer(state.init_timer)
    version = result["protocolVersion"]

    if version in Protocol.versions() do
      state = %{
        state
        | version: version,
          server_info: result["serverInfo"],
          capabilities: result["capabilities"] || %{},
          init_timer: nil
      }

      state = notify(state, "notifications/initialized")
      state = %{state | transport: ready_transport(state)}

      if Map.has_key?(state.capabilities, "tools"),
        do: list_tools(state, nil, []),
        else: ready(%{state | defs: []})
    else
      down(
        state,
        "MCP server #{state.name} speaks protocol version #{inspect(version)}; this client " <>
          "speaks #{Enum.join(Protocol.versions(), " and ")}"
      )
    end
  end

  defp response(%{kind: :initialize}, %{"error" => error}, state) do
    down(state, "MCP server #{state.name} refused `initialize`: #{error_text(error)}")
  end

  defp response(%{kind: {:list, acc}}, %{"result" => result}, state) do
    acc = acc ++ List.wrap(result["tools"])

    case result["nextCursor"] do
      cursor when is_binary(cursor) and cursor != "" -> list_tools(state, cursor, acc)
      _ -> ready(%{state | defs: acc})
    end
  end

  defp response(%{kind: {:list, _}}, %{"error" => error}, state) do
    Logger.warning("mcp #{state.name}: tools/list failed: #{error_text(error)}")
    ready(%{state | last_error: "tools/list failed: " <> error_text(error)})
  end

  defp response(%{kind: :call} = call, %{"result" => result}, state) do
    reply(call, {:result, result})
    state
  end

  defp response(%{kind: :call} = call, %{"error" => error}, state) do
    reply(call, {:error, "MCP server #{state.name}: #{error_text(error)}"})
    state
  end

  defp reply(call, answer) do
    Process.demonitor(call.mon, [:flush])
    send(call.caller, {:cmdc_mcp, call.ref, answer})
  end

  defp error_text(%{"message" => message, "code" => code}), do: "#{message} (#{code})"
  defp error_text(other), do: inspect(other)

  defp ready_transport(%{transport_mod: HTTP} = state),
    do: HTTP.ready(state.transport, state.version)

  defp ready_transport(state), do: state.transport

  defp list_tools(state, cursor, acc) do
    params = if cursor, do: %{"cursor" => cursor}, else: %{}
    internal(state, "tools/list", params, {:list, acc})
  end

  defp ready(state) do
    {modules, problems} =
      Remote.define(state.name, self(), state.defs,
        namespace: state.opts.namespace,
        timeout: state.opts.timeout
      )

    for p <- problems, do: Logger.warning("mcp #{state.name}: #{p}")
    if state.opts[:registry], do: sync_registry(state.opts.registry, state.tools, modules)
    Remote.undefine_all(state.tools -- modules)

    if modules != state.tools and is_function(state.opts[:on_change], 1),
      do: state.opts.on_change.(modules)

    for from <- state.waiters, do: GenServer.reply(from, :ok)
    state = %{state | status: :ready, tools: modules, waiters: [], backoff: 200}
    queued = state.queued
    Enum.reduce(queued, %{state | queued: []}, &send_call(&2, &1))
  end

  # Names already held by another module stay theirs (first wins), with a warning.
  defp sync_registry(registry, old, new) do
    for m <- old,
        name = Remote.field(m, :name, nil),
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
