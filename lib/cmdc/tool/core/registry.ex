defmodule CMDC.Tool.Registry do
  @moduledoc """
  A native tool registry (mirrors `native/cmdc_tool_nif/src/registry.rs`): names → tool modules
  in a Rust resource behind a read-write lock, read and written by many processes at once.

  Create one per agent or session with `new/1`, or use the process-independent `default/0`.
  The registry is a value (`%CMDC.Tool.Registry{}`) you can pass to any process; it lives as long
  as some process (or `:persistent_term`) holds it.

      iex> reg = CMDC.Tool.Registry.new()
      iex> CMDC.Tool.Registry.register(reg, [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile])
      :ok
      iex> CMDC.Tool.Registry.fetch(reg, "echo")
      {:ok, CMDC.Tool.Examples.Echo}
      iex> CMDC.Tool.Registry.fetch(reg, "readFile")
      {:error, {:not_found, "readFile", ["read_file"]}}

  ## Rules checked at registration

    * the name matches `^[A-Za-z0-9_.-]{1,128}$` (MCP's rule, the widest a provider has; the
      one rule of `native/cmdc_tool_core/src/names.rs`). A provider with a narrower rule is
      given a mapped name (`fs.read` → `fs_read` for OpenAI and Anthropic), and
      `CMDC.Tool.Runner` maps a model's call back; see `CMDC.Tool.Providers`;
    * the description (`c:CMDC.Tool.description/0`) is not empty;
    * `c:CMDC.Tool.parameters/0` is a JSON Schema that compiles;
    * the name is not held by another module, nor reserved for a built-in (`new(reserved: ...)`).

  A batch is registered all or none: one bad module names itself in the error and nothing of
  the batch is registered. Registering a module again under the same name updates its entry
  (e.g. after a code reload); only a *different* module claiming the name is a conflict.

  Every change to the set of tools invalidates the provider output cached for the registry by
  `CMDC.Tool.to_schema/3` and `CMDC.Tool.to_schema_json/3`.

  ## Errors

    * `register/3`, `replace/2`: `{:error, {:invalid_tool, module, message}}` (a rule above is
      broken; `message` a binary) or `{:error, {:conflict, name, module | :reserved}}`
      (`t:error/0`);
    * `fetch/2`, `unregister/2`, `put_settings/3`: `{:error, {:not_found, name, suggestions}}`,
      the nearest registered names first (`[]` for the writes);
    * `list/1`, `size/1`, `suggest/2`, `settings/2` do not fail (`settings/2` of an unknown
      name is `%{}`).
  """

  alias CMDC.Tool.{Native, Schema}
  require Native

  @enforce_keys [:ref, :id]
  defstruct [:ref, :id, :name]

  @typedoc "A registry: a handle to the native resource, safe to share between processes."
  @type t :: %__MODULE__{ref: reference(), id: pos_integer(), name: term()}

  @typedoc "Why a registration was refused."
  @type error ::
          {:invalid_tool, module(), String.t()}
          | {:conflict, String.t(), module() | :reserved}

  @doc """
  A new, empty registry.

  Options:
    * `:reserved` - names kept for built-in tools: registering a module under one of them is a
      `{:conflict, name, :reserved}`.
    * `:name` - a label shown when the registry is inspected.

      iex> reg = CMDC.Tool.Registry.new(reserved: ["bash"])
      iex> defmodule MyBash do
      ...>   @behaviour CMDC.Tool
      ...>   def name, do: "bash"
      ...>   def description, do: "Run a command."
      ...>   def parameters, do: %{"type" => "object"}
      ...>   def execute(_args, _ctx), do: {:ok, ""}
      ...> end
      iex> CMDC.Tool.Registry.register(reg, MyBash)
      {:error, {:conflict, "bash", :reserved}}
  """
  @spec new(keyword()) :: t()
  def new(opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:reserved, :name], "CMDC.Tool.Registry.new/1")
    reserved = opts |> Keyword.get(:reserved, []) |> Enum.map(&to_string/1)
    {id, ref} = Native.registry_new(reserved)
    %__MODULE__{ref: ref, id: id, name: Keyword.get(opts, :name)}
  end

  @doc """
  The default registry: one per node, created on first use, independent of any process (it
  survives the process that first asked for it).

      iex> CMDC.Tool.Registry.default() == CMDC.Tool.Registry.default()
      true
  """
  @spec default() :: t()
  def default do
    case :persistent_term.get({__MODULE__, :default}, nil) do
      nil ->
        # The native side creates it once, so concurrent first calls get the same registry.
        {id, ref} = Native.registry_default()
        reg = %__MODULE__{ref: ref, id: id, name: :default}
        :persistent_term.put({__MODULE__, :default}, reg)
        reg

      reg ->
        reg
    end
  end

  @doc """
  Registers a tool module or a list of them, all or none.

  Returns `:ok`, or `{:error, reason}` with `reason`:
    * `{:invalid_tool, module, message}` - the module is not a tool, or breaks a rule (the
      message states it);
    * `{:conflict, name, holder}` - `name` is held by module `holder`, or is `:reserved`.

  `opts` is reserved for future use: it takes no option yet (any key raises `ArgumentError`).

      iex> reg = CMDC.Tool.Registry.new()
      iex> {:error, {:invalid_tool, String, message}} = CMDC.Tool.Registry.register(reg, String)
      iex> message =~ "not a CMDC.Tool"
      true
  """
  @spec register(t(), module() | [module()], keyword()) :: :ok | {:error, error()}
  def register(%__MODULE__{ref: ref}, modules, opts \\ []) do
    CMDC.Tool.Options.check!(opts, [], "CMDC.Tool.Registry.register/3")

    with {:ok, batch} <- prepare(List.wrap(modules), ref) do
      ref |> Native.registry_register(batch, false) |> name_module()
    end
  end

  # The core's messages state the rule; the module is named in front.
  defp name_module({:error, {:invalid_tool, module, message}}),
    do: {:error, {:invalid_tool, module, "#{inspect(module)}: #{message}"}}

  defp name_module(result), do: done(result)

  # Writes answer `{:ok, generation}`; the API answers `:ok`.
  defp done({:ok, _generation}), do: :ok
  defp done({:error, _} = error), do: error

  @doc """
  Replaces the whole set of tools with `modules` in one atomic swap (e.g. when a tool server
  restarts): readers see the old set or the new one, never a mix. All or none, with the same
  rules and errors as `register/3`. Settings of names still present are kept.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> :ok = CMDC.Tool.Registry.replace(reg, [CMDC.Tool.Examples.ReadFile])
      iex> CMDC.Tool.Registry.list(reg)
      [CMDC.Tool.Examples.ReadFile]
  """
  @spec replace(t(), [module()]) :: :ok | {:error, error()}
  def replace(%__MODULE__{ref: ref}, modules) when is_list(modules) do
    with {:ok, batch} <- prepare(modules, ref) do
      ref |> Native.registry_register(batch, true) |> name_module()
    end
  end

  @doc """
  Removes the tool registered under `name` (and its settings).

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> CMDC.Tool.Registry.unregister(reg, "echo")
      :ok
      iex> CMDC.Tool.Registry.unregister(reg, "echo")
      {:error, {:not_found, "echo", []}}
  """
  @spec unregister(t(), String.t()) :: :ok | {:error, {:not_found, String.t(), [String.t()]}}
  def unregister(%__MODULE__{ref: ref}, name) do
    done(Native.registry_unregister(ref, to_name(name)))
  end

  @doc """
  The module registered under `name`: `{:ok, module}`, or
  `{:error, {:not_found, name, suggestions}}` with the nearest registered names ("did you
  mean"), best first. The same lookup as `CMDC.Tool.find/2` on a registry, which keeps cmdc's
  `{:error, :not_found}`: `fetch/2` is where the reason is.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> CMDC.Tool.find(reg, "ecoh")
      {:error, :not_found}
      iex> CMDC.Tool.Registry.fetch(reg, "ecoh")
      {:error, {:not_found, "ecoh", ["echo"]}}
  """
  @spec fetch(t(), String.t()) ::
          {:ok, module()} | {:error, {:not_found, String.t(), [String.t()]}}
  def fetch(%__MODULE__{ref: ref}, name) do
    name = to_name(name)

    Native.with_dirty(registry_fetch(ref, name))
  end

  @doc """
  The registered modules, in registration order.

      iex> reg = CMDC.Tool.Registry.new()
      iex> CMDC.Tool.Registry.list(reg)
      []
  """
  @spec list(t()) :: [module()]
  def list(%__MODULE__{ref: ref}), do: Native.with_dirty(registry_list(ref))

  @doc """
  How many tools are registered.

      iex> CMDC.Tool.Registry.size(CMDC.Tool.Registry.new())
      0
  """
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{ref: ref}) do
    {_generation, size, _reserved} = Native.registry_info(ref)
    size
  end

  @doc """
  The registered names nearest to `name`, best first (at most 3): what a runner answers a model
  that called a tool that does not exist.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.ReadFile)
      iex> CMDC.Tool.Registry.suggest(reg, "raed_file")
      ["read_file"]
  """
  @spec suggest(t(), String.t()) :: [String.t()]
  def suggest(%__MODULE__{ref: ref}, name), do: Native.registry_suggest(ref, to_name(name))

  @doc """
  Stores per-tool settings the runner reads (e.g. `%{policy: :ask_once, timeout_ms: 5000}`),
  replacing earlier ones. The tool must be registered.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> CMDC.Tool.Registry.put_settings(reg, "echo", %{policy: :ask_once, timeout_ms: 5000})
      :ok
      iex> CMDC.Tool.Registry.settings(reg, "echo")
      %{policy: :ask_once, timeout_ms: 5000}
      iex> CMDC.Tool.Registry.put_settings(reg, "nope", %{})
      {:error, {:not_found, "nope", []}}
  """
  @spec put_settings(t(), String.t(), map()) ::
          :ok | {:error, {:not_found, String.t(), [String.t()]}}
  def put_settings(%__MODULE__{ref: ref} = reg, name, settings) when is_map(settings) do
    name = to_name(name)
    before = settings(reg, name)

    with :ok <- done(Native.registry_put_settings(ref, name, :erlang.term_to_binary(settings))) do
      # A namespace given here is the tool's namespace for search too (the one rule,
      # `CMDC.Tool.Deferred.OwnNamespace`): the module is indexed again (its settings stay).
      if namespace(before) != namespace(settings), do: reindex(reg, name), else: :ok
    end
  end

  defp namespace(settings), do: settings["namespace"] || settings[:namespace]

  defp reindex(reg, name) do
    case find(reg, name) do
      {:ok, module} -> register(reg, module)
      _ -> :ok
    end
  end

  @doc """
  A tool's settings: the map given to `put_settings/3`, or `%{}` (also for unknown names).

      iex> CMDC.Tool.Registry.settings(CMDC.Tool.Registry.new(), "echo")
      %{}
  """
  @spec settings(t(), String.t()) :: map()
  def settings(%__MODULE__{ref: ref}, name), do: stored_settings(ref, to_name(name))

  defp stored_settings(ref, name) do
    case Native.registry_settings(ref, name) do
      {:ok, settings} -> settings_map(settings)
      _not_found -> %{}
    end
  end

  @doc """
  Searches the registry's tools (a native index kept current with every registration):
  `{:ok, [{name, score}]}` best first, or `{:error, message}` for a query that cannot be run
  (empty, over 4,096 bytes, a regex over 200 characters or that does not compile, a bad
  option value; an unknown option raises `ArgumentError`, with "did you mean"). See
  `CMDC.Tool.Search` for the modes (`mode: :bm25 | :dense | :hybrid | :regex`; `:hybrid` by
  default once an embedder is attached with `CMDC.Tool.Search.attach/3`), the `namespace:` /
  `annotations:` filters and `rerank:`; `limit:` defaults to 5 (at most 1,000).

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile])
      iex> {:ok, [{"echo", _}]} = CMDC.Tool.Registry.search(reg, "echo back some text", limit: 1)
      iex> {:ok, [{"read_file", _}]} = CMDC.Tool.Registry.search(reg, "^read", mode: :regex)
  """
  @spec search(t(), String.t(), keyword()) ::
          {:ok, [CMDC.Tool.Search.hit()]} | {:error, String.t()}
  def search(%__MODULE__{} = reg, query, opts \\ []) when is_binary(query),
    do: CMDC.Tool.Search.run(reg, query, opts)

  @doc false
  # Used by CMDC.Tool: {:ok, module} | :error, a plain hash lookup.
  def find(%__MODULE__{ref: ref}, name) when is_binary(name) do
    case Native.registry_find(ref, name) do
      nil -> :error
      module -> {:ok, module}
    end
  end

  def find(%__MODULE__{} = reg, name), do: find(reg, to_name(name))

  @doc false
  # CMDC.Tool.validate/3: the arguments only.
  def validate(reg, name, args) do
    with {:ok, {_module, args, _settings}} <- call(reg, name, args), do: {:ok, args}
  end

  @doc false
  # CMDC.Tool.validate_json/3: the decoded arguments only.
  def validate_json(reg, name, text) when is_binary(text) do
    with {:ok, {_module, args, _settings}} <- call_json(reg, name, text), do: {:ok, args}
  end

  def validate_json(%__MODULE__{} = reg, name, other) do
    case fetch(reg, name) do
      {:ok, _} ->
        message = "expected JSON text (a binary), got #{inspect(other, limit: 5)}"
        {:error, [Schema.json_error(message)]}

      error ->
        error
    end
  end

  @doc false
  # What the runner needs of a call, in one native call: the tool resolved, `args` validated
  # (strict mode's nulls dropped, see CMDC.Tool.RoundTrip) and its settings:
  # `{:ok, {module, args, settings}}`, `{:error, errors}` or `{:error, {:not_found, ...}}`.
  def call(%__MODULE__{ref: ref}, name, args),
    do: with_settings(Native.with_dirty(registry_validate(ref, to_name(name), args)))

  @doc false
  # `call/3` for the JSON text a model sent.
  def call_json(%__MODULE__{ref: ref}, name, text) when is_binary(text),
    do: with_settings(Native.with_dirty(registry_validate_json(ref, to_name(name), text)))

  defp with_settings({:ok, {module, args, settings}}),
    do: {:ok, {module, args, settings_map(settings)}}

  defp with_settings(error), do: error

  defp settings_map(bytes) when is_binary(bytes), do: :erlang.binary_to_term(bytes)
  defp settings_map(_none), do: %{}

  defp to_name(name) when is_binary(name), do: name
  defp to_name(name) when is_atom(name), do: Atom.to_string(name)
  defp to_name(name), do: inspect(name)

  # {:ok, [{module, name, description, contextual?, schema, search_meta}]} or the first
  # module's error.
  defp prepare(modules, ref) do
    Enum.reduce_while(modules, {:ok, []}, fn module, {:ok, acc} ->
      case prepare_one(module, ref) do
        {:ok, entry} -> {:cont, {:ok, [entry | acc]}}
        {:error, _} = error -> {:halt, error}
      end
    end)
    |> case do
      {:ok, batch} -> {:ok, Enum.reverse(batch)}
      error -> error
    end
  end

  defp prepare_one(module, ref) when is_atom(module) do
    with :ok <- check_tool(module),
         {:ok, name} <- call(module, :name),
         {:ok, description} <- call(module, :description),
         {:ok, schema} <- schema(module),
         {:ok, _examples} <- examples(module, name) do
      contextual = function_exported?(module, :description, 1)
      # Settings kept from an earlier registration (a reload) still name its namespace.
      stored = if is_binary(name), do: stored_settings(ref, name), else: %{}
      meta = CMDC.Tool.Search.meta(module, name, stored)
      {:ok, {module, name, description, contextual, schema, meta}}
    end
  end

  defp prepare_one(other, _ref) do
    {:error, {:invalid_tool, other, "#{inspect(other)} is not a module; expected a CMDC.Tool"}}
  end

  defp check_tool(module) do
    missing =
      if Code.ensure_loaded?(module) do
        Enum.reject([name: 0, description: 0, parameters: 0, execute: 2], fn {f, a} ->
          function_exported?(module, f, a)
        end)
      else
        :not_loaded
      end

    case missing do
      [] ->
        :ok

      :not_loaded ->
        invalid(module, "#{inspect(module)} is not a CMDC.Tool: the module cannot be loaded")

      missing ->
        list = Enum.map_join(missing, ", ", fn {f, a} -> "#{f}/#{a}" end)

        invalid(
          module,
          "#{inspect(module)} is not a CMDC.Tool: it does not define #{list} " <>
            "(see the CMDC.Tool behaviour)"
        )
    end
  end

  defp call(module, fun) do
    case apply(module, fun, []) do
      value when is_binary(value) ->
        if String.valid?(value),
          do: {:ok, value},
          else: invalid(module, "#{inspect(module)}.#{fun}/0 returned a binary that is not UTF-8")

      other ->
        invalid(module, "#{inspect(module)}.#{fun}/0 must return a string, got #{inspect(other)}")
    end
  rescue
    e -> invalid(module, "#{inspect(module)}.#{fun}/0 raised: #{Exception.message(e)}")
  end

  # The tool's one validator (Schema.for_module/1): the registry and CMDC.Tool.validate/2
  # share it, compiled once per module version.
  defp schema(module) do
    case Schema.for_module(module) do
      {:ok, schema} -> {:ok, schema}
      {:error, message} -> invalid(module, message)
    end
  end

  # Example arguments must match the schema: a wrong example teaches the model a wrong call.
  defp examples(module, name) do
    case CMDC.Tool.InputExamples.check(module, name) do
      {:ok, examples} -> {:ok, examples}
      {:error, message} -> invalid(module, message)
    end
  end

  defp invalid(module, message), do: {:error, {:invalid_tool, module, message}}

  @doc false
  # For `CMDC.Tool.Providers`: the registry's one cache of provider output
  # (native/cmdc_tool_nif/src/registry.rs), `{json, term_etf, fresh?}` for this format,
  # strictness and context, built on a miss (`fresh?` true then: its warnings are new). Here so
  # that only this module reads a registry's native handle.
  @spec provider_output(t(), atom(), boolean(), map()) :: {binary(), binary(), boolean()}
  def provider_output(%__MODULE__{} = reg, format, strict, context) do
    key = :erlang.term_to_binary(context)

    case Native.registry_cached(reg.ref, format, strict, key) do
      {:ok, nil} -> Tuple.append(build(reg, format, strict, context, key), true)
      {:ok, output} -> Tuple.append(output, false)
    end
  end

  # Builds natively from the registry's current generation (descriptions that depend on the
  # context computed here, in Elixir); retries if the registry changed meanwhile.
  defp build(reg, format, strict, context, key, attempts \\ 0) do
    {generation, contextual} = Native.registry_contextual(reg.ref)

    overrides =
      for {name, module} <- contextual,
          description = CMDC.Tool.Structured.description(module, context),
          is_binary(description) and String.valid?(description),
          into: %{},
          do: {name, description}

    case Native.registry_build(reg.ref, format, strict, key, generation, overrides) do
      {:ok, output} ->
        output

      {:error, :stale} when attempts < 100 ->
        build(reg, format, strict, context, key, attempts + 1)

      {:error, :stale} ->
        raise RuntimeError, "the registry changes faster than its tools list can be built"

      {:error, message} ->
        raise ArgumentError, message
    end
  end

  defimpl Inspect do
    def inspect(%{ref: ref, id: id, name: name}, _opts) do
      {_generation, size, _reserved} = CMDC.Tool.Native.registry_info(ref)
      label = if name, do: "#{Kernel.inspect(name)} ", else: ""
      "#CMDC.Tool.Registry<#{label}id: #{id}, tools: #{size}>"
    end
  end
end
