defmodule CMDC.Tool.Script do
  @moduledoc """
  Python (and PowerShell) script functions as tools, run in persistent native-managed workers.

  A script is a tool group: its module docstring is the group's rule prompt, and each public
  function (a name not starting with `_`) is one tool. `load/2` reads a script and returns a
  generated module per function; each implements `CMDC.Tool`, so `CMDC.Tool.find/2`,
  `CMDC.Tool.to_schema/2`, `CMDC.Tool.validate/2` and a runner treat them like Elixir tools.

      \"\"\"Weather tools. Answer in metric units.\"\"\"

      def forecast(city: str, days: int = 3) -> dict:
          \"\"\"Get the forecast for a city.

          Args:
              city: The city name.
              days: How many days.
          \"\"\"
          return {"city": city, "days": days}

      forecast.executionPolicy = "auto"
      forecast.format = lambda result, args: f"{result['city']}: {result['days']} days"

  ## Reading scripts

  Python scripts are read with Python's own `ast` in a worker process, without importing them,
  so a top level that parses argv, prints or exits cannot break loading. Docstrings in Google,
  NumPy and reST style give descriptions; type hints give JSON Schema types (`str`, `int`,
  `float`, `bool`, `list[T]`, `dict[K, V]`, `Optional[T]`, `T | None`, `Union[A, B]` as `anyOf`,
  `Literal[...]` as `enum`, `Literal[True, False]` as boolean, `Enum` subclasses as their values,
  `TypedDict`s and dataclasses as nested objects, `Annotated[T, "text"]`, string annotations).
  Parameters with a JSON-representable default carry it (a set default becomes a sorted list);
  an `Optional` parameter without a default is not required and receives `None` when omitted;
  `*args`/`**kwargs` are not parameters. PowerShell scripts are read natively (comment-based help
  and the `param()` block), without `pwsh`.

  ## The description cache

  The description is cached next to the script as `{name}.tool.json` (the seeds' format: `type`,
  `name`, `scriptPath`, `tools` as OpenAI function specs, `rulePrompt`, `defaultPermissions`),
  so a warm start-up runs no interpreter. A cache can never grant more than the script
  declares:

    * It is used only when it is *stamped* by this user: `scriptStamp` is the SHA-256 of the
      script's bytes when it was read, and `cacheTag` an HMAC-SHA256 over the whole description
      under the user's key (`CMDC.Tool.Script.CacheKey`, never in a repository). File times
      play no part (a `git clone` gives a script and its cache the same mtime). Any edit of
      the script, or of the cache, makes it stale.
    * Any other cache (written by sy-f-misc, shipped with a cloned repository, edited by hand,
      a tag made with another key) is **not** the script's word: the script is read again
      (status `:rebuilt`). That cache may only make a tool stricter (the stricter policy and
      result approval of the two win, never its looser one); a tool it lists that the script
      does not define is never offered. Both are reported in the group's `:warnings`.
    * A broken cache is rebuilt. The worker also calls only functions the script itself
      defines (not names it imported, such as `from os import system`).

  ## Settings each tool exposes

  A generated module exports `__tool_settings__/0`:

      %{policy: :ask_once, result_approval: :never, format: false}

    * `:policy` - `:auto | :ask_once | :ask_always | :deny`, from the function's attributes
      (`executionPolicy`, or the older `permissionLevel` / `requireExecutionApproval`), else the
      module-level ones (or `defaultPermissions = {...}`), else `:ask_once`.
    * `:result_approval` - `:never | :on_error | :always`, from `resultApprovalPolicy` or
      `requireResultApproval`; the runner enforces it.

  Every spelling goes through one fail-safe normalizer (`docs/PERMISSIONS.md` lists them all):
  settings that disagree resolve to the stricter, an unknown value to the strictest, with a
  warning naming the file, the function and the setting (logged, and in the group's
  `:warnings`). A `.tool.json` written by sy-f-misc keeps its per-tool permissions where they are
  stricter than the script's.
    * `:format` - whether the function has a `format(result, args) -> str` attribute, which the
      worker applies to make the text the model sees.

  and `__script__/0`: `%{path: ..., function: ..., group: ..., kind: :python | :powershell}`.

  ## Title, annotations, structured output

  A Python function's `title` and `annotations` attributes (literals, like the permission
  attributes) become the tool's `title/0` and `annotations/0` (`CMDC.Tool.Structured`); a bad
  one is dropped with a warning. Its return type hint gives `output_schema/0` when it maps to
  a JSON object (`dict`, `dict[str, T]`, a `TypedDict`), unless it has a `format`
  function: its results are then checked against it and served as MCP `structuredContent`.

      forecast.title = "City forecast"
      forecast.annotations = {"readOnlyHint": True, "openWorldHint": False}

  ## Examples for the model

  A docstring's `Examples:` section (Google style, or NumPy's `Examples` heading over dashes)
  gives `examples/0` (`CMDC.Tool.InputExamples`) when it holds calls, in one of two forms:
  doctest calls of the function itself (`>>> forecast("Paris", days=3)`; positional arguments
  take the parameters' names, values must be literals, `...` lines continue a call, other lines
  are output), or, in a section without `>>>`, one JSON object a line (`{"city": "Paris"}`).
  The section then leaves the description (providers get the examples in their own place); a
  section of prose stays. An example that cannot be read, or does not match the parameters,
  makes registering the tool an error naming it.

      def forecast(city: str, days: int = 1) -> str:
          \"""Weather forecast.

          Examples:
              >>> forecast("Paris")
              >>> forecast(city="Lyon", days=3)
          \"""

  In a PowerShell function's comment-based help, each `.EXAMPLE` section with a line that
  calls the function itself (the first such line, after an optional `PS C:\\>` prompt; a trailing backtick continues
  the line) gives one example, its arguments bound as PowerShell binds them (`-City 'Paris'`,
  `-Days:3`, a switch alone, a unique prefix, positional arguments in declaration order; what
  follows `|` or `;` is not part of it). Read statically, like the rest of the help. Sections
  of prose, pipelines into the function and calls that use variables or expressions (`$path`,
  `(Get-Date)`) give none; a call naming a parameter the function lacks, or a value its schema
  refuses, is an error naming the tool, as for Python.

      <#
      .EXAMPLE
          PS C:\\> Get-Forecast -City 'Paris' -Days 3
      #>

  ## Running

  `execute/2` of a generated module sends the call to a worker process of the script (started
  on first use, kept warm, replaced after a crash, restarted when the script changes, up to
  `:max_workers` when calls overlap). Arguments and results cross as length-prefixed JSON frames
  on the worker's own channel; what the script prints is captured as log, never mixed into the
  result. It returns `{:ok, text}` (the `format` function's text, a string result as is, other
  results as JSON) or `{:error, message}` (an exception's message, never its traceback).

  Progress: a script may `import cmdc_tool` (a module the worker provides) and call
  `cmdc_tool.progress(value)`; each value reaches `:on_progress` (a `fun/1` given to `call/3`,
  or stored as `context.private.on_progress`) as a partial result.

  Programs a call starts end with its worker: a time-out or a cancel kills the worker's whole
  process tree (children, children that called `setsid`, and daemons that double-forked: on
  Linux the worker is their subreaper, so they are re-parented to it instead of to init); a
  call that returns leaves them to the warm worker, which takes them along when it stops (idle
  time-out, `stop/1`, the VM's exit). A tool that must leave a program running past that hands
  it to a service manager (`systemd-run --user …`, a supervisor of its own) instead of forking
  it. (Daemons that exit stay as zombies of the worker until it stops.)

  ## Plugging in: discovery, registry, runner

    * Discovery hands the `.py`/`.ps1` files it finds to `load_many/2` (one call for all: one
      interpreter reads every uncached Python script, cached ones need none) and registers each
      `group.tools` (plain `CMDC.Tool` modules) under `group.group`, with `group.rule_prompt`
      as the group's rules. On a change it calls `load/2` again: the same module names are
      redefined with the new description (their MD5 changes, so validators recompile);
      `unload/1` removes the modules of a deleted script. Per-script failures come back as
      `{path, {:error, reason}}` and never affect the other scripts.
    * A runner reads `module.__tool_settings__()` for the permission policies and calls
      `execute/2` like any tool. Killing the calling process (a runner's own time-out or
      cancellation) cancels the call: the NIF monitors the caller and kills the worker's
      process group. A runner that wants the handle (to cancel from elsewhere, or to consume
      progress messages itself) uses `start_call/3` and `await/2`. Progress reaches
      `context.private.on_progress` (a `fun/1`) when set; otherwise it goes to
      `CMDC.Context.update/2` (text as is, other values as JSON text), i.e. to the runner's
      partial results.

  ## Errors

    * `load/2`, `load_many/2`: `{:error, message}` for a script (a binary saying what to fix:
      not a `.py`/`.ps1` file, the script cannot be read, a syntax error, no interpreter).
    * `call/3`, `start_call/3`, `await/2`: `{:error, %{kind: kind, message: message, log: log}}`
      (`t:call_error/0`, binaries). `kind` says how the call failed: `"exception"`,
      `"arguments"`, `"unknown_function"`, `"import"`, `"timeout"`, `"cancelled"`, `"crashed"`,
      `"missing"` (the script file is gone), `"interpreter"`, `"pwsh_missing"`, `"native"`, ...;
      `message` is what a model is shown; `log` is what the script printed meanwhile.
    * `describe_powershell/2`: `{:error, message}` (a binary).
    * `execute/2` of a generated module: `{:error, message}`, as `CMDC.Tool` defines it.
    * `cancel/1`, `workers/0`, `stop/1`, `unload/1` do not fail (`cancel/1` of a finished call
      is `:not_running`).

  ## Options (of `load/2`, `load_many/2`, `call/3`)

    * `:python` - the interpreter to use when the script's folder has no `.venv`/`venv` and
      there is no `python3` on PATH (default: `Application.get_env(:cmdc_tool, :python)`).
    * `:timeout` - milliseconds a call may take (default 60_000); then its worker is killed.
    * `:max_workers` - workers per script (default 4). Set by the script's first call.
    * `:idle_timeout` - milliseconds a worker stays warm without calls (default 600_000); set
      by the script's first call.
    * `:describe_timeout` - milliseconds to read one script (default 10_000).
    * `:cache` - read and write `{name}.tool.json` (default `true`).
    * `:cache_key` - the key of the caches' tags (default: the user's, `CMDC.Tool.Script.CacheKey`).
    * `:namespace` - the prefix of generated module names (default `CMDC.Tool.Script.Tools`).

      iex> {:ok, doc} = CMDC.Tool.Script.describe_powershell(\"\"\"
      ...> function Get-Time {
      ...>   <# .SYNOPSIS
      ...>   The time in a zone.
      ...>   .PARAMETER Zone
      ...>   An IANA zone. #>
      ...>   param([Parameter(Mandatory)][string]$Zone)
      ...> }
      ...> \"\"\")
      iex> [tool] = doc["tools"]
      iex> tool["function"]["parameters"]["required"]
      ["Zone"]
  """

  require Logger

  alias CMDC.Tool.{JSON, Native}
  alias CMDC.Tool.Script.{CacheKey, Gen}

  @typedoc "A loaded script: its tool group."
  @type group :: %{
          group: String.t(),
          rule_prompt: String.t(),
          path: String.t(),
          kind: :python | :powershell,
          tools: [module()],
          default_permissions: map(),
          status: :cached | :parsed | :stale | :rebuilt,
          warnings: [String.t()]
        }

  @typedoc "What a failed call gives: `kind` (e.g. `\"exception\"`, `\"timeout\"`), `message`, `log`."
  @type call_error :: %{kind: String.t(), message: String.t(), log: String.t()}

  @defaults [
    timeout: 60_000,
    max_workers: 4,
    idle_timeout: 600_000,
    describe_timeout: 10_000,
    cache: true,
    namespace: CMDC.Tool.Script.Tools
  ]

  # call/3 passes its options to start_call/3 and await/2.
  @call_options [:timeout, :on_progress, :python, :max_workers, :idle_timeout]

  @doc """
  Loads one script (`.py` or `.ps1`): `{:ok, group}` with its generated tool modules, or
  `{:error, reason}`.
  """
  @spec load(Path.t(), keyword()) :: {:ok, group()} | {:error, String.t()}
  def load(path, opts \\ []) do
    [{_, result}] = load_many([path], opts)
    result
  end

  @doc """
  Loads many scripts at once (one interpreter reads all uncached Python scripts). Each script's
  result stands alone: one bad script never stops the others. Returns `[{path, result}]` in
  the given order.

      iex> CMDC.Tool.Script.load_many(["/nonexistent/tools.py", "/tmp/notes.txt"])
      [
        {"/nonexistent/tools.py",
         {:error, "cannot read the script /nonexistent/tools.py: No such file or directory (os error 2)"}},
        {"/tmp/notes.txt", {:error, "/tmp/notes.txt is not a script tool: expected a .py or .ps1 file"}}
      ]
  """
  @spec load_many([Path.t()], keyword()) :: [{Path.t(), {:ok, group()} | {:error, String.t()}}]
  def load_many(paths, opts \\ []) when is_list(paths) do
    opts = options(opts)
    absolute = Enum.map(paths, &Path.expand/1)

    native_opts = %{
      languages: languages(opts[:python]),
      describe_timeout_ms: opts[:describe_timeout],
      cache: opts[:cache],
      cache_key: opts[:cache_key] || CacheKey.get(),
      path_env: System.get_env("PATH")
    }

    results =
      case Native.script_load(absolute, native_opts) do
        {:ok, handle} ->
          limit = opts[:describe_timeout] * max(length(paths), 1) + 30_000

          receive do
            {:cmdc_script, ^handle, {:loaded, items}} -> items
          after
            limit -> Enum.map(absolute, &{&1, {:error, "loading scripts timed out"}})
          end

        {:error, message} ->
          Enum.map(absolute, &{&1, {:error, message}})
      end

    built =
      paths
      |> Enum.zip(results)
      |> Enum.map(fn
        {path, {_abs, {:error, message}}} ->
          {path, {:error, message}}

        {path, {abs, {:ok, {status, json, language}}}} ->
          {path, build(abs, status, json, language, opts)}
      end)

    # one code-loading commit for every tool module of every script
    built
    |> Enum.flat_map(fn
      {_, {:ok, _group, defs}} -> defs
      _ -> []
    end)
    |> Gen.define_many(__MODULE__)

    Enum.map(built, fn
      {path, {:ok, group, _defs}} ->
        forget_removed(group)
        {path, {:ok, group}}

      other ->
        other
    end)
  end

  @typedoc """
  What loading a script now would make of its cache: `status` is the one `load/2` would
  report, `cache` the cache's state, `detail` why an untrusted or corrupt cache is not used.
  """
  @type cache_status :: %{
          status: :cached | :parsed | :stale | :rebuilt,
          cache: :fresh | :off | :missing | :stale | :untrusted | :corrupt,
          detail: String.t() | nil
        }

  @doc """
  Judges each script's `{name}.tool.json` by the loader's own rule (content hash and the
  user's HMAC tag, never file times) without reading the script's functions or writing
  anything. Options: `:cache` (default `true`), `:cache_key` (default the user's key).

      iex> CMDC.Tool.Script.cache_status(["/nonexistent/tools.py"])
      [{"/nonexistent/tools.py",
        {:error, "cannot read the script /nonexistent/tools.py: No such file or directory (os error 2)"}}]
  """
  @spec cache_status([Path.t()], keyword()) ::
          [{Path.t(), {:ok, cache_status()} | {:error, String.t()}}]
  def cache_status(paths, opts \\ []) when is_list(paths) do
    CMDC.Tool.Options.check!(opts, [:cache, :cache_key], "CMDC.Tool.Script.cache_status/2")
    key = opts[:cache_key] || CacheKey.get()

    statuses =
      Native.script_cache_status(Enum.map(paths, &Path.expand/1), opts[:cache] != false, key)

    Enum.zip_with(paths, statuses, fn
      path, {_abs, {:ok, {status, cache, detail}}} ->
        {path, {:ok, %{status: status(status), cache: cache_state(cache), detail: detail}}}

      path, {_abs, {:error, message}} ->
        {path, {:error, message}}
    end)
  end

  # A function removed from a script loses its module.
  defp forget_removed(%{path: path, tools: tools}) do
    key = {__MODULE__, :group, path}

    case :persistent_term.get(key, nil) do
      ^tools ->
        :ok

      previous ->
        unload((previous || []) -- tools)
        :persistent_term.put(key, tools)
    end
  end

  # `language` is what the native side read the script as (`:python`, `:powershell`).
  defp build(path, status, json, language, opts) do
    with {:ok, doc} <- JSON.decode(json) do
      for warning <- doc["warnings"] || [], do: Logger.warning("cmdc_tool: #{warning}")
      group = doc["name"] || Path.rootname(Path.basename(path))
      prefix = Module.concat([opts[:namespace], "S" <> hash(path), camelize(group)])
      call_opts = Keyword.take(opts, [:timeout, :max_workers, :idle_timeout, :python])

      defs =
        Enum.map(doc["tools"] || [], fn tool ->
          function = tool["function"]
          name = function["name"]

          {Module.concat(prefix, camelize(name)),
           %{
             name: name,
             description: description(function["description"], name, path),
             parameters: function["parameters"] || %{"type" => "object", "properties" => %{}},
             settings: settings(tool, doc["defaultPermissions"]),
             script: %{path: path, function: name, group: group, kind: language},
             call_opts: call_opts
           }
           |> Map.merge(display(tool, path, name))}
        end)

      {:ok,
       %{
         group: group,
         rule_prompt: doc["rulePrompt"] || "",
         path: path,
         kind: language,
         tools: Enum.map(defs, &elem(&1, 0)),
         default_permissions: doc["defaultPermissions"] || %{},
         status: status(status),
         warnings: doc["warnings"] || []
       }, defs}
    end
  end

  # The optional `CMDC.Tool.Structured` callbacks' values (read by the generated modules):
  # `title` and `annotations` from the function's attributes, `outputSchema` from its return
  # type hint. A bad title or annotations is dropped with a warning, as a bad permission is.
  defp display(tool, path, name) do
    output =
      if is_map(tool["outputSchema"]), do: %{output_schema: tool["outputSchema"]}, else: %{}

    # Checked against the parameters when the tool is registered (`CMDC.Tool.InputExamples`).
    output = if tool["examples"], do: Map.put(output, :examples, tool["examples"]), else: output

    case CMDC.Tool.Structured.split_display(Map.take(tool, ["title", "annotations"])) do
      {:ok, display, _} ->
        display |> Enum.reject(fn {_, v} -> v == nil end) |> Map.new() |> Map.merge(output)

      {:error, reason} ->
        Logger.warning("cmdc_tool: #{Path.basename(path)}: #{name}: #{reason}; ignored")
        output
    end
  end

  @cache_states %{
    "fresh" => :fresh,
    "off" => :off,
    "missing" => :missing,
    "stale" => :stale,
    "untrusted" => :untrusted,
    "corrupt" => :corrupt
  }
  defp cache_state(name), do: Map.fetch!(@cache_states, name)

  defp status("cached"), do: :cached
  defp status("stale"), do: :stale
  defp status("rebuilt"), do: :rebuilt
  defp status(_), do: :parsed

  defp description(text, name, path) when text in [nil, ""],
    do: "#{name} (from #{Path.basename(path)})"

  defp description(text, _name, _path), do: text

  # The native loader normalized every spelling (see docs/PERMISSIONS.md): canonical values
  # here. Anything else still fails safe.
  defp settings(tool, _defaults) do
    perms = tool["permissions"] || %{}

    %{
      policy: policy(perms["executionPolicy"]),
      result_approval: result_approval(perms["resultApprovalPolicy"]),
      format: tool["format"] == true
    }
  end

  defp policy("auto"), do: :auto
  defp policy("ask-once"), do: :ask_once
  defp policy("deny"), do: :deny
  defp policy(_), do: :ask_always

  defp result_approval("never"), do: :never
  defp result_approval("on-error"), do: :on_error
  defp result_approval(_), do: :always

  defp hash(path), do: Integer.to_string(:erlang.phash2(path, 4_294_967_296), 36)

  defp camelize(name) do
    name
    |> String.replace(~r/[^A-Za-z0-9]+/, "_")
    |> String.trim("_")
    |> Macro.camelize()
    |> case do
      "" -> "X"
      <<c, _::binary>> = s when c in ?0..?9 -> "X" <> s
      s -> s
    end
  end

  @doc """
  Calls a generated tool module's script function directly.

  Returns `{:ok, %{value: term, text: String.t(), log: String.t(), worker: os_pid}}` (`text` is
  what the model should see) or `{:error, %{kind: kind, message: message, log: log}}`. Kinds:
  `"exception"`, `"result"` (not JSON), `"arguments"`, `"timeout"`, `"cancelled"`, `"crashed"`,
  `"import"` (the script failed or exited while being imported), `"interpreter"`,
  `"pwsh_missing"`.

  Options: `:timeout`, `:on_progress` (`fun/1` receiving each progress value), `:python`,
  `:max_workers` (defaults: those given to `load/2`).
  """
  @spec call(module(), map(), keyword()) :: {:ok, map()} | {:error, call_error()}
  def call(module, args, opts \\ []) when is_atom(module) do
    with {:ok, handle} <- start_call(module, args, opts) do
      await(handle, opts)
    end
  end

  @doc """
  Starts a call and returns at once with its handle; the calling process then receives
  `{:cmdc_script, handle, event}` messages (`{:progress, json}`, then `{:ok, json, os_pid}` or
  `{:error, call_error}`), which `await/2` turns into `call/3`'s result. The handle can be passed to
  `cancel/1` from any process. Options as for `call/3`.
  """
  @spec start_call(module(), map(), keyword()) :: {:ok, reference()} | {:error, call_error()}
  def start_call(module, args, opts \\ []) when is_atom(module) do
    CMDC.Tool.Options.check!(opts, @call_options, "CMDC.Tool.Script.start_call/3 (and call/3)")
    data = :persistent_term.get({__MODULE__, module})
    opts = Keyword.merge(@defaults, Keyword.merge(data.call_opts, opts))
    script = data.script

    with {:ok, args_json} <- encode_args(args) do
      native_opts = %{
        languages: languages(opts[:python] || Application.get_env(:cmdc_tool, :python)),
        timeout_ms: opts[:timeout],
        max_workers: opts[:max_workers],
        idle_timeout_ms: opts[:idle_timeout],
        path_env: System.get_env("PATH"),
        # Inside cmdc-mcp, its marker, as CMDC.Tool.Exec children get it.
        env: CMDC.Tool.MCP.SelfGuard.env()
      }

      case Native.script_call(script.path, script.function, args_json, native_opts) do
        {:ok, handle} -> {:ok, handle}
        {:error, message} -> {:error, %{kind: "native", message: message, log: ""}}
      end
    end
  end

  @doc """
  Waits for the result of a call started by `start_call/3`, handing progress values to
  `:on_progress`. `:timeout` (default 60_000) only bounds the wait here; the native time-out set
  when the call started is what kills the worker.
  """
  @spec await(reference(), keyword()) :: {:ok, map()} | {:error, call_error()}
  def await(handle, opts \\ []) do
    CMDC.Tool.Options.check!(opts, @call_options, "CMDC.Tool.Script.await/2")
    await(handle, opts[:on_progress], Keyword.get(opts, :timeout, @defaults[:timeout]) + 5_000)
  end

  defp encode_args(args) when is_map(args) do
    case JSON.encode(args) do
      {:ok, json} -> {:ok, json}
      {:error, message} -> {:error, %{kind: "arguments", message: message, log: ""}}
    end
  end

  defp encode_args(args),
    do:
      {:error,
       %{kind: "arguments", message: "arguments must be a map, got #{inspect(args)}", log: ""}}

  defp await(handle, on_progress, limit) do
    receive do
      {:cmdc_script, ^handle, {:progress, json}} ->
        with {:ok, %{"value" => value}} <- JSON.decode(json),
             true <- is_function(on_progress, 1) do
          on_progress.(value)
        end

        await(handle, on_progress, limit)

      {:cmdc_script, ^handle, {:ok, json, os_pid}} ->
        case JSON.decode(json) do
          {:ok, reply} ->
            value = reply["value"]

            if reply["warning"],
              do: Logger.warning("cmdc_tool: #{reply["warning"]}; the raw result was returned")

            {:ok,
             %{
               value: value,
               text: reply["text"] || text(value),
               log: reply["log"] || "",
               worker: os_pid
             }}

          {:error, message} ->
            {:error,
             %{kind: "result", message: "the worker's result is unreadable: " <> message, log: ""}}
        end

      {:cmdc_script, ^handle, {:error, %{kind: _, message: _, log: _} = error}} ->
        {:error, error}
    after
      limit ->
        Native.script_cancel(handle)

        receive do
          {:cmdc_script, ^handle, {:error, _}} -> :ok
        after
          1_000 -> :ok
        end

        {:error,
         %{kind: "timeout", message: "no answer from the script worker in #{limit} ms", log: ""}}
    end
  end

  defp text(value) when is_binary(value), do: value

  defp text(value) do
    case JSON.encode(value) do
      {:ok, json} -> json
      {:error, _} -> inspect(value)
    end
  end

  @doc false
  # The generated modules' execute/2.
  def execute(module, args, context) do
    on_progress = progress_fun(context)

    case call(module, args, on_progress: on_progress) do
      {:ok, %{text: text}} -> {:ok, text}
      {:error, %{message: message}} -> {:error, message}
    end
  end

  defp progress_fun(%{private: %{on_progress: fun}}) when is_function(fun, 1), do: fun

  # Progress becomes the runner's partial results: text as is, other values as JSON text.
  defp progress_fun(%CMDC.Context{} = context) do
    fn
      value when is_binary(value) -> CMDC.Context.update(context, value)
      value -> CMDC.Context.update(context, CMDC.Tool.JSON.encode!(value))
    end
  end

  defp progress_fun(_), do: nil

  @doc false
  # The generated modules' meta/1: the function and its first string argument.
  def meta(module, args) do
    name = __field__(module, :name)

    case Enum.find(Enum.sort(Map.to_list(args || %{})), fn {_, v} -> is_binary(v) end) do
      {_, v} -> name <> " " <> String.slice(v, 0, 60)
      nil -> name
    end
  end

  @doc false
  def __field__(module, key), do: Map.fetch!(:persistent_term.get({__MODULE__, module}), key)

  @doc """
  Cancels a call by its handle (from the `{:cmdc_script, handle, _}` messages): its worker is
  killed and the caller gets an error of kind `"cancelled"`. Returns `:ok` or `:not_running`.
  """
  @spec cancel(reference()) :: :ok | :not_running
  def cancel(handle), do: Native.script_cancel(handle)

  @doc """
  The warm (idle) workers: `[{script_path, [os_pid]}]`.

      iex> is_list(CMDC.Tool.Script.workers())
      true
  """
  @spec workers() :: [{String.t(), [non_neg_integer()]}]
  def workers, do: Native.script_workers()

  @doc "Stops the idle workers of one script, or of all (`nil`); returns how many."
  @spec stop(Path.t() | nil) :: non_neg_integer()
  def stop(path \\ nil), do: Native.script_stop(path && Path.expand(path))

  @doc """
  Unloads generated tool modules (e.g. when discovery sees a script deleted). Reloading a script
  unloads the modules of functions it no longer has by itself.
  """
  @spec unload([module()]) :: :ok
  def unload(modules), do: Enum.each(modules, &Gen.undefine(&1, __MODULE__))

  @doc """
  Describes PowerShell source natively (no `pwsh`, no file): the description document.
  """
  @spec describe_powershell(String.t(), String.t()) :: {:ok, map()} | {:error, String.t()}
  def describe_powershell(source, path \\ "script.ps1") when is_binary(source) do
    JSON.decode(Native.script_describe_powershell(source, path))
  end

  defp options(opts) do
    CMDC.Tool.Options.check!(
      opts,
      [:python, :cache_key | Keyword.keys(@defaults)],
      "CMDC.Tool.Script.load/2"
    )

    opts = Keyword.merge(@defaults, opts)
    Keyword.put_new_lazy(opts, :python, fn -> Application.get_env(:cmdc_tool, :python) end)
  end

  # Each language's settings, read only by that language's native implementation
  # (`native/cmdc_tool_core/src/scripts/python.rs`, `powershell.rs`).
  defp languages(python) do
    python_settings = %{"worker" => worker_path()}

    %{
      "python" =>
        if(python, do: Map.put(python_settings, "interpreter", python), else: python_settings),
      "powershell" => %{"runner" => ps_runner_path()}
    }
  end

  defp worker_path, do: Path.join(:code.priv_dir(:cmdc_tool), "python/cmdc_worker.py")
  defp ps_runner_path, do: Path.join(:code.priv_dir(:cmdc_tool), "powershell/cmdc_runner.ps1")
end
