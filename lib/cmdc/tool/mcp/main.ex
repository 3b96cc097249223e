defmodule CMDC.Tool.MCP.Main do
  @moduledoc """
  The `cmdc-mcp` command: serves the project's tools to MCP clients over stdio.

  `bin/cmdc-mcp` starts it without Mix when the build is current (`mix compile` runs only after
  a source file changed), and `mix cmdc.mcp` runs the same code inside Mix.
  """

  require Logger

  alias CMDC.Tool.CLI
  alias CMDC.Tool.MCP.{SelfGuard, Server, Stdio}

  @usage """
  Usage: cmdc-mcp [--watch MS] [--page-size N] [PATH...]

  Serves tools over the Model Context Protocol (JSON-RPC 2.0 on stdin/stdout): the built-in
  examples, the project's and the user's tool folders and plugins, and the files or folders
  given as PATH (Elixir, Python and PowerShell tools).

    --watch MS      look for added, changed or removed tool files every MS milliseconds and
                    send notifications/tools/list_changed when the tools changed
    --page-size N   tools per tools/list page (default 50)
    -h, --help      print this help and exit

  stdout carries protocol messages only; everything else goes to stderr. The server exits when
  the client closes stdin. It also serves the tools of the MCP servers in .mcp.json,
  ~/.cmdc/mcp.json and ~/.claude.json, except cmdc-mcp itself: never started from inside
  cmdc-mcp (CMDC_MCP_SERVER marks every program it starts; a cmdc-mcp started with it set
  exits with status 3). MCP client configuration:

      {"command": "/path/to/cmdc_tool/bin/cmdc-mcp", "args": ["--watch", "1000"]}
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
    switches = [page_size: :integer, watch: :integer, help: :boolean]

    case OptionParser.parse(argv, strict: switches, aliases: [h: :help]) do
      {opts, paths, []} ->
        cond do
          opts[:help] -> :help
          Keyword.get(opts, :watch, 1) < 1 -> {:error, "--watch needs a positive interval (ms)"}
          Keyword.get(opts, :page_size, 1) < 1 -> {:error, "--page-size needs a positive number"}
          true -> {:ok, opts, paths}
        end

      {_, _, [{switch, nil} | _]} ->
        {:error, "unknown option #{switch}"}

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
    {:ok, _} = Application.ensure_all_started(:cmdc_tool)
    watch = opts[:watch]
    # Every program this server starts carries the marker (SelfGuard).
    SelfGuard.mark()
    {report, state} = CLI.watch(paths)
    server = self()
    # Rescans run in their own process: the server answers requests meanwhile.
    if watch, do: spawn_link(fn -> watch_loop(server, state, watch) end)

    Server.serve(report.tools,
      page_size: Keyword.get(opts, :page_size, 50),
      output: output,
      list_changed: watch != nil
    )
  end

  # Each tick stats the tool files (one native scan); files are compiled or read again only when
  # they changed, and the server hears only of changes.
  defp watch_loop(server, state, interval) do
    Process.sleep(interval)

    state =
      try do
        case CLI.reload(state) do
          :unchanged ->
            state

          {:changed, report, state} ->
            # The server stops using the old modules before they are deleted.
            Server.refresh(server, report.tools)
            CLI.forget_stale(state)
        end
      rescue
        e ->
          Logger.error("mcp: --watch: #{Exception.message(e)}")
          state
      end

    watch_loop(server, state, interval)
  end
end
