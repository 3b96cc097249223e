defmodule Mix.Tasks.Cmdc.Tools do
  @shortdoc "Lists, describes, validates and calls tools"
  @moduledoc """
  The library's main job from a terminal.

      mix cmdc.tools list [PATH...]
      mix cmdc.tools schema [--format openai|openai_responses|anthropic|gemini|mcp] [--strict]
      mix cmdc.tools validate NAME JSON
      mix cmdc.tools call NAME JSON [--timeout MS] [--yes]
      mix cmdc.tools doctor
      mix cmdc.tools hooks [--trust]

  Tools come from the built-in examples, `examples/tools/`, the project's and user's tool folders
  and the paths given (see `CMDC.Tool.Discovery`), then the tools of the MCP servers configured in
  `.mcp.json` (trusted projects) and the user's MCP configs, named `server__tool` and listed with
  their server (see `CMDC.Tool.MCP.Servers`; `--no-mcp` skips them). `call` runs through `CMDC.Tool.Runner`: it
  prints partial results as they arrive, the result and the time taken, and exits with status 1
  on a tool error. Output is plain when not on a terminal.

  A tool that asks for approval (its policy, or result approval for its result) asks the person
  at the terminal: it shows the tool, its `meta/1` summary and the arguments (and the result),
  and runs (or shows) only on `y`. `--yes` approves everything, for scripted use; off a terminal
  without `--yes` such a tool is not run and the message names the flag.

  `call` applies the command hooks of the settings files (`.claude/settings.json`, ...; see
  `CMDC.Tool.Hooks.Config`; a project's only when trusted, e.g. with `--trust`) and prints their
  notes on stderr. `hooks` lists those hooks: event, matcher, command, time-out, file, and
  whether each is active.
  """
  use Mix.Task

  alias CMDC.Tool.CLI

  @switches [
    format: :string,
    strict: :boolean,
    timeout: :integer,
    trust: :boolean,
    yes: :boolean,
    mcp: :boolean
  ]

  @impl true
  def run(argv) do
    Mix.Task.run("app.start")
    {opts, args} = OptionParser.parse!(argv, strict: @switches)

    case args do
      ["list" | paths] -> CLI.list(paths, opts)
      ["schema" | paths] -> CLI.schema(paths, opts)
      ["validate", name, json | paths] -> CLI.validate(name, json, paths, opts)
      ["call", name, json | paths] -> CLI.call(name, json, paths, opts)
      ["doctor" | paths] -> CLI.doctor(paths, opts)
      ["hooks"] -> CLI.hooks(opts)
      _ -> Mix.raise("usage:\n" <> usage())
    end
    |> case do
      :ok -> :ok
      {:error, status} -> exit({:shutdown, status})
    end
  end

  defp usage do
    @moduledoc
    |> String.split("\n")
    |> Enum.filter(&String.starts_with?(&1, "    mix "))
    |> Enum.join("\n")
  end
end
