defmodule Mix.Tasks.Cmdc.Mcp do
  @shortdoc "Serves the project's tools to MCP clients over stdio or Streamable HTTP"
  @moduledoc """
  Serves the project's tools over the Model Context Protocol (JSON-RPC 2.0 on stdin/stdout, or
  Streamable HTTP with `--http PORT`).

      mix cmdc.mcp [--cwd DIR] [--trust] [--allow NAME]... [--no-mcp] [--examples]
                   [--watch MS] [--page-size N] [PATH...]
      mix cmdc.mcp --http 8765 [--host ADDRESS] [--token-file PATH] [--oauth-introspect URL] [PATH...]

  The same command as `bin/cmdc-mcp` (`CMDC.Tool.MCP.Main`; `--help` lists the options), inside
  Mix: it serves the tools your application declares (`config :cmdc_tool, tools: [...]`) and
  what discovery finds for the project (see `Mix.Tasks.Cmdc.Tools`).

  For MCP clients, prefer `bin/cmdc-mcp` of the cmdc_tool dependency: run from your
  application's folder (or given `--cwd`), it starts the VM from the application's `_build`
  without Mix when nothing changed (no compile check on the way to the first answer), and runs
  `mix compile` first when a source file changed. `.mcp.json` (Claude Code, in the project) or
  Claude Desktop's `claude_desktop_config.json`:

      {
        "mcpServers": {
          "my_agent": {
            "command": "/path/to/my_agent/deps/cmdc_tool/bin/cmdc-mcp",
            "args": ["--cwd", "/path/to/my_agent"]
          }
        }
      }

  (With `{:cmdc_tool, path: "../cmdc_tool"}`, the command is `../cmdc_tool/bin/cmdc-mcp`, as an
  absolute path.) `"command": "mix", "args": ["cmdc.mcp"]` works too where the client starts it
  in the project folder, at Mix's start-up cost.

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
