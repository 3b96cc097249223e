defmodule Mix.Tasks.Cmdc.Mcp do
  @shortdoc "Serves the project's tools to MCP clients over stdio"
  @moduledoc """
  Serves tools over the Model Context Protocol (JSON-RPC 2.0 on stdin/stdout).

      mix cmdc.mcp [--page-size N]

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

    {opts, _rest} = OptionParser.parse!(argv, strict: [page_size: :integer])
    tools = CMDC.Tool.CLI.tools()
    CMDC.Tool.MCP.Server.serve(tools, Keyword.take(opts, [:page_size]))
  end
end
