defmodule CMDC.Tool.CLI do
  @moduledoc """
  The tool set `mix cmdc.tools` and the MCP server (`mix cmdc.mcp`, `bin/cmdc-mcp`) serve, for
  the project they run in:

    1. the application's declared tools (`config :cmdc_tool, tools: [...]`, see
       `CMDC.Tool.Project`), compiled with the application;
    2. the library's examples, only with `examples: true` (`--examples`);
    3. what `CMDC.Tool.Discovery` finds: the paths given, the project's tool folders
       (`.cmdc/tools`, … when the project is trusted), the user's tool folders and plugins,
       Python and PowerShell scripts included;
    4. the tools of the MCP servers of `.mcp.json` (trusted projects) and the user's MCP configs
       (`mcp: false` skips them).

  The first of two tools with one name wins, in that order; the loser is reported.

  ## Errors

  Loading never fails: what could not be loaded is in the report's `errors` (`%{path,
  reason}`), `conflicts`, `untrusted` and `ignored`. Unknown options raise `ArgumentError`.
  """

  alias CMDC.Tool.CLI.Output
  alias CMDC.Tool.Project
  alias CMDC.Tool.Project.Unserved

  @options [:trust, :mcp, :examples, :cwd, :tools]

  @typedoc """
  What `load/2` reports: the modules to serve, one entry each, the problems, and every tool
  module of the project's own application(s) (`app_tools`, served or not: see `unserved/3`).
  """
  @type report :: %{
          tools: [module()],
          entries: [%{module: module(), kind: atom(), source: String.t()}],
          errors: [%{path: String.t(), reason: String.t()}],
          conflicts: [map()],
          untrusted: [map()],
          ignored: [map()],
          app_tools: [module()]
        }

  @doc """
  The tools of the project in `:cwd` (default: the current folder) plus `paths`, with the load
  report. Options: `:trust` (`true`/`false`/`nil`: trust the project for this run, never, or as
  the trust list says), `:mcp` (`false`: no MCP servers), `:examples`, `:cwd`, `:tools` (instead
  of the configured ones).
  """
  @spec load([String.t()], keyword()) :: report()
  def load(paths \\ [], opts \\ []), do: paths |> watch(opts) |> elem(0)

  @doc "Just the tool modules."
  @spec tools([String.t()], keyword()) :: [module()]
  def tools(paths \\ [], opts \\ []), do: load(paths, opts).tools

  @doc """
  Loads as `load/2` and returns `{report, state}`; `reload/1` takes the state and rescans the
  tool files (`cmdc-mcp --watch`).
  """
  @spec watch([String.t()], keyword()) :: {report(), map()}
  def watch(paths \\ [], opts \\ []) do
    opts = CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.CLI.watch/2")

    # The app's tool modules are read from its .beam files while discovery runs.
    cwd = opts[:cwd] || File.cwd!()
    app_tools = Task.async(fn -> Unserved.find([], cwd) end)

    Output.with_progress("discovering tools", fn ->
      project = Project.tools(Keyword.take(opts, [:tools, :examples]))
      {:changed, files} = CMDC.Tool.Discovery.rediscover(discovery_opts(paths, project, opts))
      mcp = mcp_servers(files.report, project, opts)

      state = %{
        files: files,
        project: project,
        mcp: mcp,
        app_tools: Task.await(app_tools, :infinity)
      }

      {report(state), state}
    end)
  end

  @doc """
  Rescans the tool files of a `watch/2` state: `:unchanged` (stat calls only: no file read,
  no compiler started), or `{:changed, report, state}` (only new and changed files compiled or
  read again). The MCP servers of the first load stay. Modules of the previous report that
  the new one dropped stay loaded until `forget_stale/1`.
  """
  @spec reload(map()) :: :unchanged | {:changed, report(), map()}
  def reload(state) do
    case CMDC.Tool.Discovery.rediscover(state.files) do
      {:unchanged, _} ->
        :unchanged

      {:changed, files} ->
        state = %{state | files: files}
        {:changed, report(state), state}
    end
  end

  @doc "Deletes the modules the last `reload/1` dropped (call it once nothing uses them)."
  @spec forget_stale(map()) :: map()
  def forget_stale(state), do: %{state | files: CMDC.Tool.Discovery.delete_stale(state.files)}

  @doc """
  Why `name` may be missing from the report, for an unknown-tool message: the load error of a
  file named like it (`broken` → `broken.ex`), else a count of the files that failed; and the
  project tool folders skipped as untrusted. `nil` when nothing explains it.
  """
  @spec load_failure(report(), String.t()) :: String.t() | nil
  def load_failure(report, name) do
    case Enum.reject([failed(report.errors, name), untrusted(report.untrusted)], &is_nil/1) do
      [] -> nil
      reasons -> Enum.join(reasons, "\n")
    end
  end

  defp failed([], _name), do: nil

  defp failed(errors, name) do
    case Enum.find(errors, &(Path.rootname(Path.basename(&1.path)) == name)) do
      %{path: path, reason: reason} ->
        "#{path} failed to load, so #{name} is not available: #{reason}"

      nil ->
        "#{failed_summary(errors)} failed to load (`mix cmdc.tools list` shows why)"
    end
  end

  @doc """
  What failed, counted: tool files apart from entries of `config :cmdc_tool, tools`.

      iex> CMDC.Tool.CLI.failed_summary([
      ...>   %{path: "config :cmdc_tool, tools", reason: "X is not a compiled module"},
      ...>   %{path: "a.py", reason: "..."},
      ...>   %{path: "b.ex", reason: "..."}
      ...> ])
      "2 tool file(s) and 1 configured tool(s)"
  """
  @spec failed_summary([map()]) :: String.t()
  def failed_summary(errors) do
    {config, files} = Enum.split_with(errors, &(&1.path == CMDC.Tool.Project.config_path()))

    [{files, "tool file(s)"}, {config, "configured tool(s)"}]
    |> Enum.reject(fn {list, _} -> list == [] end)
    |> Enum.map_join(" and ", fn {list, what} -> "#{length(list)} #{what}" end)
  end

  defp untrusted([]), do: nil

  defp untrusted(folders) do
    "not loaded, the project not being trusted: #{Enum.map_join(folders, ", ", & &1.path)} " <>
      "(`mix cmdc.tools trust` trusts it, --trust for one run)"
  end

  @doc """
  The line saying which tool modules of the project's own application(s) `report` does not
  serve, and the config line that would (`CMDC.Tool.Project.Unserved`); `nil` when there are
  none. With `name` (an unknown tool's name), the line only when one of them defines `name`,
  for the unknown-tool message. Options: `:cwd`.
  """
  @spec unserved(report(), String.t() | nil, keyword()) :: String.t() | nil
  def unserved(report, name \\ nil, opts \\ []) do
    cwd = opts[:cwd] || File.cwd!()
    # The line proposed keeps what the config serves, not an entry that is no module (a typo).
    configured =
      for m <- List.wrap(Application.get_env(:cmdc_tool, :tools, [])),
          is_atom(m) and Code.ensure_loaded?(m),
          do: m

    config_file = Unserved.config_file(cwd)

    served = MapSet.new(report.tools ++ configured)

    case {Enum.reject(report.app_tools, &MapSet.member?(served, &1)), name} do
      {[], _} -> nil
      {modules, nil} -> Unserved.hint(modules, configured, config_file)
      {modules, name} -> Unserved.call_hint(modules, name, configured, config_file)
    end
  end

  @doc "`path` relative to the current folder."
  @spec relative(Path.t() | nil) :: String.t()
  def relative(nil), do: "?"
  def relative(path), do: Path.relative_to(to_string(path), File.cwd!())

  defp discovery_opts(paths, project, opts) do
    examples = if opts[:examples], do: Project.example_paths(), else: []

    [
      paths: examples ++ paths,
      cwd: opts[:cwd] || File.cwd!(),
      reserved: project.tools,
      trust_project: opts[:trust]
    ]
  end

  defp report(%{files: %{report: report}, project: project, mcp: mcp} = state) do
    declared = Enum.map(project.tools, &%{module: &1, kind: :elixir, source: source(&1)})

    found =
      Enum.map(report.tools, fn t ->
        %{module: t.module, kind: kind(t), source: "#{t.provider}: #{relative(t.path)}"}
      end) ++ Enum.map(mcp.tools, &%{module: &1.module, kind: :mcp, source: mcp_source(&1)})

    errors = project.errors ++ report.errors ++ mcp.errors
    {conflicts, errors} = Enum.split_with(errors, &(&1.type == :conflict))

    {untrusted, ignored} =
      Enum.split_with(report.ignored ++ mcp.ignored, &(&1.type == :untrusted))

    %{
      tools: project.tools ++ Enum.map(report.tools ++ mcp.tools, & &1.module),
      entries: declared ++ found,
      errors: Enum.map(errors, &%{path: relative(&1.path), reason: own_reason(&1)}),
      conflicts: Enum.map(conflicts, &%{refused: relative(&1.path), reason: &1.reason}),
      untrusted: Enum.map(untrusted, &%{path: relative(&1.path), reason: &1.reason}),
      ignored: Enum.map(ignored, &%{path: relative(&1.path), reason: &1.reason}),
      app_tools: state.app_tools
    }
  end

  defp source(module) do
    if module in Project.examples(), do: "built-in example", else: "config"
  end

  # The servers of .mcp.json and the user's MCP configs (`CMDC.Tool.MCP.Servers`); `--no-mcp`
  # skips them. Their tools come after the files' (first wins).
  defp mcp_servers(report, project, opts) do
    if opts[:mcp] == false do
      %{tools: [], errors: [], ignored: []}
    else
      CMDC.Tool.MCP.Servers.load(
        cwd: opts[:cwd] || File.cwd!(),
        trust_project: opts[:trust],
        reserved: project.tools ++ Enum.map(report.tools, & &1.name)
      )
    end
  end

  # MCP config errors name their file first; the listing prints the path itself.
  defp own_reason(e), do: String.replace_prefix(e.reason, to_string(e.path) <> ": ", "")

  defp mcp_source(tool), do: "mcp server #{tool.server}: #{relative(tool.path)}"

  defp kind(%{kind: :script, path: path}),
    do: if(String.ends_with?(path, ".ps1"), do: :powershell, else: :python)

  defp kind(_), do: :elixir
end
