defmodule Mix.Tasks.Cmdc.Mcp do
  @shortdoc "Serves the project's tools to MCP clients over stdio or Streamable HTTP"
  @moduledoc """
  Serves tools over the Model Context Protocol (JSON-RPC 2.0 on stdin/stdout, or Streamable
  HTTP with `--http PORT`).

      mix cmdc.mcp [--watch MS] [--page-size N] [PATH...]
      mix cmdc.mcp --http 8765 [--host ADDRESS] [--token-file PATH] [--oauth-introspect URL] [PATH...]

  The same command as `bin/cmdc-mcp` (see `CMDC.Tool.MCP.Main` and `--help`), inside Mix.
  MCP clients should start `bin/cmdc-mcp`: it skips Mix entirely when the build is current.

  stdout carries protocol frames only; build output and logs go to stderr.
  """
  use Mix.Task

  @impl true
  def run(argv) do
    # Everything but protocol frames goes to stderr, starting with Mix's own output.
    Mix.shell(CMDC.Tool.StderrShell)
    Logger.configure_backend(:console, device: :standard_error)
    if argv in [["--help"], ["-h"]], do: Mix.Task.run("compile"), else: Mix.Task.run("app.start")

    case CMDC.Tool.MCP.Main.run(argv) do
      :ok -> :ok
      {:error, status} -> exit({:shutdown, status})
    end
  end
end
