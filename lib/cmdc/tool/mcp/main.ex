defmodule CMDC.Tool.MCP.Main do
  @moduledoc """
  The `cmdc-mcp` command: serves the project's tools to MCP clients over stdio.

  `bin/cmdc-mcp` starts it without Mix when the build is current (`mix compile` runs only after
  a source file changed), and `mix cmdc.mcp` runs the same code inside Mix.
  """

  require Logger

  alias CMDC.Tool.CLI
  alias CMDC.Tool.MCP.{Server, Stdio}

  @usage """
  Usage: cmdc-mcp [--cwd DIR] [--trust] [--allow NAME]... [--no-mcp] [--examples]
                  [--watch MS] [--page-size N] [PATH...]

  Serves the tools of the project in DIR (default: the working directory) over the Model
  Context Protocol (JSON-RPC 2.0 on stdin/stdout): the tools the application declares
  (`config :cmdc_tool, tools: [...]`), the project's tool folders (.cmdc/tools, … once
  trusted), the user's tool folders and plugins, the files or folders given as PATH (Elixir,
  Python and PowerShell tools), and the tools of configured MCP servers.

    --cwd DIR       the project to serve (MCP clients often start servers elsewhere)
    --trust         trust the project for this run (`mix cmdc.tools trust` records it)
    --allow NAME    run tool NAME without asking (no one can approve over MCP); repeatable
    --no-mcp        skip the MCP servers of .mcp.json and the user's MCP configs
    --examples      also serve the library's example tools
    --watch MS      look for added, changed or removed tool files every MS milliseconds and
                    send notifications/tools/list_changed when the tools changed
    --page-size N   tools per tools/list page (default 50)
    -h, --help      print this help and exit

  stdout carries protocol messages only; everything else goes to stderr, starting with the
  tool files that failed to load. The server exits when the client closes stdin. Exit status:
  0 done, 2 usage error. MCP client configuration (.mcp.json, Claude Desktop):

      {"mcpServers": {"my_agent": {"command": "/path/to/my_agent/deps/cmdc_tool/bin/cmdc-mcp",
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
  for a usage error.
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
        serve(opts, paths)
    end
  end

  @doc false
  def parse(argv) do
    switches = [
      page_size: :integer,
      watch: :integer,
      help: :boolean,
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

          opts[:cwd] && not File.dir?(opts[:cwd]) ->
            {:error, "--cwd #{opts[:cwd]}: no such folder"}

          true ->
            {:ok, opts, paths}
        end

      {_, _, [{switch, nil} | _]} ->
        known = for {name, _} <- switches, do: "--" <> String.replace(to_string(name), "_", "-")

        hint =
          case CMDC.Tool.Options.suggest(switch, known) do
            [best | _] -> " (did you mean #{best}?)"
            [] -> ""
          end

        {:error, "unknown option #{switch}#{hint}"}

      {_, _, [{switch, value} | _]} ->
        {:error, "invalid value for #{switch}: #{value}"}
    end
  end

  defp serve(opts, paths) do
    output =
      case Stdio.open() do
        {:ok, port} ->
          port

        {:error, reason} ->
          Logger.warning("mcp: stdout not detached (#{reason}); serving on the standard device")
          :stdio
      end

    Logger.configure_backend(:console, device: :standard_error)
    if opts[:cwd], do: File.cd!(opts[:cwd])
    CMDC.Tool.Project.load_config()
    {:ok, _} = Application.ensure_all_started(:cmdc_tool)
    watch = opts[:watch]
    load_opts = Keyword.take(opts, [:trust, :mcp, :examples])
    {report, state} = CLI.watch(paths, load_opts)
    report_problems(report, nil)
    server = self()
    # Rescans run in their own process: the server answers requests meanwhile.
    if watch, do: spawn_link(fn -> watch_loop(server, {state, report}, watch) end)

    Server.serve(report.tools,
      page_size: Keyword.get(opts, :page_size, 50),
      output: output,
      list_changed: watch != nil,
      context: context(Keyword.get_values(opts, :allow))
    )
  end

  # Over MCP no one can approve: the approver allows the tools named with --allow; for the
  # others it has no answer (nil), so the runner refuses them as headless, saying how to allow
  # each (the flag, and the setting in the tool's own file).
  defp context(allowed) do
    approver = fn %{tool: name} -> if name in allowed, do: :allow end

    CMDC.Context.new(
      session_id: "mcp-#{System.unique_integer([:positive])}",
      working_dir: File.cwd!(),
      private: %{approver: approver}
    )
  end

  # Load failures go to stderr at start and whenever a refresh changes them: an MCP client
  # shows the server's stderr in its log, the one place a user of a client looks.
  defp report_problems(report, previous) do
    problems =
      report.errors ++ Enum.map(report.conflicts, &%{path: &1.refused, reason: &1.reason})

    before =
      if previous,
        do:
          previous.errors ++ Enum.map(previous.conflicts, &%{path: &1.refused, reason: &1.reason})

    cond do
      problems == (before || []) ->
        :ok

      problems == [] ->
        IO.puts(:stderr, "cmdc-mcp: every tool file loads now (#{length(report.tools)} tools)")

      true ->
        IO.puts(
          :stderr,
          "cmdc-mcp: #{length(problems)} tool file(s) failed to load; serving the other #{length(report.tools)} tools:"
        )

        Enum.each(problems, &IO.puts(:stderr, "  - #{&1.path}: #{&1.reason}"))
    end

    for u <- report.untrusted,
        previous == nil,
        do: IO.puts(:stderr, "cmdc-mcp: #{u.path}: #{u.reason}")

    :ok
  end

  # Each tick stats the tool files (one native scan); files are compiled or read again only when
  # they changed, and the server hears only of changes.
  defp watch_loop(server, {state, last}, interval) do
    Process.sleep(interval)

    acc =
      try do
        case CLI.reload(state) do
          :unchanged ->
            {state, last}

          {:changed, report, state} ->
            report_problems(report, last)
            # The server stops using the old modules before they are deleted.
            Server.refresh(server, report.tools)
            {CLI.forget_stale(state), report}
        end
      rescue
        e ->
          Logger.error("mcp: --watch: #{Exception.message(e)}")
          {state, last}
      end

    watch_loop(server, acc, interval)
  end
end
