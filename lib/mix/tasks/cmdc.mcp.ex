defmodule Mix.Tasks.Cmdc.Mcp do
  @shortdoc "Serves the project's tools to MCP clients over stdio"
  @moduledoc """
  Serves tools over the Model Context Protocol (JSON-RPC 2.0 on stdin/stdout).

      mix cmdc.mcp [--page-size N] [--watch MS] [PATH...]

  `--watch MS` looks for added, changed or removed tool files every MS milliseconds and sends
  `notifications/tools/list_changed` when the tools changed.

  stdout carries protocol frames only; build output and logs go to stderr. MCP clients should
  start the server with `bin/cmdc-mcp` (it compiles first, quietly, then runs this task):

      {"command": "/path/to/project/bin/cmdc-mcp"}
  """
  use Mix.Task

  @impl true
  def run(argv) do
    # Everything but protocol frames goes to stderr, starting with Mix's own output.
    Mix.shell(CMDC.Tool.StderrShell)
    Logger.configure_backend(:console, device: :standard_error)
    Mix.Task.run("app.start")

    {opts, paths} = OptionParser.parse!(argv, strict: [page_size: :integer, watch: :integer])
    load = fn -> CMDC.Tool.CLI.tools(paths) end
    if interval = opts[:watch], do: watch(interval)
    CMDC.Tool.MCP.Server.serve(load.(), Keyword.take(opts, [:page_size]) ++ [refresh: load])
  end

  # Asks the server to reload every `interval` ms; it notifies the client only on a change.
  defp watch(interval) do
    server = self()

    spawn_link(fn ->
      Stream.interval(interval) |> Enum.each(fn _ -> CMDC.Tool.MCP.Server.refresh(server) end)
    end)
  end
end
