defmodule CMDC.Tool.MCP.HTTP do
  @moduledoc """
  An MCP server over Streamable HTTP: one endpoint (`/mcp` by default), serving the same
  protocol core as stdio (`CMDC.Tool.MCP`), both eras. HTTP itself is hyper's, in the NIF's
  tokio runtime (`CMDC.Tool.MCP.HTTP.Wire`); this process owns the listener and starts one
  process per request (`CMDC.Tool.MCP.HTTP.Handler`).

    * `2026-07-28` clients POST each request with its `_meta` envelope and the
      `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers (checked against the body);
      nothing is kept between requests.
    * `2025-11-25` / `2025-06-18` clients POST `initialize` and get an `Mcp-Session-Id`; later
      requests carry it (an unknown one, or another principal's, is 404, so the client starts
      over) and DELETE ends it. GET with the session opens its server-to-client stream (list
      changes); GET without one is 405.

  A request gets a JSON response, or an SSE stream when it is a `tools/call` with a
  `progressToken` (progress notifications, then the result) or a `subscriptions/listen`
  (acknowledged, then `notifications/tools/list_changed` when `refresh/2` brings a different
  list and the server was started with `list_changed: true`). Calls run through
  `CMDC.Tool.Runner` like stdio calls (approvals, hooks, time-outs); a client that disconnects
  before its answer, or stops reading its stream, cancels the call: the tool and its OS
  processes are killed.

  ## Safe defaults

  Bound to 127.0.0.1; `Origin` must name a loopback host (or one in `:allowed_origins`), else
  403; on a loopback bind the `Host` must be a loopback name too (DNS rebinding); two `Host` or
  `Origin` headers are 400. Every size and time limit, and the session bounds, are in
  `CMDC.Tool.MCP.HTTP.Limits` (a body over 4 MiB: 413; not complete 30 s after its head: 408;
  both as JSON-RPC errors). Authentication (`:auth`, see `CMDC.Tool.MCP.HTTP.Auth`): none, a
  bearer token, or OAuth 2.1 resource server (RFC 9728 metadata, RFC 7662 introspection,
  audience checked). The threat model: `docs/SECURITY.md`.

  ## Errors

  `start_link/1` answers `{:error, message}` when the server cannot start (a bad `:auth`
  setting, the port in use) and raises `ArgumentError` for an unknown option. Requests never
  stop the server: each bad one gets its HTTP status (400, 401, 403, 404, 405, 408, 413, 415,
  503) with a JSON-RPC error body saying what to fix; a tool's own failure is a result with
  `isError: true`, as MCP defines it.

  ## Starting it

      children = [
        {CMDC.Tool.MCP.HTTP, tools: [MyApp.Tools.Weather], port: 8765, name: MyApp.MCP}
      ]

  `mix cmdc.mcp --http PORT` and `bin/cmdc-mcp --http PORT` serve the project's tools this way.

  Options: `:tools` (required), `:port` (0 picks a free one: `port/1`), `:ip` (a tuple,
  default `{127, 0, 0, 1}`), `:path` (`"/mcp"`), `:allowed_origins` (extra origins, e.g.
  `"https://app.example.com"`), the limits of `CMDC.Tool.MCP.HTTP.Limits` (`:max_body`,
  `:header_timeout_ms` or its older name `:idle_timeout_ms`, `:body_timeout_ms`,
  `:max_header_bytes`, `:max_connections`, `:stream_soft_bytes`, `:stream_hard_bytes`,
  `:max_sessions`, `:max_sessions_per_principal`, `:session_idle_ms`), `:auth`,
  `:list_changed`, `:page_size`, `:server_name`, `:context` (a `CMDC.Context` for every call;
  by default one per session, or per request for stateless clients), `:clock` (a function
  returning monotonic milliseconds, for session idle times; tests pass their own), `:name`.
  """

  use GenServer

  require Logger

  alias CMDC.Tool.MCP
  alias CMDC.Tool.MCP.HTTP.{Auth, Handler, Limits, Sessions, Wire}

  @options [
             :tools,
             :port,
             :ip,
             :path,
             :allowed_origins,
             :idle_timeout_ms,
             :auth,
             :list_changed,
             :page_size,
             :server_name,
             :context,
             :clock,
             :name
           ] ++ Limits.keys()

  @doc "Starts the server, linked to the caller."
  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts) do
    CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.MCP.HTTP.start_link/1")

    case Keyword.fetch(opts, :name) do
      {:ok, name} -> GenServer.start_link(__MODULE__, opts, name: name)
      :error -> GenServer.start_link(__MODULE__, opts)
    end
  end

  @doc "The TCP port the server listens on."
  @spec port(GenServer.server()) :: :inet.port_number()
  def port(server), do: GenServer.call(server, :port)

  @doc "The endpoint's URL, e.g. `http://127.0.0.1:8765/mcp`."
  @spec url(GenServer.server()) :: String.t()
  def url(server), do: GenServer.call(server, :url)

  @doc """
  Serves a new tool list. When it differs from the old one and the server was started with
  `list_changed: true`, every `subscriptions/listen` stream that asked hears of it. Returns once
  new requests use the new list.
  """
  @spec refresh(GenServer.server(), [module()]) :: :ok
  def refresh(server, tools), do: GenServer.call(server, {:tools, tools}, :infinity)

  @doc false
  # Removes the sessions idle too long now (the server does it every minute on its own).
  @spec sweep(GenServer.server()) :: non_neg_integer()
  def sweep(server), do: GenServer.call(server, :sweep)

  @doc "Stops the server: open streams end, running calls are cancelled."
  @spec stop(GenServer.server()) :: :ok
  def stop(server), do: GenServer.stop(server)

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    tools = Keyword.fetch!(opts, :tools)
    mcp = MCP.new(tools, Keyword.take(opts, [:page_size, :server_name, :list_changed]))
    ip = Keyword.get(opts, :ip, {127, 0, 0, 1})
    limits = Limits.new(opts)
    origins = Keyword.get(opts, :allowed_origins, [])

    with {:ok, auth} <- Auth.new(Keyword.get(opts, :auth)),
         {:ok, {listener, port}} <- listen(ip, Keyword.get(opts, :port, 0), limits, origins) do
      table = :ets.new(__MODULE__, [:set, :public, read_concurrency: true])
      config = config(opts, ip, port, auth, limits, table)
      :ets.insert(table, {:mcp, mcp})
      schedule_sweep(limits)
      described = Enum.map(MCP.tools(mcp), &MCP.describe/1)

      state = %{listener: listener, table: table, port: port, config: config}
      {:ok, Map.merge(state, %{described: described, workers: MapSet.new()})}
    else
      {:error, reason} -> {:stop, reason}
    end
  end

  defp listen(ip, port, limits, origins) do
    case Wire.listen(ip, port, limits, origins) do
      {:ok, listening} -> {:ok, listening}
      {:error, reason} -> {:error, "cannot serve MCP over HTTP: #{reason}"}
    end
  end

  defp config(opts, ip, port, auth, limits, table) do
    path = Keyword.get(opts, :path, "/mcp")
    host = ip |> :inet.ntoa() |> to_string()
    host = if String.contains?(host, ":"), do: "[#{host}]", else: host
    url = "http://#{host}:#{port}#{path}"

    %{
      server: self(),
      table: table,
      sessions: Sessions.new(),
      path: path,
      url: url,
      auth: Auth.put_resource(auth, url),
      context: Keyword.get(opts, :context),
      limits: limits,
      clock: Keyword.get(opts, :clock, fn -> System.monotonic_time(:millisecond) end),
      working_dir: File.cwd!()
    }
  end

  defp schedule_sweep(limits),
    do: Process.send_after(self(), :sweep, min(60_000, limits.session_idle_ms))

  @impl true
  def handle_call(:port, _from, state), do: {:reply, state.port, state}
  def handle_call(:url, _from, state), do: {:reply, state.config.url, state}

  def handle_call({:open_session, principal, mcp}, _from, %{config: config} = state) do
    now = config.clock.()
    {:reply, Sessions.open(config.sessions, principal, mcp, config.limits, now), state}
  end

  def handle_call(:sweep, _from, %{config: config} = state) do
    {:reply, Sessions.sweep(config.sessions, config.limits, config.clock.()), state}
  end

  def handle_call({:tools, tools}, _from, state) do
    [{:mcp, mcp}] = :ets.lookup(state.table, :mcp)
    mcp = MCP.put_tools(mcp, tools)
    :ets.insert(state.table, {:mcp, mcp})
    described = Enum.map(MCP.tools(mcp), &MCP.describe/1)

    if described != state.described and mcp.list_changed do
      for {{:sub, pid}, _id} <- :ets.match_object(state.table, {{:sub, :_}, :_}),
          do: send(pid, {:cmdc_mcp_http, :list_changed})
    end

    {:reply, :ok, %{state | described: described}}
  end

  @impl true
  def handle_info({:cmdc_http, id, exchange, head}, state) do
    pid = spawn_link(Handler, :serve, [exchange, id, head, state.config])
    {:noreply, %{state | workers: MapSet.put(state.workers, pid)}}
  end

  def handle_info(:sweep, %{config: config} = state) do
    Sessions.sweep(config.sessions, config.limits, config.clock.())
    schedule_sweep(config.limits)
    {:noreply, state}
  end

  def handle_info({:EXIT, pid, _reason}, state),
    do: {:noreply, %{state | workers: MapSet.delete(state.workers, pid)}}

  def handle_info(_msg, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    Wire.close(state.listener)

    # Request processes still serving (calls, streams) end, and the runner cancels each call
    # whose caller died.
    for pid <- state.workers, do: Process.exit(pid, :shutdown)
    :ok
  end
end
