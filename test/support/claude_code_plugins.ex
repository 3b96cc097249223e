defmodule CMDC.Tool.ClaudeCodePlugins do
  @moduledoc false
  # Anthropic's own Claude Code plugins (github.com/anthropics/claude-code, `plugins/`),
  # installed in a test HOME as Claude Code lays them out: the plugin folder, an entry of
  # `~/.claude/plugins/installed_plugins.json`, and `enabledPlugins` in `~/.claude/settings.json`.
  #
  # The checkout keeps copies of their `hooks.json` and `plugin.json` only
  # (`test/support/claude_plugins/<plugin>/`). Their scripts, which the hooks run, are fetched
  # into the test cache outside the checkout (`CMDC.Tool.TestCache`) from a local copy of the
  # repository (`$CMDC_CLAUDE_CODE_REPO`: a git directory or a checkout; else the machine's
  # mirror) or by `git clone`; `fetch/0` says why when none is reachable, and tests skip with
  # that reason.

  @kept Path.expand("claude_plugins", __DIR__)
  @plugins ~w(security-guidance explanatory-output-style hookify ralph-wiggum)
  @marketplace "claude-code-plugins"
  @mirror "/work/.mirror/anthropics+claude-code/repo"

  def plugins, do: @plugins
  def marketplace, do: @marketplace
  def id(name), do: "#{name}@#{@marketplace}"

  @doc """
  Installs `names` under `home`. Options: `scripts: true` (the plugins' real files, fetched;
  `{:skip, reason}` when they cannot be), `enabled: true | false | nil` (nil: not named in
  settings), `layout: :cache` (`cache/<marketplace>/<plugin>/<version>/`, as installed from a
  marketplace) or `:marketplace` (`marketplaces/<marketplace>/plugins/<plugin>`, a directory
  marketplace's folder). Returns `{:ok, %{name => folder}}`.
  """
  def install(home, names, opts \\ []) do
    with {:ok, source} <- if(opts[:scripts], do: fetch(), else: {:ok, nil}) do
      roots = Map.new(names, &{&1, install_one(home, &1, source, opts)})
      {:ok, roots}
    end
  end

  defp install_one(home, name, source, opts) do
    version =
      CMDC.Tool.JSON.decode!(File.read!(Path.join([@kept, name, "plugin.json"])))["version"]

    root =
      case Keyword.get(opts, :layout, :cache) do
        :cache ->
          Path.join([home, ".claude/plugins/cache", @marketplace, name, version])

        :marketplace ->
          Path.join([home, ".claude/plugins/marketplaces", @marketplace, "plugins", name])
      end

    File.mkdir_p!(root)
    if source, do: File.cp_r!(Path.join(source, name), root)
    # The kept JSON wins over the fetched copy: the tests read what the checkout holds.
    File.mkdir_p!(Path.join(root, ".claude-plugin"))
    File.mkdir_p!(Path.join(root, "hooks"))

    File.cp!(
      Path.join([@kept, name, "plugin.json"]),
      Path.join(root, ".claude-plugin/plugin.json")
    )

    File.cp!(Path.join([@kept, name, "hooks.json"]), Path.join(root, "hooks/hooks.json"))
    register(home, id(name), root, version, Keyword.get(opts, :enabled, true))
    root
  end

  @doc "Adds an installation to `installed_plugins.json` and `enabledPlugins` (when not nil)."
  def register(home, id, root, version, enabled) do
    list = Path.join(home, ".claude/plugins/installed_plugins.json")
    installed = read_json(list, %{"version" => 2, "plugins" => %{}})

    entry = %{
      "scope" => "user",
      "installPath" => root,
      "version" => version,
      "installedAt" => "2026-11-28T00:00:00.000Z",
      "lastUpdated" => "2026-11-28T00:00:00.000Z"
    }

    write_json(list, put_in(installed, ["plugins", id], [entry]))

    unless enabled == nil do
      settings = Path.join(home, ".claude/settings.json")
      current = read_json(settings, %{})
      enabled_map = Map.put(current["enabledPlugins"] || %{}, id, enabled)
      write_json(settings, Map.put(current, "enabledPlugins", enabled_map))
    end
  end

  defp read_json(path, default) do
    case File.read(path) do
      {:ok, text} -> CMDC.Tool.JSON.decode!(text)
      {:error, _} -> default
    end
  end

  defp write_json(path, value) do
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, CMDC.Tool.JSON.encode!(value))
  end

  @doc "The folder holding the fetched `plugins/<name>` folders: `{:ok, dir}` or `{:skip, why}`."
  def fetch do
    dir = CMDC.Tool.TestCache.dir("claude-code-plugins")
    done = Path.join(dir, ".complete")

    if File.exists?(done) do
      {:ok, dir}
    else
      CMDC.Tool.TestCache.with_lock("claude-code-plugins", fn ->
        if File.exists?(done), do: {:ok, dir}, else: fetch_into(dir, done)
      end)
    end
  end

  defp fetch_into(dir, done) do
    File.rm_rf!(dir)
    File.mkdir_p!(dir)
    source = System.get_env("CMDC_CLAUDE_CODE_REPO") || @mirror

    result =
      cond do
        File.dir?(Path.join(source, "plugins")) -> copy_checkout(source, dir)
        File.exists?(Path.join(source, "HEAD")) -> archive(source, dir)
        true -> clone(dir)
      end

    case result do
      :ok ->
        File.write!(done, "")
        {:ok, dir}

      {:skip, why} ->
        File.rm_rf!(dir)
        {:skip, why}
    end
  end

  defp copy_checkout(source, dir) do
    Enum.each(@plugins, &File.cp_r!(Path.join([source, "plugins", &1]), Path.join(dir, &1)))
    :ok
  end

  defp archive(git_dir, dir) do
    paths = Enum.map(@plugins, &"plugins/#{&1}")
    # `git archive` of the plugins' folders only, unpacked without the `plugins/` level.
    script = ~s(git --git-dir="$0" archive HEAD "$@" | tar -x -C "#{dir}" --strip-components=1)

    case System.cmd("sh", ["-c", script, git_dir | paths], stderr_to_stdout: true) do
      {_, 0} -> check(dir)
      {out, status} -> {:skip, "git archive from #{git_dir} failed (#{status}): #{out}"}
    end
  end

  defp clone(dir) do
    tmp = dir <> ".clone"
    File.rm_rf!(tmp)
    url = "https://github.com/anthropics/claude-code.git"

    case System.cmd("timeout", ["120", "git", "clone", "--quiet", "--depth", "1", url, tmp],
           stderr_to_stdout: true
         ) do
      {_, 0} ->
        result = copy_checkout(tmp, dir)
        File.rm_rf!(tmp)
        result

      {out, status} ->
        File.rm_rf!(tmp)

        {:skip,
         "Anthropic's plugins are not reachable: no local copy (set CMDC_CLAUDE_CODE_REPO) " <>
           "and `git clone #{url}` failed (#{status}): #{String.slice(out, 0, 200)}"}
    end
  end

  defp check(dir) do
    missing = Enum.reject(@plugins, &File.dir?(Path.join(dir, &1)))
    if missing == [], do: :ok, else: {:skip, "the fetched copy lacks #{inspect(missing)}"}
  end
end
