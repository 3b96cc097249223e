defmodule CMDC.Tool.Hooks.Config do
  @moduledoc """
  Command hooks from the settings files users already have, in Claude Code's format:

      {"hooks": {"PreToolUse": [{"matcher": "Bash|write_file",
                                 "hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}]}}

  Files, in this order (the order hooks run in, and in which rewrites are applied — the last
  wins): `~/.claude/settings.json`, `~/.cmdc/settings.json` (or `$CMDC_HOME/settings.json`; a
  relative or empty `HOME`/`CMDC_HOME` is ignored and reported, see `CMDC.Tool.Home`), then
  the project's `.claude/settings.json`, `.claude/settings.local.json` and `.cmdc/settings.json`.
  A project's files run commands from a repository, so their hooks are active only when the
  project is trusted (the gate of `CMDC.Tool.Discovery.project_trusted?/1`); otherwise they are
  listed as inactive.

  Events: `PreToolUse`, `PostToolUse`, `PostToolUseFailure`, `SessionStart`, `SessionEnd`.
  `timeout` is in seconds (default 60). Hooks run with the project directory (`:cwd`) as
  working directory. A hook may carry cmdc_tool's own settings under a `"cmdc"` key, which
  Claude Code ignores: `"cmdc": {"failClosed": true}` makes the hook's failures (time-out, kill,
  bad exit, invalid JSON, oversize output, a matcher that cannot be run) deny the call rather
  than let it go on (`CMDC.Tool.Hooks.Failure`).

      {"type": "command", "command": "./guard.sh", "cmdc": {"failClosed": true}}

  Every matcher is compiled when the file is read (`CMDC.Tool.Hooks.Matcher`). One that cannot
  be run (not a valid regular expression, or a JavaScript-only construct such as look-around)
  is a problem in `errors`, and its group's hooks are kept with that matcher: listed by
  `mix cmdc.tools hooks`, and failing as their failure mode says whenever a tool is called.

      iex> config = CMDC.Tool.Hooks.Config.load(cwd: "/nonexistent/project", home: "/nonexistent/home")
      iex> {config.hooks, config.files, config.errors}
      {[], [], []}

  ## Errors

  `load/1` never fails: a file that is not valid JSON, an unknown event, a matcher that cannot
  be run, a hook without a command or of another `type`, a bad `timeout` or `cmdc` key —
  each is an entry `%{path, hook, reason}` in `errors`, and every other hook of every file still
  loads.
  """

  alias CMDC.Tool.Home
  alias CMDC.Tool.Hooks.{Command, Hook, Matcher}

  defstruct hooks: [], files: [], errors: []

  @type t :: %__MODULE__{
          hooks: [Hook.t()],
          files: [%{path: String.t(), source: :user | :project, active: boolean()}],
          errors: [%{path: String.t(), hook: String.t() | nil, reason: String.t()}]
        }

  @default_timeout_s 60
  @strict "; the hook fails closed until this is fixed"
  @options [:cwd, :home, :cmdc_home, :trust_project, :trusted, :paths, :fail_closed]

  @doc """
  Reads the settings files. Options: `:cwd` (the project, default the current directory),
  `:home`, `:cmdc_home`, `:trust_project`, `:trusted` (as for `CMDC.Tool.Discovery`), `:paths`
  (more settings files, treated as the user's), `:fail_closed` (`true`: every hook read fails
  closed, as with `"cmdc": {"failClosed": true}`; for a server that must never run a tool a
  guard could not judge; default the app's `config :cmdc_tool, hooks_fail_closed: true`, which
  so reaches `mix cmdc.tools call` and `cmdc-mcp` too).
  """
  @spec load(keyword()) :: t()
  def load(opts \\ []) do
    CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Hooks.Config.load/1")
    cwd = Path.expand(Keyword.get_lazy(opts, :cwd, &File.cwd!/0))
    # A project that is the home folder has one settings file, not two.
    files =
      cwd
      |> files(opts)
      |> Enum.uniq_by(&elem(&1, 1))
      |> Enum.filter(fn {_, path} -> File.regular?(path) end)

    project? = Enum.any?(files, &(elem(&1, 0) == :project))
    trusted? = project? and trusted?(cwd, opts)
    home_errors = for e <- Home.errors(opts), do: problem("(user folders)", nil, e.reason)

    Enum.reduce(files, %__MODULE__{errors: home_errors}, fn {source, path}, acc ->
      active = source == :user or trusted?
      {hooks, errors} = read(path, cwd, active)
      hooks = if fail_closed?(opts), do: close(hooks), else: hooks

      %{
        acc
        | hooks: acc.hooks ++ hooks,
          files: acc.files ++ [%{path: path, source: source, active: active}],
          errors: acc.errors ++ errors
      }
    end)
  end

  @doc """
  `hooks` with every command hook made fail-closed (the runner's `hooks_fail_closed: true`,
  `load/1`'s `fail_closed: true`); Elixir hooks always are.
  """
  @spec close([Hook.t()]) :: [Hook.t()]
  def close(hooks), do: Enum.map(hooks, &%{&1 | fail_closed: true})

  defp fail_closed?(opts) do
    Keyword.get_lazy(opts, :fail_closed, fn ->
      Application.get_env(:cmdc_tool, :hooks_fail_closed, false)
    end) == true
  end

  @doc false
  # Every file whose contents decide what `load/1` answers for `opts`, present or not: the
  # settings files and the trust lists (`CMDC.Tool.Hooks.Settings` reads them to see a change).
  def sources(opts) do
    cwd = Path.expand(Keyword.get_lazy(opts, :cwd, &File.cwd!/0))

    home_dir =
      case Home.user_home(opts) do
        {:ok, home} -> Path.join(home, ".cmdc")
        {:error, _} -> nil
      end

    trust = for dir <- Enum.uniq([Home.cmdc_dir(opts), home_dir]), dir, do: dir <> "/trusted.json"
    Enum.map(files(cwd, opts), &elem(&1, 1)) ++ trust
  end

  @doc "The active hooks of `load/1` (what a runner should use)."
  @spec active(t()) :: [Hook.t()]
  def active(%__MODULE__{hooks: hooks}), do: Enum.filter(hooks, & &1.active)

  # The home folders go through `CMDC.Tool.Home`: a relative or empty `HOME`/`CMDC_HOME` is
  # ignored (a repository's files would become the user's, always active), and a project that
  # is the home folder holds the user's own files.
  defp files(cwd, opts) do
    home =
      case Home.user_home(opts) do
        {:ok, dir} -> dir
        {:error, _} -> nil
      end

    user = fn dir, file -> if dir, do: [{:user, Path.join(dir, file)}], else: [] end
    extra = Enum.map(Keyword.get(opts, :paths, []), &{:user, Path.expand(&1)})
    project_source = if home && Home.home?(cwd, home), do: :user, else: :project

    user.(home, ".claude/settings.json") ++
      user.(Home.cmdc_dir(opts), "settings.json") ++
      extra ++
      for(
        file <- [".claude/settings.json", ".claude/settings.local.json", ".cmdc/settings.json"],
        do: {project_source, Path.join(cwd, file)}
      )
  end

  defp trusted?(cwd, opts) do
    CMDC.Tool.Discovery.project_trusted?(
      [cwd: cwd] ++ Keyword.take(opts, [:home, :cmdc_home, :trust_project, :trusted])
    )
  end

  defp read(path, cwd, active) do
    with {:ok, text} <- File.read(path),
         {:ok, json} <- CMDC.Tool.JSON.decode(text) do
      hooks_of(json, path, cwd, active)
    else
      {:error, reason} when is_binary(reason) ->
        {[], [problem(path, nil, "not valid JSON: #{reason}")]}

      {:error, reason} ->
        {[], [problem(path, nil, "cannot be read: #{:file.format_error(reason)}")]}
    end
  end

  defp hooks_of(%{"hooks" => events}, path, cwd, active) when is_map(events) do
    events
    |> Enum.sort_by(fn {name, _} -> order(name) end)
    |> Enum.reduce({[], []}, fn {name, groups}, {hooks, errors} ->
      {h, e} = event(name, groups, path, cwd, active)
      {hooks ++ h, errors ++ e}
    end)
  end

  defp hooks_of(%{"hooks" => other}, path, _cwd, _active),
    do:
      {[],
       [
         problem(
           path,
           nil,
           "\"hooks\" must be an object of events (got #{inspect(other, limit: 5)})"
         )
       ]}

  defp hooks_of(%{}, _path, _cwd, _active), do: {[], []}

  defp hooks_of(_, path, _cwd, _active),
    do: {[], [problem(path, nil, "the settings must be a JSON object")]}

  @order ~w(SessionStart PreToolUse PostToolUse PostToolUseFailure SessionEnd)
  defp order(name), do: Enum.find_index(@order, &(&1 == name)) || length(@order)

  defp event(name, groups, path, cwd, active) do
    case {Map.fetch(Command.events(), name), groups} do
      {:error, _} ->
        known = Command.events() |> Map.keys() |> Enum.sort()

        hint =
          case CMDC.Tool.Options.suggest(name, known) do
            [best | _] -> " (did you mean #{inspect(best)}?)"
            [] -> ""
          end

        why =
          "unknown event #{inspect(name)}#{hint}: cmdc_tool runs #{Enum.join(known, ", ")}; " <>
            "its hooks are ignored"

        {[], [problem(path, name, why)]}

      {{:ok, event}, groups} when is_list(groups) ->
        groups
        |> Enum.with_index()
        |> Enum.reduce({[], []}, fn {group, g}, {hooks, errors} ->
          {h, e} = group(group, {name, event, g}, path, cwd, active)
          {hooks ++ h, errors ++ e}
        end)

      {_, _} ->
        {[], [problem(path, name, "#{name} must be a list of matcher groups")]}
    end
  end

  defp group(%{"hooks" => list} = group, {name, event, g}, path, cwd, active)
       when is_list(list) do
    where = "#{name}[#{g}]"

    {matcher, matcher_errors} =
      case Matcher.parse_kept(group["matcher"]) do
        {:ok, matcher} ->
          {matcher, []}

        {:error, matcher, why} ->
          {matcher, [problem(path, where, why <> "; its hooks fail whenever a tool is called")]}
      end

    list
    |> Enum.with_index()
    |> Enum.reduce({[], matcher_errors}, fn {spec, i}, {hooks, errors} ->
      base = %Hook{
        kind: :command,
        events: [event],
        matcher: matcher,
        dir: cwd,
        source: path,
        event_name: name,
        active: active
      }

      case command(spec, base, "#{where}.hooks[#{i}]") do
        {:ok, hook} -> {hooks ++ [hook], errors}
        {:ok, hook, at, why} -> {hooks ++ [hook], errors ++ [problem(path, at, why)]}
        {:error, hook_name, why} -> {hooks, errors ++ [problem(path, hook_name, why)]}
      end
    end)
  end

  defp group(_group, {name, _event, g}, path, _cwd, _active),
    do: {[], [problem(path, "#{name}[#{g}]", "a matcher group needs a \"hooks\" list")]}

  defp command(%{"type" => "command", "command" => cmd} = spec, base, where)
       when is_binary(cmd) and cmd != "" do
    with {:ok, t} <- timeout(Map.get(spec, "timeout", @default_timeout_s), where) do
      label = "#{base.source} #{where} (#{Matcher.source(base.matcher)}: #{short(cmd)})"
      hook = %{base | command: cmd, timeout_ms: round(t * 1000), label: label}

      # A "cmdc" key that cannot be read was meant to change how the hook fails: the hook
      # loads fail-closed (the stricter reading), and the problem is reported.
      case own(Map.get(spec, "cmdc", %{})) do
        {:ok, closed} -> {:ok, %{hook | fail_closed: closed}}
        {:error, why} -> {:ok, %{hook | fail_closed: true}, where, why <> @strict}
      end
    end
  end

  defp command(%{"type" => "command"}, _base, where),
    do: {:error, where, "the hook has no command (\"command\" must be a non-empty string)"}

  defp command(%{"type" => type}, _base, where),
    do: {:error, where, "hook type #{inspect(type)} is not supported (only \"command\")"}

  defp command(_spec, _base, where),
    do: {:error, where, "a hook must be an object with \"type\": \"command\" and a \"command\""}

  defp timeout(t, _where) when is_number(t) and t > 0, do: {:ok, t}

  defp timeout(t, where),
    do: {:error, where, "timeout must be a positive number of seconds (got #{inspect(t)})"}

  # cmdc_tool's own keys of a hook (`"cmdc": {...}`): `failClosed`.
  defp own(%{} = cmdc) do
    case Map.keys(cmdc) -- ["failClosed"] do
      [] ->
        case Map.get(cmdc, "failClosed", false) do
          closed when is_boolean(closed) ->
            {:ok, closed}

          other ->
            {:error, "cmdc.failClosed must be true or false (got #{inspect(other)})"}
        end

      [key | _] ->
        hint =
          case CMDC.Tool.Options.suggest(key, ["failClosed"]) do
            [] -> ""
            [near | _] -> " (did you mean #{inspect(near)}?)"
          end

        {:error, "unknown key #{inspect(key)} in \"cmdc\"#{hint}; known: \"failClosed\""}
    end
  end

  defp own(other),
    do:
      {:error,
       "\"cmdc\" must be an object such as {\"failClosed\": true} (got #{inspect(other)})"}

  defp short(cmd),
    do: if(String.length(cmd) > 60, do: String.slice(cmd, 0, 57) <> "...", else: cmd)

  defp problem(path, hook, reason), do: %{path: path, hook: hook, reason: reason}
end
