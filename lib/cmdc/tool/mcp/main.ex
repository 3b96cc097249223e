defmodule CMDC.Tool.MCP.Main do
  @moduledoc """
  The `cmdc-mcp` command: serves the project's tools to MCP clients over stdio, or over
  Streamable HTTP with `--http PORT` (`CMDC.Tool.MCP.HTTP`).

  `bin/cmdc-mcp` starts it without Mix when the build is current (`mix compile` runs only after
  a source file changed), and `mix cmdc.mcp` runs the same code inside Mix.
  """

  require Logger

  alias CMDC.Tool.{CLI, Hooks, Runner}
  alias CMDC.Tool.MCP.{HTTP, SelfGuard, Server, Stdio}

  @usage """
  Usage: cmdc-mcp [--cwd DIR] [--trust] [--allow NAME]... [--no-mcp] [--examples]
                  [--watch MS] [--page-size N] [--http PORT [HTTP OPTIONS]] [PATH...]

  Serves the tools of the project in DIR (default: the working directory) over the Model
  Context Protocol (JSON-RPC 2.0 on stdin/stdout, or Streamable HTTP): the tools the
  application declares (`config :cmdc_tool, tools: [...]`), the project's tool folders
  (.cmdc/tools, … once trusted), the user's tool folders and plugins, the files or folders
  given as PATH (Elixir, Python and PowerShell tools), and the tools of configured MCP servers.
  Both protocol eras: 2026-07-28 (stateless) and 2025-11-25 / 2025-06-18 (initialize).

    --cwd DIR       the project to serve (MCP clients often start servers elsewhere)
    --trust         trust the project for this run (`mix cmdc.tools trust` records it)
    --allow NAME    run tool NAME without asking (no one can approve over MCP); repeatable
    --no-mcp        skip the MCP servers of .mcp.json and the user's MCP configs
    --examples      also serve the library's example tools
    --watch MS      look for added, changed or removed tool files every MS milliseconds and
                    send notifications/tools/list_changed when the tools changed
    --page-size N   tools per tools/list page (default 50)
    -h, --help      print this help and exit

  HTTP (one endpoint, http://HOST:PORT/mcp):
    --http PORT          serve over Streamable HTTP instead of stdio (0: any free port)
    --host ADDRESS       address to bind (default 127.0.0.1; others need a token or OAuth)
    --token-file PATH    require Authorization: Bearer <the file's content>
                         (or set CMDC_MCP_TOKEN)
    --allow-origin URL   also accept requests from this Origin (repeatable)
    --oauth-introspect URL   act as an OAuth 2.1 resource server: check tokens at this RFC
                         7662 endpoint (client credentials from CMDC_MCP_OAUTH_CLIENT_ID /
                         CMDC_MCP_OAUTH_CLIENT_SECRET)
    --oauth-issuer URL   the authorization server named in the RFC 9728 metadata
    --resource URL       the audience tokens must carry (default: the endpoint's URL)

  On stdio, stdout carries protocol messages only; everything else goes to stderr, and the
  server exits when the client closes stdin. It also serves the tools of the MCP servers in
  .mcp.json, ~/.cmdc/mcp.json and ~/.claude.json, except cmdc-mcp itself: never started from
  inside cmdc-mcp (CMDC_MCP_SERVER marks every program it starts; a cmdc-mcp started with it
  set exits with status 3). Calls go through the hooks of .claude/settings.json and the
  other settings files (a project's only when trusted; see `mix cmdc.tools hooks`). Tool files
  that failed to load are listed on stderr at start and whenever a rescan changes them, and so,
  at start, are the app's `@behaviour CMDC.Tool` modules the config does not serve. Exit
  status: 0 done, 2 usage error, 3 nested. MCP client configuration (.mcp.json, Claude Desktop):

      {"mcpServers": {"my_agent": {"command": "/path/to/cmdc_tool/bin/cmdc-mcp",
                                   "args": ["--cwd", "/path/to/my_agent"]}}}
  """

  @doc "The usage text."
  @spec usage() :: String.t()
  def usage, do: @usage

  @doc """
  The VM's entry point when `bin/cmdc-mcp` starts it with `erl` directly (`-s` this function,
  the arguments after `-extra`): starts Elixir, then runs `main/1`. Going around the `elixir`
  script and Elixir's command line saves a good part of the start-up.
  """
  @spec start() :: no_return()
  def start do
    # What Elixir's command line would have started.
    {:ok, _} = Application.ensure_all_started(:logger)
    main(Enum.map(:init.get_plain_arguments(), &List.to_string/1))
  end

  @doc "Runs the command and halts the VM with its status (what `bin/cmdc-mcp` calls)."
  @spec main([String.t()]) :: no_return()
  def main(argv) do
    status =
      case run(argv) do
        :ok -> 0
        {:error, status} -> status
      end

    # The server gave its calls a moment to stop; whatever still runs goes now, with what it
    # started (the kernel's parent-death signal would reach each program alone).
    CMDC.Tool.Exec.kill_all()
    System.halt(status)
  end

  @doc """
  Runs the command: `:ok` when the client went away (or help was printed), `{:error, status}`
  for a usage error (2), or when started by another `cmdc-mcp` (3: `CMDC.Tool.MCP.SelfGuard`).
  """
  @spec run([String.t()]) :: :ok | {:error, pos_integer()}
  def run(argv) do
    case parse(argv) do
      :help ->
        IO.write(@usage)
        :ok

      {:error, message} ->
        IO.write(:stderr, "cmdc-mcp: #{message}\n\n" <> @usage)
        {:error, 2}

      {:ok, opts, paths} ->
        if SelfGuard.marked?(), do: refuse_nested(), else: serve(opts, paths)
    end
  end

  # Started, directly or through any other program, by a serving cmdc-mcp: serving here would
  # start the same servers (and itself) again. Refused before anything starts.
  defp refuse_nested do
    IO.write(
      :stderr,
      "cmdc-mcp: started by another cmdc-mcp (#{SelfGuard.marker()}=" <>
        "#{System.get_env(SelfGuard.marker())}); not serving: an MCP config it reads runs " <>
        "cmdc-mcp again, which would start itself at every depth\n"
    )

    {:error, 3}
  end

  @doc false
  def parse(argv) do
    switches = [
      page_size: :integer,
      watch: :integer,
      help: :boolean,
      http: :integer,
      host: :string,
      token_file: :string,
      allow_origin: :keep,
      oauth_introspect: :string,
      oauth_issuer: :string,
      resource: :string,
      cwd: :string,
      trust: :boolean,
      allow: :keep,
      mcp: :boolean,
      examples: :boolean
    ]

    case OptionParser.parse(argv, strict: switches, aliases: [h: :help]) do
      {opts, paths, []} ->
        cond do
          opts[:help] ->
            :help

          Keyword.get(opts, :watch, 1) < 1 ->
            {:error, "--watch needs a positive interval (ms)"}

          Keyword.get(opts, :page_size, 1) < 1 ->
            {:error, "--page-size needs a positive number"}

          Keyword.get(opts, :http, 0) not in 0..65_535 ->
            {:error, "--http needs a port number"}

          opts[:cwd] && not File.dir?(opts[:cwd]) ->
            {:error, "--cwd #{opts[:cwd]}: no such folder"}

          true ->
            {:ok, opts, paths}
        end

      {_, _, [{switch, nil} | _]} ->
        {:error, CMDC.Tool.Options.switch_error(switch, switches)}

      {_, _, [{switch, value} | _]} ->
        {:error, "invalid value for #{switch}: #{value}"}
    end
  end

  defp serve(opts, paths) do
    # Every program this server starts carries the marker (SelfGuard), in both modes.
    SelfGuard.mark()
    if opts[:cwd], do: File.cd!(opts[:cwd])
    CMDC.Tool.Project.load_config()
    if opts[:http], do: serve_http(opts, paths), else: serve_stdio(opts, paths)
  end

  defp serve_stdio(opts, paths) do
    output =
      case Stdio.open() do
        {:ok, port} ->
          port

        {:error, reason} ->
          Logger.warning("mcp: stdout not detached (#{reason}); serving on the standard device")
          :stdio
      end

    Logger.configure_backend(:console, device: :standard_error)
    {:ok, _} = Application.ensure_all_started(:cmdc_tool)
    watch = opts[:watch]
    {report, state} = CLI.watch(paths, load_opts(opts))
    report_problems(report, nil)
    server = self()
    # Rescans run in their own process: the server answers requests meanwhile.
    refresh = &Server.refresh(server, &1)
    if watch, do: spawn_link(fn -> watch_loop(refresh, {state, report}, watch) end)

    context = hooked_context(report.tools, Keyword.get_values(opts, :allow))

    Server.serve(report.tools,
      page_size: Keyword.get(opts, :page_size, 50),
      output: output,
      list_changed: watch != nil,
      context: context
    )

    Runner.session_event(report.tools, :shutdown, context)
  end

  # The runner applies the settings files' command hooks (`CMDC.Tool.Hooks.Settings`, read
  # again when a file changes); their problems are logged at start, naming file and hook.
  defp hooked_context(tools, allowed) do
    context = context(allowed)
    if Hooks.Settings.enabled?(), do: log_hook_problems(Hooks.Settings.config([]))
    Runner.session_event(tools, :start, context)
    context
  end

  defp log_hook_problems(config) do
    for e <- config.errors,
        do: Logger.warning("mcp: hooks: #{e.path}#{if e.hook, do: " " <> e.hook}: #{e.reason}")

    if note = Hooks.Settings.inactive_note(config), do: Logger.warning("mcp: hooks: " <> note)
  end

  defp load_opts(opts), do: Keyword.take(opts, [:trust, :mcp, :examples])

  # Over MCP no one can approve: the approver allows the tools named with --allow; for the
  # others it has no answer (nil), so the runner refuses them as headless, saying how to allow
  # each (the flag, and the setting in the tool's own file).
  defp context(allowed) do
    approver = fn %{tool: name} -> if name in allowed, do: :allow end
    %{CMDC.Tool.MCP.Calls.context() | private: %{approver: approver}}
  end

  # Load failures go to stderr at start and whenever a refresh changes them: an MCP client
  # shows the server's stderr in its log, the one place a user of a client looks.
  defp report_problems(report, previous) do
    problems = problems(report)
    before = if previous, do: problems(previous), else: []

    cond do
      problems == before ->
        :ok

      problems == [] ->
        IO.puts(:stderr, "cmdc-mcp: every tool file loads now (#{length(report.tools)} tools)")

      true ->
        IO.puts(
          :stderr,
          "cmdc-mcp: #{CLI.failed_summary(problems)} failed to load; serving the other " <>
            "#{length(report.tools)} tools:"
        )

        Enum.each(problems, &IO.puts(:stderr, "  - #{&1.path}: #{&1.reason}"))
    end

    for u <- report.untrusted,
        previous == nil,
        do: IO.puts(:stderr, "cmdc-mcp: #{u.path}: #{u.reason}")

    # Once, at start: the app's tool modules nothing serves (stderr: the client's log).
    if hint = previous == nil && CLI.unserved(report), do: IO.puts(:stderr, "cmdc-mcp: " <> hint)

    :ok
  end

  defp problems(report),
    do: report.errors ++ Enum.map(report.conflicts, &%{path: &1.refused, reason: &1.reason})

  # Serves until the VM is stopped (SIGTERM, or the supervisor above).
  defp serve_http(opts, paths) do
    # No protocol channel on stdio in this mode; tools must not think there is one.
    System.delete_env("CMDC_MCP_FD")
    Logger.configure_backend(:console, device: :standard_error)
    {:ok, _} = Application.ensure_all_started(:cmdc_tool)

    with {:ok, http_opts} <- http_options(opts) do
      {report, state} = CLI.watch(paths, load_opts(opts))
      report_problems(report, nil)
      # The runner applies the settings files' hooks to every call of this VM.
      if Hooks.Settings.enabled?(), do: log_hook_problems(Hooks.Settings.config([]))
      http_opts = [tools: report.tools, list_changed: opts[:watch] != nil] ++ http_opts
      # A port in use is a message and a status, not a crash of the caller.
      Process.flag(:trap_exit, true)

      case HTTP.start_link(http_opts) do
        {:ok, server} ->
          IO.write(:stderr, "cmdc-mcp: serving MCP on #{HTTP.url(server)}\n")
          refresh = &HTTP.refresh(server, &1)

          if opts[:watch],
            do: spawn_link(fn -> watch_loop(refresh, {state, report}, opts[:watch]) end)

          Process.sleep(:infinity)

        {:error, reason} ->
          IO.write(:stderr, "cmdc-mcp: #{reason}\n")
          {:error, 1}
      end
    end
  end

  @doc false
  def http_options(opts) do
    with {:ok, ip} <- parse_ip(Keyword.get(opts, :host, "127.0.0.1")),
         {:ok, auth} <- auth(opts),
         :ok <- exposed(ip, auth) do
      {:ok,
       [
         port: opts[:http],
         ip: ip,
         auth: auth,
         page_size: Keyword.get(opts, :page_size, 50),
         allowed_origins: Keyword.get_values(opts, :allow_origin)
       ]}
    else
      {:error, message} ->
        IO.write(:stderr, "cmdc-mcp: #{message}\n")
        {:error, 2}
    end
  end

  # Off loopback, anyone on the network could run the tools: not without credentials.
  defp exposed({127, _, _, _}, _auth), do: :ok
  defp exposed({0, 0, 0, 0, 0, 0, 0, 1}, _auth), do: :ok

  defp exposed(_ip, nil),
    do: {:error, "--host off loopback needs --token-file, CMDC_MCP_TOKEN or --oauth-introspect"}

  defp exposed(_ip, _auth), do: :ok

  defp parse_ip(text) do
    case :inet.parse_address(String.to_charlist(text)) do
      {:ok, ip} -> {:ok, ip}
      {:error, _} -> {:error, "--host #{text} is not an IP address"}
    end
  end

  defp auth(opts) do
    cond do
      url = opts[:oauth_introspect] ->
        {:ok,
         {:oauth,
          introspection_url: url,
          authorization_servers: List.wrap(opts[:oauth_issuer]),
          resource: opts[:resource],
          client_id: System.get_env("CMDC_MCP_OAUTH_CLIENT_ID"),
          client_secret: System.get_env("CMDC_MCP_OAUTH_CLIENT_SECRET")}}

      path = opts[:token_file] ->
        {:ok, {:bearer_file, path}}

      token = System.get_env("CMDC_MCP_TOKEN") ->
        {:ok, {:bearer, token}}

      true ->
        {:ok, nil}
    end
  end

  # Each tick stats the tool files (one native scan); files are compiled or read again only when
  # they changed, and the server hears only of changes.
  defp watch_loop(refresh, {state, last}, interval) do
    Process.sleep(interval)

    acc =
      try do
        case CLI.reload(state) do
          :unchanged ->
            {state, last}

          {:changed, report, state} ->
            report_problems(report, last)
            # The server stops using the old modules before they are deleted.
            refresh.(report.tools)
            {CLI.forget_stale(state), report}
        end
      rescue
        e ->
          Logger.error("mcp: --watch: #{Exception.message(e)}")
          {state, last}
      end

    watch_loop(refresh, acc, interval)
  end
end
