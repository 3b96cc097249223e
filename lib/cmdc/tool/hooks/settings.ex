defmodule CMDC.Tool.Hooks.Settings do
  @moduledoc """
  The command hooks of the settings files as `CMDC.Tool.Runner` applies them by default: those
  of the user's files and, once the project is trusted, of the project's
  (`CMDC.Tool.Hooks.Config`) — the same hooks `mix cmdc.tools call` and the MCP server apply.

  The files are read once per project and options, and read again when one of them, or a trust
  list, changes: a call checks whether anything changed at most once a second (a digest of the
  files' contents), so a call costs a `:persistent_term` read, not a file read.

  The project is the current directory of the VM (your app's folder under `mix`, `iex -S mix`
  and a release started from it). An app that wants none of these hooks says so in its config,
  beside `tools:`:

      # config/runtime.exs
      config :cmdc_tool, settings_hooks: false

  A runner call can override either way with its `:settings_hooks` option: `false`, or the
  options of `CMDC.Tool.Hooks.Config.load/1` (`cwd:`, `trust_project:`, `home:`, …).

  Each (re)read that finds problems (a file that is not JSON, an unknown event, …) or hooks
  that are not active (the project is not trusted) logs them once, as a warning naming the
  file.

      iex> dir = Path.join(System.tmp_dir!(), "cmdc_settings_doc_#{System.unique_integer([:positive])}")
      iex> File.mkdir_p!(Path.join(dir, ".claude"))
      iex> File.write!(Path.join(dir, ".claude/settings.json"), ~s({"hooks": {"PreToolUse": [{"matcher": "echo", "hooks": [{"type": "command", "command": "exit 2"}]}]}}))
      iex> opts = [cwd: dir, home: Path.join(dir, "home"), trust_project: true]
      iex> [hook] = CMDC.Tool.Hooks.Settings.hooks(opts)
      iex> {hook.event_name, hook.command}
      {"PreToolUse", "exit 2"}
      iex> CMDC.Tool.Hooks.Settings.hooks(Keyword.put(opts, :trust_project, false)) |> length()
      0
      iex> File.rm_rf!(dir) |> is_list()
      true
  """

  require Logger

  alias CMDC.Tool.Hooks.{Config, Hook}

  @check_every_ms 1_000

  @doc """
  Whether the runner applies the settings files' hooks when not told: `false` only when the
  app's config says `config :cmdc_tool, settings_hooks: false`.
  """
  @spec enabled?() :: boolean()
  def enabled?, do: Application.get_env(:cmdc_tool, :settings_hooks, true) != false

  @doc """
  The hooks of a runner call given its `:settings_hooks` option (`nil` when not given): none
  for `false`; those of the current directory for `nil` (unless the config turned them off)
  and for `true` (even then); those of `CMDC.Tool.Hooks.Config.load/1`'s options for a keyword
  list.

      iex> CMDC.Tool.Hooks.Settings.for_run(false)
      {:ok, []}
      iex> {:error, message} = CMDC.Tool.Hooks.Settings.for_run(:yes)
      iex> message
      "invalid :settings_hooks option: :yes (expected false, true or the options of CMDC.Tool.Hooks.Config.load/1)"
  """
  @spec for_run(term()) :: {:ok, [Hook.t()]} | {:error, String.t()}
  def for_run(false), do: {:ok, []}
  def for_run(nil), do: {:ok, if(enabled?(), do: hooks([]), else: [])}
  def for_run(true), do: {:ok, hooks([])}

  def for_run(opts) when is_list(opts) do
    if Keyword.keyword?(opts), do: checked(opts), else: bad(opts)
  end

  def for_run(other), do: bad(other)

  defp checked(opts) do
    {:ok, hooks(opts)}
  rescue
    e in ArgumentError -> {:error, "invalid :settings_hooks option: " <> Exception.message(e)}
  end

  defp bad(other) do
    {:error,
     "invalid :settings_hooks option: #{inspect(other)} (expected false, true or the options " <>
       "of CMDC.Tool.Hooks.Config.load/1)"}
  end

  @doc """
  The active hooks of the settings files for `opts` (those of `CMDC.Tool.Hooks.Config.load/1`),
  read again only when a file changed. Problems and inactive hooks of a fresh read are logged.
  """
  @spec hooks(keyword()) :: [Hook.t()]
  def hooks(opts) do
    case cached(opts) do
      {:fresh, config} ->
        log(config, opts)
        Config.active(config)

      {:kept, config} ->
        Config.active(config)
    end
  end

  @doc """
  The `CMDC.Tool.Hooks.Config` for `opts` from the same cache, without logging: for a caller
  that reports problems its own way (the CLI prints them on stderr) before running calls.
  """
  @spec config(keyword()) :: Config.t()
  def config(opts), do: opts |> cached() |> elem(1)

  @doc """
  One line for the user when the project has hooks that are not active (it is not trusted), or
  `nil`.

      iex> CMDC.Tool.Hooks.Settings.inactive_note(%CMDC.Tool.Hooks.Config{})
      nil
  """
  @spec inactive_note(Config.t()) :: String.t() | nil
  def inactive_note(%Config{hooks: hooks}) do
    case Enum.reject(hooks, & &1.active) do
      [] ->
        nil

      inactive ->
        files = inactive |> Enum.map(& &1.source) |> Enum.uniq() |> Enum.join(", ")
        dir = inactive |> hd() |> Map.fetch!(:dir)

        "#{length(inactive)} hook(s) of #{files} are not active: the project #{dir} is not " <>
          "trusted (trust it with `mix cmdc.tools trust`, or pass --trust)"
    end
  end

  # `{:fresh, config}` when read now, `{:kept, config}` when the cached read still holds.
  # A read is kept in `:persistent_term` (a call reads it without copying; it is written only
  # when a file changed) with an atomic holding when it was last checked. The key does not hold
  # the current directory (reading it costs more than the rest of a call): the directory is
  # one of the things checked at most once a second.
  defp cached(opts) do
    key = {__MODULE__, Keyword.delete(opts, :cwd), Keyword.get(opts, :cwd, :current)}
    now = System.monotonic_time(:millisecond)

    case :persistent_term.get(key, nil) do
      {checked, digest, config} ->
        if now - :atomics.get(checked, 1) < @check_every_ms,
          do: {:kept, config},
          else: check(key, now, {checked, digest, config}, with_cwd(opts))

      nil ->
        opts = with_cwd(opts)
        read(key, now, digest(opts), opts)
    end
  end

  defp check(key, now, {checked, digest, config}, opts) do
    case digest(opts) do
      ^digest ->
        :atomics.put(checked, 1, now)
        {:kept, config}

      fresh ->
        read(key, now, fresh, opts)
    end
  end

  defp read(key, now, digest, opts) do
    config = Config.load(opts)
    checked = :atomics.new(1, signed: true)
    :atomics.put(checked, 1, now)
    :persistent_term.put(key, {checked, digest, config})
    {:fresh, config}
  end

  defp with_cwd(opts), do: Keyword.put_new_lazy(opts, :cwd, &File.cwd!/0)

  # What decides `Config.load/1`'s answer: the files' contents (missing ones too) and the
  # variables that locate them.
  defp digest(opts) do
    files = for path <- Config.sources(opts), do: {path, File.read(path)}
    :erlang.phash2({opts[:cwd], files, System.get_env("HOME"), System.get_env("CMDC_HOME")})
  end

  defp log(config, _opts) do
    for e <- config.errors,
        do:
          Logger.warning(
            "cmdc_tool: hooks: #{e.path}#{if e.hook, do: " " <> e.hook}: #{e.reason}"
          )

    if note = inactive_note(config), do: Logger.warning("cmdc_tool: " <> note)
    :ok
  end
end
