defmodule Mix.Tasks.Cmdc.Tools do
  @shortdoc "Lists, describes, validates and calls the project's tools; manages trust"
  @moduledoc """
  Your application's tools from a terminal, run from the application's folder.

      mix cmdc.tools list [PATH...] [--trust] [--no-mcp] [--examples]
      mix cmdc.tools schema [PATH...] [--format FORMAT] [--strict] [--trust] [--no-mcp] [--examples]
      mix cmdc.tools validate NAME JSON [PATH...] [--trust] [--no-mcp] [--examples]
      mix cmdc.tools call NAME JSON [PATH...] [--timeout MS] [--yes] [--allow NAME]... [--trust] [--no-mcp] [--examples]
      mix cmdc.tools doctor [PATH...] [--trust] [--no-mcp] [--examples]
      mix cmdc.tools trust [PATH]
      mix cmdc.tools untrust [PATH]
      mix cmdc.tools trusted
      mix cmdc.tools hooks [--trust]
      mix cmdc.tools plugins [--trust]

  `mix cmdc.tools SUBCOMMAND --help` prints one subcommand's usage.

  ## Which tools

  The project you run it in is the tool set (see `CMDC.Tool.CLI`): the tool modules your
  application declares (`config :cmdc_tool, tools: [MyAgent.Tools.Weather]` in
  `config/runtime.exs`, see `CMDC.Tool.Project`), then what discovery finds — the PATHs given, the project's `.cmdc/tools`
  (and `.claude/tools`, `.codex/tools`) once the project is trusted, your user folders
  (`~/.cmdc/tools`) and plugins — then the tools of the MCP servers in `.mcp.json` (trusted
  projects) and your user MCP configs, named `server__tool` (`--no-mcp` skips them). The
  library's example tools come only with `--examples`.

  A module of your application (umbrella apps included) compiled with `@behaviour CMDC.Tool`
  that none of these serves is named by `list` and `doctor`, on one line with the config line
  that would serve it (`MyAgent.Tools.Forecast implements CMDC.Tool but is not served: add it to
  config/runtime.exs: config :cmdc_tool, tools: [MyAgent.Tools.Forecast]`; the file that
  already sets `config :cmdc_tool` when one does); `call` and
  `validate` of the name such a module's `name/0` returns say which module defines it (exit
  status 3 still). The modules are read from your build's `.beam` files, not loaded; only for
  an unknown name is `name/0` run, bounded (1 s, a failure counts as no answer). See
  `CMDC.Tool.Project.Unserved`.

  ## Doctor

  `doctor` lists what would surprise a user: your app's tool modules nothing serves (first, as
  above), names providers rewrite or refuse, schemas OpenAI
  strict mode or Gemini change, missing interpreters, and script caches the next start will not
  use, judged by the loader's own rule (`CMDC.Tool.Script.cache_status/2`: the script's content
  hash and this user's HMAC tag, never file times), so an edit that kept the old mtime or a
  `.tool.json` edited by hand or shipped in a repository is reported.

  ## Trust

  A project's tool folders and `.mcp.json` hold code that runs on your machine, so they load
  only in a trusted project: `mix cmdc.tools trust` records the current folder (or PATH) in
  `~/.cmdc/trusted.json` (`$CMDC_HOME/trusted.json` when set), `untrust` removes it, `trusted`
  lists them; `--trust` trusts for one run. `trust_project: true` is the same from Elixir.

  ## Approval

  `call` asks the person at the terminal before running a tool whose policy asks (Python and
  PowerShell tools ask once by default), showing the tool, its `meta/1` summary and the
  arguments (and the result, where result approval applies). `--yes` approves everything, for
  scripts; `--allow NAME` runs that tool without asking. Off a terminal without either, such a
  tool is not run and the message names the flags.

  ## Exit status

  One convention for every subcommand; messages about failures go to stderr.

    * `0` - done.
    * `1` - `call`: the tool's result is an error; `validate`: the arguments are invalid;
      `trust`/`untrust`: the trust list could not be changed; `plugins`: a Claude Code plugin
      is refused (broken, or enabled but not installed).
    * `2` - usage error: unknown subcommand (with "did you mean"), unknown option, missing
      arguments.
    * `3` - unknown tool (`validate`, `call`): the message names close names, the module of
      your app that defines the name when it is not served, and, when a tool file failed to
      load, that file and why.
    * `4` - `list`, `doctor`: a tool file or configured tool failed to load (the listing says
      which and why).

  ## Hooks

  `call` applies the command hooks of the settings files (`.claude/settings.json`, ...; see
  `CMDC.Tool.Hooks.Config`; a project's only when trusted, e.g. with `--trust`) and prints their
  notes on stderr. `hooks` lists those hooks: event, matcher, command, time-out, file, and
  whether each is active. The hooks of enabled Claude Code plugins join them; `plugins` lists
  the plugins installed (`~/.claude/plugins`), enabled or not, and what each brings
  (`docs/PLUGINS.md`).
  """
  use Mix.Task

  alias CMDC.Tool.CLI.Commands

  @impl true
  def run(argv) do
    status =
      case Commands.parse(argv) do
        {:help, text} ->
          IO.write(text)
          0

        {:error, message} ->
          IO.puts(:stderr, message)
          2

        {:run, command, args, opts} ->
          # Only the commands that load tools need the application (and its config) started.
          if Commands.loads_tools?(command.name),
            do: Mix.Task.run("app.start"),
            else: Mix.Task.run("app.config")

          Commands.run(command, args, opts)
      end

    if status != 0, do: exit({:shutdown, status})
    :ok
  end
end
