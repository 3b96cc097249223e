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

  Then the hooks of the enabled Claude Code plugins (`CMDC.Tool.Discovery.ClaudePlugins`), each
  labelled with its plugin, `${CLAUDE_PLUGIN_ROOT}` in its command replaced by the plugin's
  folder and `CLAUDE_PLUGIN_ROOT` set when it runs (`plugins: false` leaves them out).

  Events: those of `CMDC.Tool.Hooks.Events` (`SessionStart`, `UserPromptSubmit`, `PreToolUse`,
  `PostToolUse`, `PostToolUseFailure`, `Notification`, `PreCompact`, `Stop`, `SubagentStop`,
  `SessionEnd`). A hook entry: `type` (`"command"`), `command`, `timeout` in seconds (default
  60), `if` (a permission rule, `CMDC.Tool.Hooks.Condition`), `async` / `asyncRewake` (run in
  the background, `CMDC.Tool.Hooks.Background`) with `rewakeMessage` and `rewakeSummary`,
  `statusMessage`, `once`, `shell` (`"bash"`). Hooks run with the project directory (`:cwd`)
  as working directory. A hook may carry cmdc_tool's own settings under a `"cmdc"` key, which
  Claude Code ignores: `"cmdc": {"failClosed": true}` makes the hook's failures (time-out,
  kill, bad exit, invalid JSON, oversize output, a matcher that cannot be run) deny the call
  rather than let it go on (`CMDC.Tool.Hooks.Failure`).

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
  be run, a hook without a command or of another `type`, a bad `timeout`, `if` or `cmdc` key, a
  broken plugin — each is an entry `%{path, hook, reason}` in `errors`, and every other hook of
  every file still loads. An unknown key of a hook or a group is reported the same way, and the
  hook loads without it.
  """

  alias CMDC.Tool.Discovery.ClaudePlugins
  alias CMDC.Tool.Home
  alias CMDC.Tool.Hooks.{Condition, Events, Hook, Matcher}

  defstruct hooks: [], files: [], errors: []

  @type t :: %__MODULE__{
          hooks: [Hook.t()],
          files: [
            %{path: String.t(), source: :user | :project | :plugin, active: boolean()}
          ],
          errors: [%{path: String.t(), hook: String.t() | nil, reason: String.t()}]
        }

  @default_timeout_s 60
  @strict "; the hook fails closed until this is fixed"
  @doc """
  Reads the settings files. Options: `:cwd` (the project, default the current directory),
  `:home` (given, the hooks also run with it as `HOME`), `:cmdc_home`, `:trust_project`,
  `:trusted` (as for `CMDC.Tool.Discovery`), `:paths` (more settings files, treated as the
  user's), `:plugins` (`false`: no Claude Code plugins' hooks; default `true`), `:fail_closed`
  (`true`: every hook read fails closed, as with `"cmdc": {"failClosed": true}`; for a server
  that must never run a tool a guard could not judge; default the app's `config :cmdc_tool,
  hooks_fail_closed: true`, which so reaches `mix cmdc.tools call` and `cmdc-mcp` too).
  """
  @options [:cwd, :home, :cmdc_home, :trust_project, :trusted, :paths, :plugins, :fail_closed]

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
    env = home_env(opts)

    config =
      Enum.reduce(files, %__MODULE__{errors: home_errors}, fn {source, path}, acc ->
        active = source == :user or trusted?

        {hooks, errors} =
          read(path, %Hook{kind: :command, dir: cwd, source: path, active: active, env: env})

        %{
          acc
          | hooks: acc.hooks ++ hooks,
            files: acc.files ++ [%{path: path, source: source, active: active}],
            errors: acc.errors ++ errors
        }
      end)

    config =
      if Keyword.get(opts, :plugins, true) and match?({:ok, _}, Home.user_home(opts)),
        do: plugins(config, cwd, opts, env),
        else: config

    if fail_closed?(opts), do: %{config | hooks: close(config.hooks)}, else: config
  end

  # A plugin's folder, or (not installed) the settings file that enabled it.
  defp where(%{root: root}) when root not in [nil, ""], do: root
  defp where(%{decided_by: file, id: id}), do: file || id

  # Hooks read from a home given by the caller run with that `HOME` (the home their files, and
  # the state a plugin keeps under `~/.claude`, belong to); otherwise they inherit the VM's.
  defp home_env(opts) do
    with true <- Keyword.has_key?(opts, :home),
         {:ok, home} <- Home.user_home(opts) do
      %{"HOME" => home}
    else
      _ -> %{}
    end
  end

  # The enabled Claude Code plugins' hooks, after the settings files'; a broken plugin (and a
  # bad installed list) is a problem, and brings nothing.
  defp plugins(config, cwd, opts, env) do
    report =
      ClaudePlugins.load(Keyword.take(opts, [:cwd, :home, :cmdc_home, :trust_project, :trusted]))

    problems =
      for(p <- report.problems, do: problem(p.path, nil, p.reason)) ++
        for %{status: status} = p <- report.plugins,
            status in [:broken, :not_installed],
            do: problem(where(p), "plugin #{p.id}", Enum.join(p.problems, "; "))

    Enum.reduce(ClaudePlugins.enabled(report), %{config | errors: config.errors ++ problems}, fn
      plugin, acc ->
        Enum.reduce(plugin.hooks, acc, fn %{path: path, json: json}, acc ->
          base = %Hook{
            kind: :command,
            dir: cwd,
            source: path,
            active: true,
            plugin: plugin.id,
            env: Map.put(env, "CLAUDE_PLUGIN_ROOT", plugin.root)
          }

          {hooks, errors} = hooks_of(json, path, base)

          %{
            acc
            | hooks: acc.hooks ++ hooks,
              files:
                acc.files ++ [%{path: path, source: :plugin, plugin: plugin.id, active: true}],
              errors: acc.errors ++ errors
          }
        end)
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

  defp read(path, base) do
    with {:ok, text} <- File.read(path),
         {:ok, json} <- CMDC.Tool.JSON.decode(text) do
      hooks_of(json, path, base)
    else
      {:error, reason} when is_binary(reason) ->
        {[], [problem(path, nil, "not valid JSON: #{reason}")]}

      {:error, reason} ->
        {[], [problem(path, nil, "cannot be read: #{:file.format_error(reason)}")]}
    end
  end

  defp hooks_of(%{"hooks" => events}, path, base) when is_map(events) do
    events
    |> Enum.sort_by(fn {name, _} -> Events.order(name) end)
    |> Enum.reduce({[], []}, fn {name, groups}, {hooks, errors} ->
      {h, e} = event(name, groups, path, base)
      {hooks ++ h, errors ++ e}
    end)
  end

  defp hooks_of(%{"hooks" => other}, path, _base),
    do:
      {[],
       [
         problem(
           path,
           nil,
           "\"hooks\" must be an object of events (got #{inspect(other, limit: 5)})"
         )
       ]}

  defp hooks_of(%{}, _path, _base), do: {[], []}

  defp hooks_of(_, path, _base),
    do: {[], [problem(path, nil, "the settings must be a JSON object")]}

  defp event(name, groups, path, base) do
    case {Events.fetch(name), groups} do
      {{:not_run, _}, _} ->
        {[],
         [
           problem(
             path,
             name,
             "#{name} is a Claude Code event cmdc_tool does not run " <>
               "(it runs #{Enum.join(Events.names(), ", ")}); its hooks are ignored"
           )
         ]}

      {:error, _} ->
        {[],
         [
           problem(
             path,
             name,
             "unknown event #{inspect(name)}#{did_you_mean(name, Events.names())}: " <>
               "cmdc_tool runs #{Enum.join(Events.names(), ", ")}; its hooks are ignored"
           )
         ]}

      {{:ok, event}, groups} when is_list(groups) ->
        groups
        |> Enum.with_index()
        |> Enum.reduce({[], []}, fn {group, g}, {hooks, errors} ->
          {h, e} = group(group, {name, event, g}, path, base)
          {hooks ++ h, errors ++ e}
        end)

      {_, _} ->
        {[], [problem(path, name, "#{name} must be a list of matcher groups")]}
    end
  end

  @group_keys ["matcher", "hooks"]

  defp group(%{"hooks" => list} = group, {name, event, g}, path, base)
       when is_list(list) do
    where = "#{name}[#{g}]"
    unknown = unknown_keys(group, @group_keys, path, where)

    {matcher, matcher_errors} =
      case Matcher.parse_kept(group["matcher"]) do
        {:ok, matcher} ->
          {matcher, []}

        {:error, matcher, why} ->
          {matcher, [problem(path, where, why <> "; its hooks fail whenever a tool is called")]}
      end

    list
    |> Enum.with_index()
    |> Enum.reduce({[], unknown ++ matcher_errors}, fn {spec, i}, {hooks, errors} ->
      base = %{base | events: [event], matcher: matcher, event_name: name}

      case command(spec, base, "#{where}.hooks[#{i}]") do
        {:ok, hook, notes} -> {hooks ++ [hook], errors ++ notes}
        {:error, hook_name, why} -> {hooks, errors ++ [problem(path, hook_name, why)]}
      end
    end)
  end

  defp group(_group, {name, _event, g}, path, _base),
    do: {[], [problem(path, "#{name}[#{g}]", "a matcher group needs a \"hooks\" list")]}

  # The keys of a hook entry Claude Code defines today; `statusMessage` and `once` are read
  # and have no effect here (no spinner; a hook runs every time).
  @hook_keys ~w(type command timeout if async asyncRewake rewakeMessage rewakeSummary
                statusMessage once shell cmdc)

  defp command(%{"type" => "command", "command" => cmd} = spec, base, where)
       when is_binary(cmd) and cmd != "" do
    with {:ok, timeout_ms} <- timeout(spec, where),
         {:ok, condition} <- wrap(Condition.parse(spec["if"]), where),
         {:ok, async} <- async(spec, where),
         {:ok, rewake} <- rewake(spec, where),
         :ok <- shell(spec, where) do
      cmd = expand_root(cmd, base.env)
      plugin = if base.plugin, do: "plugin #{base.plugin} ", else: ""
      rule = if condition, do: " if #{condition.source}", else: ""

      label =
        "#{plugin}#{base.source} #{where} (#{Matcher.source(base.matcher)}#{rule}: #{short(cmd)})"

      hook = %{
        base
        | command: cmd,
          timeout_ms: timeout_ms,
          label: label,
          condition: condition,
          async: async,
          rewake: rewake
      }

      notes = unknown_keys(spec, @hook_keys, base.source, where)

      # A "cmdc" key that cannot be read was meant to change how the hook fails: the hook
      # loads fail-closed (the stricter reading), and the problem is reported.
      case own(Map.get(spec, "cmdc", %{})) do
        {:ok, closed} ->
          {:ok, %{hook | fail_closed: closed}, notes}

        {:error, why} ->
          {:ok, %{hook | fail_closed: true},
           notes ++ [problem(base.source, where, why <> @strict)]}
      end
    end
  end

  defp command(%{"type" => "command"}, _base, where),
    do: {:error, where, "the hook has no command (\"command\" must be a non-empty string)"}

  defp command(%{"type" => type}, _base, where),
    do: {:error, where, "hook type #{inspect(type)} is not supported (only \"command\")"}

  defp command(_spec, _base, where),
    do: {:error, where, "a hook must be an object with \"type\": \"command\" and a \"command\""}

  defp timeout(spec, where) do
    case Map.get(spec, "timeout", @default_timeout_s) do
      t when is_number(t) and t > 0 -> {:ok, round(t * 1000)}
      t -> {:error, where, "timeout must be a positive number of seconds (got #{inspect(t)})"}
    end
  end

  defp wrap({:ok, value}, _where), do: {:ok, value}
  defp wrap({:error, why}, where), do: {:error, where, why <> "; the hook is ignored"}

  defp async(spec, where) do
    case {Map.get(spec, "async", false), Map.get(spec, "asyncRewake", false)} do
      {a, r} when not is_boolean(a) or not is_boolean(r) ->
        {:error, where, "async and asyncRewake must be true or false"}

      {_, true} ->
        {:ok, :rewake}

      {true, false} ->
        {:ok, :async}

      _ ->
        {:ok, nil}
    end
  end

  defp rewake(spec, where) do
    texts = Map.take(spec, ["rewakeMessage", "rewakeSummary"])

    if Enum.all?(texts, fn {_, v} -> is_binary(v) end),
      do: {:ok, %{message: texts["rewakeMessage"], summary: texts["rewakeSummary"]}},
      else: {:error, where, "rewakeMessage and rewakeSummary must be strings"}
  end

  # Commands run with `sh -c` (POSIX shell); a hook asking for PowerShell is not run.
  defp shell(spec, where) do
    case Map.get(spec, "shell", "bash") do
      s when s in ["bash", "sh"] -> :ok
      other -> {:error, where, "shell #{inspect(other)} is not supported (hooks run with sh -c)"}
    end
  end

  # Claude Code substitutes the plugin's folder into its commands (and sets the variable).
  defp expand_root(cmd, %{"CLAUDE_PLUGIN_ROOT" => root} = _env),
    do: String.replace(cmd, "${CLAUDE_PLUGIN_ROOT}", root)

  defp expand_root(cmd, _env), do: cmd

  defp unknown_keys(map, known, path, where) do
    for key <- map |> Map.keys() |> Enum.sort(), key not in known do
      problem(
        path,
        where,
        "unknown key #{inspect(key)} (ignored; the keys are #{Enum.join(known, ", ")})" <>
          did_you_mean(key, known)
      )
    end
  end

  defp did_you_mean(word, known) do
    case CMDC.Tool.Options.suggest(word, known) do
      [best | _] -> " (did you mean #{inspect(best)}?)"
      [] -> ""
    end
  end

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
