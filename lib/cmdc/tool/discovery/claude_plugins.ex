defmodule CMDC.Tool.Discovery.ClaudePlugins do
  @moduledoc """
  Claude Code's plugins, as Claude Code installs them: what `~/.claude/plugins/installed_plugins.json`
  lists (`{"version": 2, "plugins": {"name@marketplace": [{scope, installPath, version, …}]}}`,
  the files under `~/.claude/plugins/cache/<marketplace>/<plugin>/<version>/`), switched on by
  `enabledPlugins` (`{"name@marketplace": true}`) in `~/.claude/settings.json` and, when the
  project is trusted, the project's `.claude/settings.json` and `.claude/settings.local.json`
  (a later file wins, so a project can switch a plugin off). A `project`/`local` installation
  counts only in its `projectPath`.

  What an enabled plugin brings joins what the settings files bring:

    * its hooks (`hooks/hooks.json`, and `hooks` in `.claude-plugin/plugin.json`: a path, a list
      of paths, or inline) join the settings files' hooks (`CMDC.Tool.Hooks.Config`), labelled
      with the plugin, run with `CLAUDE_PLUGIN_ROOT` set and `${CLAUDE_PLUGIN_ROOT}` expanded;
    * its MCP servers (`.mcp.json` at its root, and `mcpServers` in `plugin.json`) join the
      configured servers (`CMDC.Tool.MCP.Servers`), named as Claude Code names them,
      `plugin:<plugin>:<server>` (tools `plugin_<plugin>_<server>__<tool>`, which hook matchers
      also see as `mcp__plugin_<plugin>_<server>__<tool>`);
    * its tool files (a `tools/` folder, or the paths of a `cmdc-plugin.json` at its root) join
      discovery (`CMDC.Tool.Discovery`, provider `claude-plugin:<name@marketplace>`).

  This library's own plugins (`~/.cmdc/plugins/<folder>/` with a `cmdc-plugin.json`) are
  listed too, as `<name>@cmdc` (scope `"cmdc"`): their hooks and MCP servers join the same way;
  their tools are discovery's own plugin source.

  A disabled or uninstalled plugin brings nothing. Every path a plugin names follows the plugin
  rule of this library's own plugins (relative, never `..`, resolving inside the plugin folder):
  a plugin that points outside its folder, names a missing file, or loops through symlinks is
  `:broken` and brings nothing, with its problem; the other plugins load.

  The files are read natively on a dirty I/O scheduler
  (`native/cmdc_tool_core/src/discovery/claude_plugins.rs`).

      iex> report = CMDC.Tool.Discovery.ClaudePlugins.load(home: "/nonexistent/home", cwd: "/nonexistent")
      iex> {report.plugins, report.problems}
      {[], []}
  """

  alias CMDC.Tool.Native

  defmodule Plugin do
    @moduledoc """
    One Claude Code plugin: `:id` (`name@marketplace`), `:name`, `:marketplace`, `:version`,
    `:scope`, `:root` (its folder), `:status` (`:enabled`, `:disabled`, `:broken`,
    `:not_installed`), `:decided_by` (the settings file whose `enabledPlugins` decided),
    `:description`, `:hooks` and `:mcp` (`[%{path, json}]`: the documents it brings),
    `:tools` (tool paths relative to its folder), `:problems` (why it is refused).
    """
    defstruct [
      :id,
      :name,
      :marketplace,
      :version,
      :scope,
      :root,
      :status,
      :decided_by,
      :description,
      hooks: [],
      mcp: [],
      tools: [],
      problems: []
    ]

    @type t :: %__MODULE__{}
  end

  @type report :: %{
          plugins: [Plugin.t()],
          problems: [%{path: String.t(), reason: String.t()}],
          settings: [String.t()]
        }

  @options [:cwd, :home, :cmdc_home, :trust_project, :trusted]
  @statuses %{
    "enabled" => :enabled,
    "disabled" => :disabled,
    "broken" => :broken,
    "not_installed" => :not_installed
  }

  @doc """
  Reads every installed plugin and the `enabledPlugins` of the settings files. Options: `:cwd`,
  `:home`, `:cmdc_home`, `:trust_project`, `:trusted` (as for `CMDC.Tool.Discovery`).
  `problems` are those of the files listing plugins (an unreadable installed list, a bad
  `enabledPlugins`); a plugin's own are in its `:problems`.
  """
  @spec load(keyword()) :: report()
  def load(opts \\ []) do
    CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Discovery.ClaudePlugins.load/1")
    native = CMDC.Tool.Discovery.native_opts(Keyword.take(opts, @options))

    case Native.discovery_claude_plugins(native) do
      {:ok, %{"plugins" => plugins, "problems" => problems, "settings" => settings}} ->
        %{
          plugins: Enum.map(plugins, &plugin/1),
          problems: Enum.map(problems, &%{path: &1["path"], reason: &1["reason"]}),
          settings: settings
        }

      {:error, message} ->
        raise ArgumentError, message
    end
  end

  @doc "The enabled plugins of a `load/1` report (what they bring is used)."
  @spec enabled(report()) :: [Plugin.t()]
  def enabled(%{plugins: plugins}), do: Enum.filter(plugins, &(&1.status == :enabled))

  @doc """
  The name Claude Code gives a plugin's MCP server: `plugin:<plugin>:<server>`.

      iex> CMDC.Tool.Discovery.ClaudePlugins.server_name("security-guidance", "review")
      "plugin:security-guidance:review"
  """
  @spec server_name(String.t(), String.t()) :: String.t()
  def server_name(plugin, server), do: "plugin:#{plugin}:#{server}"

  @doc """
  What a plugin brings, for listings: its hooks' events with their counts, its MCP servers'
  names (as `server_name/2` gives them), its tool paths.

      iex> plugin = %CMDC.Tool.Discovery.ClaudePlugins.Plugin{name: "p",
      ...>   hooks: [%{path: "h.json", json: %{"hooks" => %{"Stop" => [%{"hooks" => [%{}, %{}]}]}}}],
      ...>   mcp: [%{path: ".mcp.json", json: %{"mcpServers" => %{"db" => %{}}}}], tools: ["tools"]}
      iex> CMDC.Tool.Discovery.ClaudePlugins.brings(plugin)
      %{hooks: %{"Stop" => 2}, servers: ["plugin:p:db"], tools: ["tools"]}
  """
  @spec brings(Plugin.t()) :: %{hooks: map(), servers: [String.t()], tools: [String.t()]}
  def brings(%Plugin{} = p) do
    hooks =
      for %{json: %{"hooks" => events}} <- p.hooks,
          is_map(events),
          {event, groups} <- events,
          is_list(groups),
          %{"hooks" => list} when is_list(list) <- groups,
          reduce: %{} do
        acc -> Map.update(acc, event, length(list), &(&1 + length(list)))
      end

    servers =
      for %{json: %{"mcpServers" => servers}} <- p.mcp,
          is_map(servers),
          name <- Enum.sort(Map.keys(servers)),
          do: server_name(p.name, name)

    %{hooks: hooks, servers: servers, tools: p.tools}
  end

  defp plugin(map) do
    %Plugin{
      id: map["id"],
      name: map["name"],
      marketplace: map["marketplace"],
      version: map["version"],
      scope: map["scope"],
      root: map["root"],
      status: Map.fetch!(@statuses, map["status"]),
      decided_by: map["decided_by"],
      description: map["description"],
      hooks: Enum.map(map["hooks"], &%{path: &1["path"], json: &1["json"]}),
      mcp: Enum.map(map["mcp"], &%{path: &1["path"], json: &1["json"]}),
      tools: map["tools"],
      problems: map["problems"]
    }
  end
end
