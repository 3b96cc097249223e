defmodule CMDC.Tool.MCP.HTTP do
  @moduledoc """
  An MCP server over Streamable HTTP: one endpoint (`/mcp` by default) on OTP's `inets` httpd,
  serving the same protocol core as stdio (`CMDC.Tool.MCP`), both eras.

    * `2026-07-28` clients POST each request with its `_meta` envelope and the
      `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers (checked against the body);
      nothing is kept between requests.
    * `2025-11-25` / `2025-06-18` clients POST `initialize` and get an `Mcp-Session-Id`; later
      requests carry it (an unknown one is 404, so the client starts over) and DELETE ends it.
      GET with the session opens its server-to-client stream (list changes); GET without one
      is 405.

  A request gets a JSON response, or an SSE stream when it is a `tools/call` with a
  `progressToken` (progress notifications, then the result) or a `subscriptions/listen`
  (acknowledged, then `notifications/tools/list_changed` when `refresh/2` brings a different
  list and the server was started with `list_changed: true`). Calls run through
  `CMDC.Tool.Runner` like stdio calls (approvals, hooks, time-outs); a client that disconnects
  before its answer cancels the call: the tool and its OS processes are killed.

  ## Safe defaults

  Bound to 127.0.0.1; `Origin` must name a loopback host (or one in `:allowed_origins`), else
  403; on a loopback bind the `Host` must be a loopback name too (DNS rebinding); bodies over
  `:max_body` (4 MiB) get 413 and bodies not complete `:body_timeout_ms` after they began get
  408, both as JSON-RPC errors (`CMDC.Tool.MCP.HTTP.Body`, which also says the few cases httpd
  answers itself); a connection idle for `:idle_timeout_ms` is closed, and one that sends
  slower than `:min_bytes_per_second` is dropped; headers over `:max_header_size` are refused. Authentication (`:auth`, see `CMDC.Tool.MCP.HTTP.Auth`): none, a bearer token, or
  OAuth 2.1 resource server (RFC 9728 metadata, RFC 7662 introspection, audience checked).

  ## Errors

  `start_link/1` answers `{:error, message}` when the server cannot start (a bad `:auth`
  setting, the port in use). Requests never stop the server: each bad one gets its HTTP status
  (400, 401, 403, 404, 405, 408, 413, 415) with a JSON-RPC error body saying what to fix; a tool's
  own failure is a result with `isError: true`, as MCP defines it.

  ## Starting it

      children = [
        {CMDC.Tool.MCP.HTTP, tools: [MyApp.Tools.Weather], port: 8765, name: MyApp.MCP}
      ]

  `mix cmdc.mcp --http PORT` and `bin/cmdc-mcp --http PORT` serve the project's tools this way.

  Options: `:tools` (required), `:port` (0 picks a free one: `port/1`), `:ip` (a tuple,
  default `{127, 0, 0, 1}`), `:path` (`"/mcp"`), `:allowed_origins` (extra origins, e.g.
  `"https://app.example.com"`), `:max_body`, `:body_timeout_ms` (as `:idle_timeout_ms`),
  `:max_header_size` (16 KiB), `:idle_timeout_ms` (30,000), `:min_bytes_per_second` (100), `:auth`, `:list_changed`, `:page_size`,
  `:server_name`, `:context` (a `CMDC.Context` for every call; by default one per session, or
  per request for stateless clients), `:session_idle_ms` (sessions unused that long are dropped;
  1 hour), `:max_sessions` (10,000), `:name`.
  """

  use GenServer

  import Bitwise, only: [<<<: 2]

  require Logger

  alias CMDC.Tool.MCP
  alias CMDC.Tool.MCP.HTTP.{Auth, Custom}

  @sweep_ms 60_000

  @doc "Starts the server, linked to the caller."
  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts) do
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

  @doc "Stops the server: open streams end, running calls are cancelled."
  @spec stop(GenServer.server()) :: :ok
  def stop(server), do: GenServer.stop(server)

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)
    tools = Keyword.fetch!(opts, :tools)
    mcp = MCP.new(tools, Keyword.take(opts, [:page_size, :server_name, :list_changed]))

    with {:ok, auth} <- Auth.new(Keyword.get(opts, :auth)),
         table = :ets.new(__MODULE__, [:set, :public, read_concurrency: true]),
         {:ok, httpd} <- start_httpd(opts, table) do
      port = listen_port(httpd)
      Custom.register(port, Keyword.get(opts, :max_body, 4 * 1024 * 1024))
      config = config(opts, port, auth)
      :ets.insert(table, [{:mcp, mcp}, {:config, config}])
      Process.send_after(self(), :sweep, @sweep_ms)
      described = Enum.map(MCP.tools(mcp), &MCP.describe/1)
      {:ok, %{table: table, httpd: httpd, port: port, config: config, described: described}}
    else
      {:error, reason} -> {:stop, reason}
    end
  end

  defp start_httpd(opts, table) do
    ip = Keyword.get(opts, :ip, {127, 0, 0, 1})
    root = String.to_charlist(System.tmp_dir!())

    config = [
      port: Keyword.get(opts, :port, 0),
      bind_address: ip,
      server_name: ~c"cmdc-mcp",
      server_root: root,
      document_root: root,
      modules: [CMDC.Tool.MCP.HTTP.Handler],
      # Bodies come to the handler in pieces, which times them (CMDC.Tool.MCP.HTTP.Body);
      # a Content-Length over the limit is answered by the customize callback
      # (CMDC.Tool.MCP.HTTP.Custom): httpd's own answers to both are HTML pages.
      max_body_size: Keyword.get(opts, :max_body, 4 * 1024 * 1024),
      max_client_body_chunk: CMDC.Tool.MCP.HTTP.Body.piece_size(),
      max_content_length: 1 <<< 62,
      customize: CMDC.Tool.MCP.HTTP.Custom,
      max_header_size: Keyword.get(opts, :max_header_size, 16 * 1024),
      keep_alive_timeout: div(Keyword.get(opts, :idle_timeout_ms, 30_000) + 999, 1000),
      minimum_bytes_per_second: Keyword.get(opts, :min_bytes_per_second, 100),
      max_clients: Keyword.get(opts, :max_clients, 1_000),
      cmdc_mcp: table
    ]

    case :inets.start(:httpd, config, :stand_alone) do
      {:ok, pid} -> {:ok, pid}
      {:error, reason} -> {:error, "cannot serve MCP over HTTP: #{inspect(reason)}"}
    end
  end

  # httpd answers `info/1` only for servers under the inets application; a stand-alone one (which
  # dies with its owner) names its port in its instance supervisor's id.
  defp listen_port(httpd) do
    Enum.find_value(Supervisor.which_children(httpd), fn
      {{:httpd_instance_sup, _ip, port, _profile}, _, _, _} -> port
      _ -> nil
    end)
  end

  defp config(opts, port, auth) do
    ip = Keyword.get(opts, :ip, {127, 0, 0, 1})
    path = Keyword.get(opts, :path, "/mcp")
    host = ip |> :inet.ntoa() |> to_string()
    host = if String.contains?(host, ":"), do: "[#{host}]", else: host

    %{
      path: path,
      url: "http://#{host}:#{port}#{path}",
      loopback?: loopback?(ip),
      allowed_origins: Keyword.get(opts, :allowed_origins, []),
      auth: Auth.put_resource(auth, "http://#{host}:#{port}#{path}"),
      context: Keyword.get(opts, :context),
      max_sessions: Keyword.get(opts, :max_sessions, 10_000),
      max_body: Keyword.get(opts, :max_body, 4 * 1024 * 1024),
      body_timeout_ms:
        Keyword.get(opts, :body_timeout_ms, Keyword.get(opts, :idle_timeout_ms, 30_000))
    }
    |> Map.put(:session_idle_ms, Keyword.get(opts, :session_idle_ms, 3_600_000))
    |> Map.put(:working_dir, File.cwd!())
  end

  defp loopback?({127, _, _, _}), do: true
  defp loopback?({0, 0, 0, 0, 0, 0, 0, 1}), do: true
  defp loopback?(_), do: false

  @impl true
  def handle_call(:port, _from, state), do: {:reply, state.port, state}
  def handle_call(:url, _from, state), do: {:reply, state.config.url, state}

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
  def handle_info(:sweep, state) do
    cutoff = System.monotonic_time(:millisecond) - state.config.session_idle_ms
    spec = [{{{:session, :_}, %{touched: :"$1"}}, [{:<, :"$1", cutoff}], [true]}]
    :ets.select_delete(state.table, spec)
    Process.send_after(self(), :sweep, @sweep_ms)
    {:noreply, state}
  end

  def handle_info({:EXIT, pid, reason}, %{httpd: pid} = state), do: {:stop, reason, state}
  def handle_info(_msg, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    # Streams and calls live in httpd's request processes: stopping httpd ends them, and the
    # runner cancels each call whose caller died.
    Custom.unregister(state.port)
    :inets.stop(:stand_alone, state.httpd)
  catch
    _, _ -> :ok
  end
end
