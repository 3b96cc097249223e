defmodule CMDC.Tool.Discovery do
  @moduledoc """
  Discovers tools on disk: the user's and the project's tool folders, installed plugins and
  paths given by the caller, the way the custom-tool loaders of coding agents do.

  The file-system scan (walking folders, resolving real paths, classifying files, reading
  mtimes, metadata, plugin manifests and the trust list) runs natively on a dirty I/O scheduler
  (`native/cmdc_tool_core/src/discovery/`). Elixir files are then compiled in a separate OS
  process under a time limit (see `CMDC.Tool.Discovery.Compiler`), loaded, and checked.

  ## Sources, in order of precedence

    1. `:explicit` - the `:paths` option: files or folders, relative to `:cwd`, `~` expanded.
    2. `:project` - under `:cwd`: `.cmdc/tools`, `.claude/tools`, `.codex/tools`, only when the
       project is trusted (see Trust).
    3. `:user` - `$CMDC_HOME/tools` (when `:cmdc_home` is set), `~/.cmdc/tools`,
       `~/.claude/tools`, `~/.codex/tools`.
    4. `:plugins` - each folder of `~/.cmdc/plugins/` (and `$CMDC_HOME/plugins/`) with a
       `cmdc-plugin.json` manifest: `{"name": "x", "version": "1.0.0", "tools": ["tools"]}`
       (tool paths relative to the plugin folder, `["tools"]` when omitted; a path leaving the
       folder is refused, and so is a file or folder under it that resolves outside the plugin
       through a symlink: an `:outside_plugin` entry in `:errors`; `"disabled": true` skips the
       plugin); and the enabled Claude Code plugins' tool files (`tools/`, or the paths of a
       `cmdc-plugin.json` at the plugin's root; provider `claude-plugin:<name@marketplace>`;
       `CMDC.Tool.Discovery.ClaudePlugins`: a plugin pointing outside its folder, naming a
       missing file or looping is an error entry and brings nothing).

  Each source can be switched off with `sources: [...]`. Within a source, folders come in the
  order above, files in path order (folders are walked recursively, hidden entries skipped).

  The same file reached twice (through a symlink, overlapping folders or paths) is loaded once,
  from its first (highest-precedence) path; the others are listed in `:ignored` as duplicates.

  ## Conflict rule: who wins

  Tool names are unique. One rule decides every clash: **the tool that comes first wins**, in
  this order: built-in and already registered tools (the `:reserved` option, and the registry's
  tools for `load_into/2`), then the sources in the precedence order above (explicit paths beat
  project folders, which beat user folders, which beat plugins), then folder order, then file
  path order. The loser is refused and reported in `:errors` with `type: :conflict`, its
  `:path`, and a `:winner` (the winning tool's path, or `:reserved`/`:registry`). A conflict
  never stops the other tools from loading. To settle one, rename or disable a tool in its
  metadata (see below).

  ## What a tool file can be

    * `.ex` / `.exs`: an Elixir file defining one or more modules. Every module declaring
      `@behaviour CMDC.Tool` is a tool; it must export `name/0`, `description/0`,
      `parameters/0` and `execute/2`, return a non-empty name, and its parameters must compile
      as a JSON Schema (`CMDC.Tool.Schema.for_module/1`). Other modules are helpers. A file
      that fails to compile, raises, times out, defines no tool, or defines a module that
      already exists elsewhere (`Enum`, a module of another file) is reported in `:errors`
      and skipped; the other files load. Modules with an `@on_load` hook are refused (loading
      them would run code in the host). Files are compiled independently: a helper module used
      by several files must be defined in each, or live in the application.
    * `.py` / `.ps1`: script tools, loaded with `CMDC.Tool.Script.load/2` (Python through
      `python3`, PowerShell described natively and run with `pwsh`), or handed to the
      `:script_loader` function given (`fn path -> {:ok, [module]} | {:error, reason} end`);
      with `script_loader: false` they are listed in `:ignored` with `type: :script` and
      `status: "script, not loaded"`.
    * `.md` / `.json`: metadata, never executed (`<stem>.tool.json` is a script's cache).
    * anything else: listed in `:ignored` with the reason.

  ## Metadata

  Next to `tool.ex`, `tool.json` holds the metadata of the file's tools, and `tool.md` the
  description of its tool (front matter removed; only for a file that defines one tool):

      {
        "name": "new_name",            // renames the file's only tool
        "description": "…",            // replaces its description
        "disabled": true,              // lists it in :ignored instead of loading it
        "title": "New name",           // MCP title (see CMDC.Tool.Structured)
        "annotations": {"readOnlyHint": true},  // MCP annotations (hints, snake_case too)
        "namespace": "crm",            // its OpenAI Responses namespace (a plugin's name by default)
        "timeout": 30000,              // any other key is a setting
        "settings": {"permission": "ask"},
        "tools": {"tool_name": {"name": "…", "disabled": false, "timeout": 5000}}
      }

  `tool.md`'s front matter can give the title, hints and namespace too (the `.json`'s win):

      ---
      title: Read a file
      readOnlyHint: true
      namespace: files
      ---
      Reads a file and returns its text.

  `tools` entries (keyed by the tool's own name) override the file-level keys for one tool.
  `title` and `annotations` replace what the tool's own `title/0` and `annotations/0` give; a
  bad one (not a string, an unknown hint, a hint that is not a boolean) is that tool's error.
  Settings (string keys, JSON values) are returned in each tool's `:settings` and stored with
  `put_settings/3` by `load_into/2`. A renamed or re-described tool is served by a small
  generated module delegating to the original. Invalid metadata skips the file, with the
  reason in `:errors`.

  ## Trust

  Project folders can hold code from a repository someone just cloned, and compiling a file
  runs its top-level code. They are loaded only when trusted: `trust_project: true`, or the
  project (`:cwd`) is one of, or under one of, the folders listed in `~/.cmdc/trusted.json`
  (or `$CMDC_HOME/trusted.json`): `{"trusted": ["~/src/my_project"]}` (absolute paths or
  `~/…`; a relative entry is refused, it would trust any folder), or in the `:trusted` option
  (relative to `:cwd`). Otherwise each existing project tool folder is listed in `:ignored` with
  `type: :untrusted` and how to trust it. `trust_project: false` never trusts.

  ## Safety: what compiling a file can and cannot do

  Compiling an Elixir file runs its top-level code, so each file is compiled in a separate OS
  process (a fresh BEAM of the same installation, `CMDC.Tool.Discovery.Compiler`) with stdin at
  end of file and output captured, under `:compile_timeout` per file. A file that fails to
  compile, raises, loops, waits on stdin or calls `System.halt/0` is reported and the others
  load; the host VM never runs the file's top-level code. Then only the `.beam` binaries are
  loaded into the host, after refusing modules with an `@on_load` hook and modules that already
  exist elsewhere (a file cannot replace `Enum`, `CMDC.Tool` or another file's module). A tool's
  `name/0`, `description/0` and `parameters/0` are called in the compiler VM too (guarded, under
  `:call_timeout`), and the host checks what they returned: discovering a tool runs none of its
  functions in the host (a `def name, do: System.halt()` stops the compiler VM, and the file is
  reported). The host runs a tool's code when it is called, and when a registry it is loaded
  into (`load_into/2`) asks for its name or schema.

  Special files (FIFOs, devices, sockets) are never opened: one named like a tool or its
  metadata is reported (`:ignored`, or the tool's `:errors` entry) and skipped.

  Not protected: side effects outside the BEAM while compiling (files written, programs
  started, network), and whatever the tool's functions do once called: a loaded tool is code
  running in the agent. That is why project folders need trust.

  ## Options

    * `:cwd` - the project folder, also the base of relative paths (default: `File.cwd!/0`).
    * `:home` - the folder `~` stands for (default: `System.user_home/0`).
    * `:cmdc_home` - `$CMDC_HOME` (default: the environment variable; `nil` for none). Both
      must be absolute (`$CMDC_HOME` may be `~/…`): an empty or relative one is ignored, with a
      logged warning and a `:bad_home` entry in `:errors` (see `CMDC.Tool.Home`). Run from the
      home folder, its tool folders load as user files, not as an untrusted project.
    * `:paths` - explicit files or folders (default `[]`).
    * `:sources` - the sources to scan (default `[:explicit, :project, :user, :plugins]`).
    * `:trust_project` - `true`, `false`, or `nil` to consult the trust list (default).
    * `:trusted` - more trusted folders, as if listed in the trust list.
    * `:reserved` - built-in tool names or modules that discovered tools may not take.
    * `:compile_timeout` - ms allowed to compile one file (default 10_000).
    * `:call_timeout` - ms allowed for a tool's `name/0`, `description/0` and `parameters/0`
      when read in the compiler VM (default 5_000).
    * `:compile_cache` - the folder keeping compiled files (`false`: none); see
      `CMDC.Tool.Discovery.CompileCache`: a file compiled before with the same content is not
      compiled again (no compiler VM starts when all are cached).
    * `:script_loader` - loads a `.py`/`.ps1` file: `fn path -> {:ok, [module]} | {:error, term}`
      (default: `CMDC.Tool.Script.load/2`; `false`: scripts are listed in `:ignored`).

  ## Result

  `discover/1` returns `%{tools: [tool], errors: [entry], ignored: [entry]}`. A tool:
  `%{name, module, source, provider, path, real_path, kind, settings, plugin, metadata}`
  (`:original_name` when renamed). An entry: `%{type, source, provider, path, reason}`, plus
  `:name` and `:winner` for conflicts. `source` is `:explicit | :project | :user | :plugin`;
  `provider` is `"explicit"`, `"cmdc"`, `"claude"`, `"codex"`, `"plugin:<name>"` or
  `"claude-plugin:<name@marketplace>"`.

      iex> dir = Path.join(System.tmp_dir!(), "cmdc_doc_#{System.unique_integer([:positive])}")
      iex> File.mkdir_p!(Path.join(dir, "notes"))
      iex> File.write!(Path.join(dir, "notes/readme.txt"), "hi")
      iex> report = CMDC.Tool.Discovery.discover(cwd: dir, home: dir, paths: ["notes"])
      iex> {report.tools, report.errors}
      {[], []}
      iex> [%{type: :unsupported, source: :explicit, reason: reason}] = report.ignored
      iex> reason =~ "not a tool file"
      true
      iex> File.rm_rf(dir) |> elem(0)
      :ok

  ## Errors

  `discover/1` does not fail on what it finds: a root that does not exist, a file or folder
  that cannot be read, a bad metadata file, manifest or trust list, a file that does not
  compile, is an entry of `errors` (`%{type, source, provider, path, reason}`, `reason` a binary
  saying what to fix). Only options it does not know raise `ArgumentError`.

  `load_into/2` and `refresh/2` report the same way; a name the registry refuses becomes a
  `:conflict` entry of `errors` and the rest is registered. They answer `{:error, reason}` only
  when the registry refuses for another reason, with `reason` as `CMDC.Tool.Registry` gives it
  (`{:invalid_tool, module, message}`, or `{:conflict, name, holder}` for a name none of the
  discovered tools holds).

  ## Reload

  `load_into/2` registers what `discover/1` finds and returns a state (`t:t/0`);
  `refresh/2` rescans with it, recompiles only files whose mtime or size changed, drops the
  tools of removed files, and swaps the registry's tools atomically
  (`CMDC.Tool.Registry.replace/2`). When the scan's digest and the registry's other names are
  unchanged, `refresh/2` returns at once (the warm rescan of 1,000 files is one native scan).

  A file's failure is remembered with its mtime: a file that timed out (say, on a busy
  machine) is compiled again when it changes (touch it), not on every refresh. `refresh/2`
  computes the new tool set from `list/1` and installs it with `replace/2`: it assumes no one
  else writes the registry between those two calls (serialize refreshes through one process).
  """

  alias CMDC.Tool.Discovery.{Compiler, Conflicts, Loader}
  alias CMDC.Tool.{Home, Native}

  @sources [:explicit, :project, :user, :plugins]

  @options [
    :cwd,
    :home,
    :cmdc_home,
    :paths,
    :sources,
    :trust_project,
    :trusted,
    :reserved,
    :compile_timeout,
    :call_timeout,
    :compile_cache,
    :script_loader
  ]

  @no_changes %{added: [], removed: [], changed: [], recompiled: []}

  defstruct opts: [],
            files: %{},
            tools: [],
            report: %{tools: [], errors: [], ignored: []},
            changes: @no_changes,
            digest: nil,
            reserved: nil,
            stale: []

  @typedoc """
  The state `load_into/2` returns and `refresh/2` takes: the options, what each file gave
  (`files`, by real path, with the fingerprint it was compiled at), the tools registered, the
  last `report` (as `discover/1` returns it) and what the last call `changes`d: tool names
  `added`, `removed` and `changed` (recompiled or re-described), and the paths `recompiled`.
  `digest` fingerprints the last scan and `reserved` the names others held in the registry:
  when neither changed, `refresh/2` returns at once. `stale`: modules `rediscover/1` no longer
  uses, `{module, path}`, for `delete_stale/1`.
  """
  @type t :: %__MODULE__{
          opts: keyword(),
          files: %{String.t() => map()},
          tools: [tool()],
          report: report(),
          changes: %{
            added: [String.t()],
            removed: [String.t()],
            changed: [String.t()],
            recompiled: [String.t()]
          },
          digest: non_neg_integer() | nil,
          reserved: list() | nil,
          stale: [{module(), String.t()}]
        }

  @type source :: :explicit | :project | :user | :plugin
  @type tool :: %{
          required(:name) => String.t(),
          required(:module) => module(),
          required(:source) => source(),
          required(:provider) => String.t(),
          required(:path) => String.t(),
          required(:real_path) => String.t(),
          required(:kind) => :elixir | :script,
          required(:settings) => map(),
          optional(atom()) => term()
        }
  @type entry :: %{
          required(:type) => atom(),
          required(:source) => source(),
          required(:provider) => String.t(),
          required(:path) => String.t(),
          required(:reason) => String.t(),
          optional(atom()) => term()
        }
  @type report :: %{tools: [tool()], errors: [entry()], ignored: [entry()]}

  @doc """
  Scans every enabled source, compiles and checks what it finds, and reports
  `%{tools: [...], errors: [...], ignored: [...]}` (see the module documentation).

  Loaded tool modules stay loaded in the VM; nothing is registered anywhere.
  """
  @spec discover(keyword()) :: report()
  def discover(opts \\ []) do
    check!(opts, "discover/1")
    {report, _files, _stale, _digest} = run(opts, %{}, reserved(opts), nil)
    report
  end

  @doc """
  Discovers without a registry, keeping what each file gave: the first call takes options (as
  `discover/1`), later ones the state returned. Returns `{:unchanged, state}` when the scan
  (stat calls only) finds nothing changed, else `{:changed, state}` with `state.report` (as
  `discover/1` returns it) and `state.changes`; only new and changed files are compiled or read
  again. The modules no file provides any more (files removed, modules renamed) stay loaded,
  listed in `state.stale`, until `delete_stale/1`: call it once nothing uses the old tools any
  more. What a file watcher calls.

      iex> dir = Path.join(System.tmp_dir!(), "cmdc_doc_#{System.unique_integer([:positive])}")
      iex> File.mkdir_p!(dir)
      iex> {:changed, state} = CMDC.Tool.Discovery.rediscover(cwd: dir, home: dir, paths: [dir])
      iex> {state.report.tools, elem(CMDC.Tool.Discovery.rediscover(state), 0)}
      {[], :unchanged}
      iex> File.rm_rf(dir) |> elem(0)
      :ok
  """
  @spec rediscover(t() | keyword()) :: {:changed | :unchanged, t()}
  def rediscover(opts) when is_list(opts),
    do: rediscover(%__MODULE__{opts: check!(opts, "rediscover/1")})

  def rediscover(%__MODULE__{} = state) do
    reserved = reserved(state.opts)
    previous = if reserved == state.reserved, do: state.digest

    case run(state.opts, state.files, reserved, previous) do
      :unchanged ->
        {:unchanged, %{state | changes: @no_changes}}

      {report, files, stale, digest} ->
        {:changed, %{advance(state, report, files, digest, reserved) | stale: stale}}
    end
  end

  @doc """
  Deletes from the VM the modules `rediscover/1` listed in `state.stale` (unless something
  reloaded them meanwhile) and returns the state without them.
  """
  @spec delete_stale(t()) :: t()
  def delete_stale(%__MODULE__{} = state) do
    delete_modules(state.stale)
    %{state | stale: []}
  end

  @doc """
  Whether the project (`:cwd`) is trusted, by the rule of the Trust section (the options
  `:cwd`, `:home`, `:cmdc_home`, `:trust_project`, `:trusted`). Other loaders of project
  content that runs code (MCP servers of `.mcp.json`) use this same gate.
  """
  @spec project_trusted?(keyword()) :: boolean()
  def project_trusted?(opts \\ []) do
    check!(opts, "project_trusted?/1")
    opts = Keyword.merge(opts, sources: [:project], paths: [])
    {scan, _digest} = scan!(opts, nil)
    scan.project_trusted
  end

  @doc """
  Discovers tools (as `discover/1`) and registers them in `registry` atomically; stores each
  tool's metadata settings with `put_settings/3`. Names already in the registry win (see the
  conflict rule). Returns `{:ok, state}`, the state `refresh/2` takes (its `:report` is what
  `discover/1` would return), or `{:error, reason}` when the registry refuses for another
  reason than a name conflict.

  `registry` is a `%CMDC.Tool.Registry{}`: the calls go to its struct's module
  (`list/1`, `register/3`, `replace/2`, `put_settings/3`).
  """
  @spec load_into(struct(), keyword()) :: {:ok, t()} | {:error, term()}
  def load_into(registry, opts \\ []) when is_list(opts) do
    check!(opts, "load_into/2")
    refresh(registry, %__MODULE__{opts: opts})
  end

  @doc """
  Rescans with the state `load_into/2` (or a previous `refresh/2`) returned, or loads afresh
  given options. Files whose mtime and size are unchanged are not recompiled; changed files are
  recompiled, new files compiled, and the tools of removed (or now failing) files dropped. The
  registry's discovered tools are swapped in one `replace/2`; modules no longer used are
  deleted from the VM. Returns `{:ok, state}` with `state.changes` telling what changed.
  """
  @spec refresh(struct(), t() | keyword()) :: {:ok, t()} | {:error, term()}
  def refresh(registry, opts) when is_list(opts), do: load_into(registry, opts)

  def refresh(%reg_mod{} = registry, %__MODULE__{} = state) do
    ours = Enum.map(state.tools, & &1.module)
    others = reg_mod.list(registry) -- ours
    reserved = reserved(state.opts) ++ Enum.map(others, &{:registry, safe_name(&1), &1})
    previous = if reserved == state.reserved, do: state.digest

    case run(state.opts, state.files, reserved, previous) do
      :unchanged ->
        {:ok, %{state | changes: @no_changes}}

      {report, files, stale, digest} ->
        case commit(reg_mod, registry, ours, others, report) do
          {:ok, report} ->
            put_settings(reg_mod, registry, state.tools, report.tools)
            delete_modules(stale)
            {:ok, advance(state, report, files, digest, reserved)}

          {:error, reason} ->
            {:error, reason}
        end
    end
  end

  # Registers the report's tools; a name the registry refuses (a reserved built-in it knows and
  # we did not) becomes a conflict and the rest is registered again.
  defp commit(reg_mod, registry, ours, others, report) do
    modules = Enum.map(report.tools, & &1.module)

    result =
      cond do
        ours == [] and modules == [] -> :ok
        ours == [] -> reg_mod.register(registry, modules, [])
        true -> reg_mod.replace(registry, others ++ modules)
      end

    case result do
      :ok ->
        {:ok, report}

      {:error, {:conflict, name, module}} ->
        case Enum.split_with(report.tools, &(&1.name == name)) do
          {[], _} ->
            {:error, {:conflict, name, module}}

          {refused, kept} ->
            errors = Enum.map(refused, &Conflicts.conflict(&1, {:registry, name, module}))

            commit(reg_mod, registry, ours, others, %{
              report
              | tools: kept,
                errors: report.errors ++ errors
            })
        end

      {:error, reason} ->
        {:error, reason}
    end
  end

  # Stores settings that changed; clears (`%{}`) those of tools gone or whose metadata no longer
  # sets any.
  defp put_settings(reg_mod, registry, old_tools, new_tools) do
    old = Map.new(old_tools, &{&1.name, &1.settings})
    new = Map.new(new_tools, &{&1.name, &1.settings})

    for {name, settings} <- old, settings != %{}, not Map.has_key?(new, name) do
      reg_mod.put_settings(registry, name, %{})
    end

    for {name, settings} <- new, settings != Map.get(old, name, %{}) do
      reg_mod.put_settings(registry, name, settings)
    end

    :ok
  end

  # The state after a scan that found changes.
  defp advance(state, report, files, digest, reserved) do
    %{
      state
      | files: files,
        tools: report.tools,
        report: report,
        changes: changes(state, report, files),
        digest: digest,
        reserved: reserved
    }
  end

  defp changes(state, report, files) do
    old = Map.new(state.tools, &{&1.name, &1})
    new = Map.new(report.tools, &{&1.name, &1})
    recompiled = for {path, %{compiled_now: true}} <- files, do: path
    recompiled_set = MapSet.new(recompiled)

    changed =
      for {name, tool} <- new,
          prev = old[name],
          prev != nil,
          prev.module != tool.module or prev.real_path != tool.real_path or
            MapSet.member?(recompiled_set, tool.real_path),
          do: name

    %{
      added: Enum.sort(Map.keys(new) -- Map.keys(old)),
      removed: Enum.sort(Map.keys(old) -- Map.keys(new)),
      changed: Enum.sort(changed),
      recompiled: Enum.sort(recompiled)
    }
  end

  # -------------------------------------------------------------------------------------------
  # The pipeline: scan, compile what changed, check, apply metadata, resolve conflicts.

  defp run(opts, cache, reserved, previous) do
    case scan!(opts, previous) do
      :unchanged -> :unchanged
      {scan, digest} -> build(opts, cache, reserved, scan, digest)
    end
  end

  defp build(opts, cache, reserved, scan, digest) do
    call_timeout = Keyword.get(opts, :call_timeout, Compiler.default_call_timeout())

    {fresh, unchanged} =
      Enum.split_with(scan.files, fn f ->
        case cache[f.real_path] do
          # A module another file held may be free now: try again.
          %{result: {:error, {:module_conflict, _}, _}} ->
            true

          %{mtime: mtime, size: size, kind: kind} ->
            not (mtime == f.mtime and size == f.size and kind == f.kind)

          _ ->
            true
        end
      end)

    reused = Map.new(unchanged, &{&1.real_path, %{cache[&1.real_path] | compiled_now: false}})

    compiled =
      fresh
      |> Enum.filter(&(&1.kind == :elixir))
      |> Enum.map(& &1.real_path)
      |> Compiler.compile(Keyword.put(opts, :call_timeout, call_timeout))

    loaded =
      Map.new(fresh, fn f ->
        result =
          case f.kind do
            :elixir -> Loader.load_compiled(f, compiled[f.real_path])
            :script -> Loader.load_script(f, script_loader(opts), call_timeout)
          end

        {f.real_path,
         %{
           mtime: f.mtime,
           size: f.size,
           kind: f.kind,
           result: result,
           compiled_now: f.kind == :elixir
         }}
      end)

    files = Map.merge(reused, loaded)
    {tools, errors, ignored} = Conflicts.assemble(scan.files, files, reserved)

    report = %{
      tools: tools,
      errors: scan.errors ++ errors,
      ignored: scan.ignored ++ ignored
    }

    kept = files |> Map.values() |> Enum.flat_map(&file_modules/1) |> MapSet.new()

    stale =
      for {path, entry} <- cache,
          module <- file_modules(entry),
          not MapSet.member?(kept, module),
          do: {module, path}

    {report, files, stale, digest}
  end

  # Python and PowerShell files load by default; `script_loader: false` (or nil) lists them.
  defp script_loader(opts) do
    case Keyword.fetch(opts, :script_loader) do
      {:ok, loader} when loader in [nil, false] -> nil
      {:ok, loader} -> loader
      :error -> &load_script/1
    end
  end

  defp load_script(path) do
    case CMDC.Tool.Script.load(path) do
      {:ok, %{tools: modules}} -> {:ok, modules}
      {:error, reason} -> {:error, reason}
    end
  end

  defp check!(opts, function),
    do: CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Discovery." <> function)

  defp file_modules(%{result: {:ok, %{modules: modules}}}), do: modules
  defp file_modules(%{result: {:error, _, %{modules: modules}}}), do: modules
  defp file_modules(_), do: []

  defp scan!(opts, previous) do
    case Native.discovery_scan(native_opts(opts), previous) do
      {:ok, {:unchanged, _digest}} -> :unchanged
      {:ok, {scan, digest}} -> {scan, digest}
      {:error, message} -> raise ArgumentError, message
    end
  end

  @doc false
  # The scan's options as the native side takes them (also read by
  # `CMDC.Tool.Discovery.ClaudePlugins`, which reads the same folders).
  def native_opts(opts) do
    cwd = Path.expand(Keyword.get_lazy(opts, :cwd, &File.cwd!/0))
    sources = Keyword.get(opts, :sources, @sources)
    # A relative or empty home or CMDC_HOME is passed on as given: the scan reports it
    # (`:bad_home`) and reads nothing from it; Home logs the warning.
    raw_home = Keyword.get_lazy(opts, :home, &System.user_home/0)

    home =
      case Home.user_home(opts) do
        {:ok, home} -> home
        {:error, _} -> raw_home || ""
      end

    cmdc_home = Keyword.get_lazy(opts, :cmdc_home, fn -> System.get_env("CMDC_HOME") end)
    Home.cmdc_home(opts)

    unknown = sources -- @sources

    if unknown != [] do
      raise ArgumentError,
            "unknown discovery sources #{inspect(unknown)}; the sources are #{inspect(@sources)}"
    end

    %{
      cwd: cwd,
      home: home,
      cmdc_home: cmdc_home,
      paths: Enum.map(Keyword.get(opts, :paths, []), &to_string/1),
      explicit: :explicit in sources,
      project: :project in sources,
      user: :user in sources,
      plugins: :plugins in sources,
      trust: Keyword.get(opts, :trust_project),
      trusted: Enum.map(Keyword.get(opts, :trusted, []), &to_string/1)
    }
  end

  # -------------------------------------------------------------------------------------------

  defp reserved(opts) do
    opts
    |> Keyword.get(:reserved, [])
    |> Enum.map(fn
      name when is_binary(name) -> {:reserved, name, nil}
      module when is_atom(module) -> {:reserved, safe_name(module), module}
    end)
  end

  defp safe_name(module) do
    module.name()
  rescue
    _ -> inspect(module)
  end

  # Deletes modules that no file provides any more, unless something else reloaded them.
  defp delete_modules(stale) do
    for {module, path} <- stale, :code.which(module) == String.to_charlist(path) do
      :code.soft_purge(module)
      :code.delete(module)
    end

    :ok
  end
end
