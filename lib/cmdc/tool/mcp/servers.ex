defmodule CMDC.Tool.MCP.Servers do
  @moduledoc """
  Starts the MCP servers of the configs people already have and reports their tools the way
  `CMDC.Tool.Discovery` reports files' tools.

  ## Where servers are configured (in order of precedence)

    1. `:project` - `.mcp.json` (Claude Code's project file) and `.cmdc/mcp.json` under `:cwd`,
       only when the project is trusted: starting a command from a project's config is running
       code from that repository, so the same trust gate as project tool folders applies
       (`trust_project: true`, or the project listed in `~/.cmdc/trusted.json`; see
       `CMDC.Tool.Discovery`). An untrusted project's configs are listed in `:ignored` with
       `type: :untrusted` and how to trust them.
    2. `:user` - `$CMDC_HOME/mcp.json`, `~/.cmdc/mcp.json` and `~/.claude.json` (Claude
       Code's user file; its `mcpServers`). An empty or relative `$CMDC_HOME` (or home) is
       ignored with a warning and a `:bad_home` error (`CMDC.Tool.Home`). Run from the home
       folder, its `.mcp.json` and `.cmdc/mcp.json` are user files.
    3. `:plugins` - the servers of enabled Claude Code plugins (`.mcp.json` at a plugin's root,
       `mcpServers` in its `plugin.json`; `CMDC.Tool.Discovery.ClaudePlugins`), named as Claude
       Code names them, `plugin:<plugin>:<server>` (so their tools are
       `plugin_<plugin>_<server>__<tool>`), `${CLAUDE_PLUGIN_ROOT}` expanded and set, started
       in the plugin's folder. A broken plugin starts nothing (`CMDC.Tool.Discovery` reports
       it).

  Inside `cmdc-mcp` itself, a configured server that is `cmdc-mcp` again is not started (it
  would start itself again, and again): it is listed in `:ignored` with `type: :itself`
  (`CMDC.Tool.MCP.SelfGuard`).

  The format is `CMDC.Tool.MCP.Config`'s. A server name defined twice keeps its first
  definition (the other is reported). Tools are named `server__tool`
  (`CMDC.Tool.MCP.Client.tool_name/2`), and names follow discovery's rule: **the first wins**
  (built-in and `:reserved` names, then servers in the order above, then by server name); the
  loser is reported in `:errors` with `type: :conflict`.

  One broken server (a config error, a command that does not start, a server that never
  answers) is an entry in `:errors` naming the file and the server; the others load. A server
  that failed keeps being retried in the background (with backoff), so it can come up later,
  until it fails `max_restarts` times within `restart_window` (`CMDC.Tool.MCP.Client.Limits`):
  it is then marked `:failed` with its reason (`CMDC.Tool.MCP.Client.info/1`). Each client runs
  under its own supervisor (`CMDC.Tool.MCP.Client.Supervisor`), so a client crashing in a loop
  ends alone and never takes another server's tools down.

  ## Options

  `:cwd`, `:home`, `:cmdc_home`, `:trust_project`, `:trusted` (as for discovery), `:reserved`
  (names or modules taken), `:registry` (tools are registered there and kept in sync when a
  server's list changes), `:init_timeout` (ms, default 30_000), `:timeout` (per call),
  `:sources` (default `[:project, :user, :plugins]`), `:env` (for `${VAR}`, default the VM's).
  """

  alias CMDC.Tool.Discovery.ClaudePlugins
  alias CMDC.Tool.Home
  alias CMDC.Tool.MCP.{Client, Config, SelfGuard}

  @sources [:project, :user, :plugins]

  @options [:cwd, :home, :cmdc_home, :trust_project, :trusted, :reserved, :registry] ++
             [:init_timeout, :timeout, :sources, :env]

  @doc """
  The config files that exist, `[{source, path}]`, in precedence order (untrusted project
  files included: `load/1` decides).
  """
  @spec config_files(keyword()) :: [{:project | :user, String.t()}]
  def config_files(opts) do
    cwd = Path.expand(Keyword.get_lazy(opts, :cwd, &File.cwd!/0))
    sources = Keyword.get(opts, :sources, @sources)
    # An empty or relative home or CMDC_HOME is ignored (CMDC.Tool.Home): it would make the
    # project's files the user's.
    home = with {:ok, home} <- Home.user_home(opts), do: home, else: (_ -> nil)
    cmdc_home = with {:ok, dir} <- Home.cmdc_home(opts), do: dir, else: (_ -> nil)
    # Run from the home folder, its "project" files are the user's own.
    project_source = if home && Home.home?(cwd, home), do: :user, else: :project

    project = for f <- [".mcp.json", ".cmdc/mcp.json"], do: {project_source, Path.join(cwd, f)}

    user =
      if(cmdc_home, do: [{:user, Path.join(cmdc_home, "mcp.json")}], else: []) ++
        if home,
          do: [
            {:user, Path.join(home, ".cmdc/mcp.json")},
            {:user, Path.join(home, ".claude.json")}
          ],
          else: []

    (project ++ user)
    |> Enum.filter(fn {source, path} -> source in sources and File.regular?(path) end)
    |> Enum.uniq_by(&elem(&1, 1))
  end

  @doc """
  Reads the configs, starts a client per server, waits (concurrently) for each to list its
  tools, and returns `%{tools, errors, ignored, clients}`. A tool is
  `%{name, module, source, provider: "mcp:<server>", path, real_path, kind: :mcp, server,
  settings}`; `clients` is `[{server, pid}]` (stop them with `stop/1`).
  """
  @spec load(keyword()) :: map()
  def load(opts \\ []) do
    CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.MCP.Servers.load/1")
    env = Keyword.get_lazy(opts, :env, &System.get_env/0)
    files = config_files(opts)
    trusted? = Enum.any?(files, &(elem(&1, 0) == :project)) and project_trusted?(opts)

    {readable, ignored} =
      Enum.split_with(files, fn {source, _} -> source == :user or trusted? end)

    ignored = Enum.map(ignored, fn {source, path} -> untrusted(source, path) end)

    {servers, errors} =
      Enum.reduce(readable, {[], []}, fn {source, path}, {servers, errors} ->
        {found, bad} = Config.read(path, env)

        {servers ++ Enum.map(found, &Map.put(&1, :source, source)),
         errors ++ Enum.map(bad, &Map.put(&1, :source, source))}
      end)

    {plugin_servers, plugin_errors} = plugin_servers(opts, env)
    servers = servers ++ plugin_servers
    errors = errors ++ plugin_errors
    {servers, dupes} = unique_servers(servers)
    {servers, itself} = SelfGuard.split(servers)
    clients = Enum.map(servers, &{&1, start(&1, opts)})
    timeout = Keyword.get(opts, :init_timeout, 30_000)

    results =
      clients
      |> Task.async_stream(fn {server, started} -> {server, ready(server, started, timeout)} end,
        timeout: :infinity,
        ordered: true
      )
      |> Enum.map(fn {:ok, result} -> result end)

    failures =
      for {server, {:error, reason}} <- results do
        %{
          type: :mcp_server,
          source: server.source,
          provider: "mcp:" <> server.name,
          path: server.path,
          server: server.name,
          reason: reason
        }
      end

    taken = reserved_names(opts)

    {tools, conflicts, _taken} =
      Enum.reduce(results, {[], [], taken}, fn
        {server, {:ok, modules}}, acc -> Enum.reduce(modules, acc, &claim(server, &1, &2))
        _, acc -> acc
      end)

    %{
      tools: Enum.reverse(tools),
      errors:
        Home.errors(opts) ++
          Enum.map(errors, &config_error/1) ++ dupes ++ failures ++ Enum.reverse(conflicts),
      ignored: ignored ++ itself,
      clients: for({server, {:ok, pid}} <- clients, do: {server.name, pid})
    }
  end

  @doc "Stops the clients (and servers) a `load/1` report started."
  @spec stop(map()) :: :ok
  def stop(%{clients: clients}) do
    Enum.each(clients, fn {_, pid} -> if Process.alive?(pid), do: Client.stop(pid) end)
  end

  # The enabled Claude Code plugins' servers, named `plugin:<plugin>:<server>`.
  defp plugin_servers(opts, env) do
    if :plugins in Keyword.get(opts, :sources, @sources) and
         match?({:ok, _}, Home.user_home(opts)) do
      report =
        ClaudePlugins.load(
          Keyword.take(opts, [:cwd, :home, :cmdc_home, :trust_project, :trusted])
        )

      # A broken plugin is reported by discovery (the same scan), once.
      report
      |> ClaudePlugins.enabled()
      |> Enum.flat_map(fn p -> Enum.map(p.mcp, &{p, &1}) end)
      |> Enum.reduce({[], []}, fn {p, %{path: path, json: json}}, {ok, bad} ->
        plugin_env = Map.put(env, "CLAUDE_PLUGIN_ROOT", p.root)
        {found, errors} = Config.parse_json(json, path, plugin_env)

        found =
          for server <- found do
            name = ClaudePlugins.server_name(p.name, server.name)

            %{server | name: name, transport: in_plugin(server.transport, p.root)}
            |> Map.put(:source, :plugins)
          end

        {ok ++ found, bad ++ Enum.map(errors, &Map.put(&1, :source, :plugins))}
      end)
    else
      {[], []}
    end
  end

  defp in_plugin({:stdio, spec}, root),
    do: {:stdio, %{spec | cwd: root, env: Map.put(spec.env, "CLAUDE_PLUGIN_ROOT", root)}}

  defp in_plugin(transport, _root), do: transport

  defp project_trusted?(opts) do
    CMDC.Tool.Discovery.project_trusted?(
      Keyword.take(opts, [:cwd, :home, :cmdc_home, :trust_project, :trusted])
    )
  end

  defp untrusted(source, path) do
    %{
      type: :untrusted,
      source: source,
      provider: "mcp",
      path: path,
      reason:
        "project MCP config not trusted: #{path} starts programs from a repository you may " <>
          "just have cloned, so its servers are not started. To trust it, run " <>
          "`mix cmdc.tools trust` in the project (or pass --trust for one run, " <>
          "`trust_project: true` from Elixir): it adds the project folder to ~/.cmdc/trusted.json"
    }
  end

  defp config_error(e),
    do: Map.merge(e, %{provider: "mcp" <> if(e.server, do: ":" <> e.server, else: "")})

  defp unique_servers(servers) do
    {kept, dupes, _} =
      Enum.reduce(servers, {[], [], %{}}, fn s, {kept, dupes, seen} ->
        case seen[s.name] do
          nil ->
            {[s | kept], dupes, Map.put(seen, s.name, s.path)}

          first ->
            dupe = %{
              type: :conflict,
              source: s.source,
              provider: "mcp:" <> s.name,
              path: s.path,
              name: s.name,
              winner: first,
              reason: ~s(#{s.path}: server "#{s.name}" is already defined in #{first}, which wins)
            }

            {kept, [dupe | dupes], seen}
        end
      end)

    {Enum.reverse(kept), Enum.reverse(dupes)}
  end

  defp start(server, opts) do
    client_opts =
      [name: server.name, transport: server.transport, namespace: true]
      |> put_opt(:init_timeout, opts[:init_timeout])
      |> put_opt(:timeout, opts[:timeout])
      |> put_opt(:registry, opts[:registry])
      # The config's own limits (`"cmdc"` keys of an HTTP server: `http_connections`, ...).
      |> put_opt(:limits, server[:limits])

    # One supervisor per server: a client crashing in a loop ends alone.
    with {:ok, sup} <-
           DynamicSupervisor.start_child(supervisor(), {Client.Supervisor, client_opts}) do
      case Client.Supervisor.client(sup) do
        nil -> {:error, "its client did not start"}
        pid -> {:ok, pid}
      end
    end
  end

  defp put_opt(opts, _key, nil), do: opts
  defp put_opt(opts, key, value), do: Keyword.put(opts, key, value)

  defp ready(_server, {:error, reason}, _timeout),
    do: {:error, "cannot start: #{inspect(reason)}"}

  defp ready(server, {:ok, pid}, timeout) do
    case Client.await_ready(pid, timeout + 5_000) do
      :ok -> {:ok, Client.tools(pid)}
      {:error, reason} -> {:error, "#{server.path}: #{reason}"}
    end
  end

  defp reserved_names(opts) do
    opts
    |> Keyword.get(:reserved, [])
    |> Map.new(fn
      name when is_binary(name) -> {name, :reserved}
      module when is_atom(module) -> {module.name(), :reserved}
    end)
  end

  defp claim(server, module, {tools, conflicts, taken}) do
    name = module.name()

    case taken[name] do
      nil ->
        tool = %{
          name: name,
          module: module,
          source: server.source,
          provider: "mcp:" <> server.name,
          path: server.path,
          real_path: server.path,
          kind: :mcp,
          server: server.name,
          settings: %{}
        }

        {[tool | tools], conflicts, Map.put(taken, name, server.path)}

      winner ->
        conflict = %{
          type: :conflict,
          source: server.source,
          provider: "mcp:" <> server.name,
          path: server.path,
          name: name,
          winner: winner,
          reason:
            "tool #{name} of MCP server #{server.name} refused: the name is taken by #{inspect(winner)}"
        }

        {tools, [conflict | conflicts], taken}
    end
  end

  # The clients outlive the caller: they live under a supervisor of the application, started
  # on first use.
  defp supervisor do
    name = CMDC.Tool.MCP.ClientSupervisor

    case Process.whereis(name) do
      nil ->
        spec = %{
          id: name,
          start: {DynamicSupervisor, :start_link, [[strategy: :one_for_one, name: name]]},
          type: :supervisor
        }

        case Supervisor.start_child(CMDC.Tool.Supervisor, spec) do
          {:ok, pid} -> pid
          {:error, {:already_started, pid}} -> pid
          {:error, :already_present} -> restart(name)
        end

      pid ->
        pid
    end
  end

  defp restart(name) do
    case Supervisor.restart_child(CMDC.Tool.Supervisor, name) do
      {:ok, pid} -> pid
      {:error, :running} -> Process.whereis(name)
    end
  end
end
