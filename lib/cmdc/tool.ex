defmodule CMDC.Tool do
  @moduledoc """
  The tool behaviour of the cmdc agent framework (v0.5.1), with native validation.

  Any module implementing this behaviour can be registered as a tool an agent's model may call.
  A `tool_call` message from the model triggers it; the result goes back to the model.

      defmodule MyApp.SearchTool do
        @behaviour CMDC.Tool

        @impl true
        def name, do: "search"

        @impl true
        def description, do: "Search the code base"

        @impl true
        def parameters do
          %{
            "type" => "object",
            "properties" => %{"query" => %{"type" => "string", "description" => "Search terms"}},
            "required" => ["query"]
          }
        end

        @impl true
        def execute(%{"query" => query}, _context), do: {:ok, "results for: " <> query}
      end

  Optional callbacks: `c:description/1` receives a `t:tool_context/0` and returns a
  context-aware description (`description/2` falls back to `c:description/0`); `c:meta/1`
  returns a short human-readable summary of one call (`meta/2` falls back to `c:name/0`);
  `c:title/0`, `c:annotations/0` and `c:output_schema/0` describe the tool further for MCP
  clients and give it structured output (see `CMDC.Tool.Structured`).

  ## Results

    * `{:ok, String.t()}` - success; the text goes back to the model as the tool result.
    * `{:error, String.t()}` - failure; the text goes back to the model as the tool result.
    * `{:effect, term()}` - a structured product (e.g. a sub-agent's) the runner handles.

  ## Validation

  `validate/2` checks a call's arguments against the tool's `c:parameters/0` natively (the schema
  is compiled once per module version), and `format_errors/2` turns the errors into one compact
  text a model can act on.

  ## Registries and providers

  `find/2`, `suggest/2`, `to_schema/3` and `to_schema_json/3` take a list of modules (cmdc's
  semantics) or a `CMDC.Tool.Registry`, a native registry shared by many processes; on a
  registry `validate/3` and `validate_json/3` resolve the tool and check its arguments in one
  call. `to_schema/3` speaks every provider's format (`format:` `:openai`, `:openai_responses`,
  `:anthropic`, `:gemini`, `:mcp`, and `strict: true`); see `CMDC.Tool.Providers`.
  """

  alias CMDC.Tool.{Registry, Schema}

  # Caps of format_errors/2's text (a model reads it; a 20,000-property schema gave 430 kB).
  @max_error_lines 20
  @max_message 300
  @max_params 50
  @max_enum 20

  @typedoc "A tool's execution result."
  @type result :: {:ok, String.t()} | {:error, String.t()} | {:effect, term()}

  @typedoc """
  The lightweight context `c:description/1` receives when schemas are generated (runtime facts
  such as the working directory or shell), unlike the full `t:CMDC.Context.t/0` of `c:execute/2`.
  """
  @type tool_context :: %{optional(:working_dir) => String.t(), optional(:shell) => atom()}

  @doc "The tool's name (the `name` field of the model's tool_call)."
  @callback name() :: String.t()

  @doc "A human-readable description of the tool."
  @callback description() :: String.t()

  @doc "A context-aware description (optional); `description/2` falls back to `c:description/0`."
  @callback description(context :: tool_context()) :: String.t()

  @doc "The JSON Schema (Draft 7 unless `$schema` says otherwise) of the tool's arguments."
  @callback parameters() :: map()

  @doc "Executes the tool with the model's arguments (decoded JSON) and the session context."
  @callback execute(args :: map(), context :: CMDC.Context.t()) :: result()

  @doc ~S|A short human-readable summary of one call (optional), e.g. "read lib/cmdc.ex".|
  @callback meta(args :: map()) :: String.t()

  @doc "A human-readable display name (optional; MCP `title`). See `CMDC.Tool.Structured`."
  @callback title() :: String.t()

  @doc """
  Hints about the tool's behaviour for clients (optional; MCP `annotations`), e.g.
  `%{read_only_hint: true, open_world_hint: false}`. See `CMDC.Tool.Structured`.
  """
  @callback annotations() :: map() | keyword()

  @doc """
  The JSON Schema (an object schema) of the tool's structured output (optional; MCP
  `outputSchema`). Such a tool returns `{:ok, json_text}` or `{:ok, map}`; the runner checks the
  value against this schema. See `CMDC.Tool.Structured`.
  """
  @callback output_schema() :: map()

  @doc """
  Example arguments (optional): calls that show a model how the tool is used. Each is checked
  against `c:parameters/0` when the tool is registered (an invalid example is an error naming
  the tool) and sent as Anthropic's `input_examples`, or as an "Examples:" block of the
  description to providers without that field. See `CMDC.Tool.InputExamples`.
  """
  @callback examples() :: [map()]

  @optional_callbacks description: 1,
                      meta: 1,
                      title: 0,
                      annotations: 0,
                      output_schema: 0,
                      examples: 0

  @doc """
  The tool's description: `c:description/1` with `context` when the module defines it, else
  `c:description/0`.

      iex> CMDC.Tool.description(CMDC.Tool.Examples.Echo)
      "Echo the given text back."

      iex> CMDC.Tool.description(CMDC.Tool.Examples.ReadFile, %{working_dir: "/srv"})
      "Read a UTF-8 text file under /srv."
  """
  @spec description(module(), tool_context()) :: String.t()
  def description(tool_module, context \\ %{}),
    do: CMDC.Tool.Structured.description(tool_module, context)

  @doc """
  Finds the tool module with the given name: `{:ok, module}` or `{:error, :not_found}`.

  On a list of modules this is cmdc's linear search; on a `CMDC.Tool.Registry` it is a native
  hash lookup. Not found is `{:error, :not_found}`, as cmdc defines `find/2`; the richer reason
  (the name and the nearest names) is `suggest/2` or `unknown_tool_message/2` on either, or
  `CMDC.Tool.Registry.fetch/2`'s `{:error, {:not_found, name, suggestions}}` on a registry.

      iex> CMDC.Tool.find([CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile], "read_file")
      {:ok, CMDC.Tool.Examples.ReadFile}

      iex> CMDC.Tool.find([CMDC.Tool.Examples.Echo], "nope")
      {:error, :not_found}

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> CMDC.Tool.find(reg, "echo")
      {:ok, CMDC.Tool.Examples.Echo}
  """
  @spec find([module()] | Registry.t(), String.t()) :: {:ok, module()} | {:error, :not_found}
  def find(modules, name) when is_list(modules) do
    case Enum.find(modules, &(&1.name() == name)) do
      nil -> {:error, :not_found}
      module -> {:ok, module}
    end
  end

  def find(%Registry{} = registry, name) do
    case Registry.find(registry, name) do
      {:ok, module} -> {:ok, module}
      :error -> {:error, :not_found}
    end
  end

  @doc """
  The known tool names nearest to `name`, best first (at most 3): "did you mean" for a model
  that called a tool that does not exist. Case, `_` and `-` are ignored, then small edit
  distances and names containing one another count.

      iex> CMDC.Tool.suggest([CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile], "readFile")
      ["read_file"]

      iex> CMDC.Tool.suggest([CMDC.Tool.Examples.Echo], "deploy")
      []
  """
  @spec suggest([module() | String.t()] | Registry.t(), String.t()) :: [String.t()]
  def suggest(tools, name) when is_list(tools) do
    CMDC.Tool.Native.tool_suggest(Enum.map(tools, &tool_name/1), to_string(name))
  end

  def suggest(%Registry{} = registry, name), do: Registry.suggest(registry, name)

  defp tool_name(name) when is_binary(name), do: name
  defp tool_name(module) when is_atom(module), do: module.name()

  @doc """
  What a model gets back when it calls a tool that does not exist: the name it used and the
  nearest known names (`suggest/2`). `tools` is a list of modules or names, or a registry.

      iex> CMDC.Tool.unknown_tool_message(["read_file", "echo"], "readFile")
      "Unknown tool: readFile. Did you mean: read_file?"

      iex> CMDC.Tool.unknown_tool_message([CMDC.Tool.Examples.Echo], "deploy")
      "Unknown tool: deploy."
  """
  @spec unknown_tool_message([module() | String.t()] | Registry.t(), term()) :: String.t()
  def unknown_tool_message(tools, name) when is_binary(name) do
    case {renamed_to(tools, name), suggest(tools, name)} do
      {[new | _], _} ->
        "Unknown tool: #{name}. It was renamed to #{new} by its metadata: call #{new}."

      {[], []} ->
        "Unknown tool: #{name}."

      {[], close} ->
        "Unknown tool: #{name}. Did you mean: #{Enum.join(close, ", ")}?"
    end
  end

  def unknown_tool_message(_tools, name),
    do: "Unknown tool: #{inspect(name)} (a tool name is a string)."

  # The names under which tools renamed by their metadata (`CMDC.Tool.Discovery.Wrapper`, a
  # module answering `__discovery_target__/0`) serve a tool whose own name is `name`.
  defp renamed_to(tools, name) do
    modules = if is_struct(tools, Registry), do: Registry.list(tools), else: tools

    for module <- modules,
        is_atom(module) and function_exported?(module, :__discovery_target__, 0),
        module.__discovery_target__().name() == name,
        do: module.name()
  end

  @doc """
  A short summary of one call: `c:meta/1` when the module defines it, else `c:name/0`.

      iex> CMDC.Tool.meta(CMDC.Tool.Examples.ReadFile, %{"path" => "lib/cmdc.ex"})
      "read lib/cmdc.ex"

      iex> CMDC.Tool.meta(CMDC.Tool.Examples.Echo, %{"text" => "hi"})
      "echo"
  """
  @spec meta(module(), map()) :: String.t()
  def meta(tool_module, args) do
    if exports?(tool_module, :meta, 1), do: tool_module.meta(args), else: tool_module.name()
  end

  @doc """
  Converts tools (a list of modules or a `CMDC.Tool.Registry`) to the tools list a model request
  carries.

  With no options this is cmdc's output: one
  `%{"type" => "function", "function" => %{"name", "description", "parameters"}}` per module.
  Options `format:` (`:openai`, `:openai_responses`, `:anthropic`, `:gemini`, `:mcp`) and
  `strict:` select another provider's shape and OpenAI/Anthropic strict mode; see
  `CMDC.Tool.Providers` (whose `convert/3` also returns the warnings for dropped keywords).
  On a registry the result is cached until the registry changes.

  Where a provider's format cannot say what a schema says, the output changes meaning and a
  warning says how. Option `warnings:` (`CMDC.Tool.Providers.Warnings`): `:log` (default, each
  logged once per tool, format and change at `:warning`), `:raise` (an `ArgumentError`: for
  tests and CI) or `:ignore`.

  Deferred loading (`defer:`, `always_loaded:`, `search:`, `loaded:`): a large catalog stays out
  of the prompt and the model finds tools with a search tool; see `CMDC.Tool.Deferred` and
  `CMDC.Tool.Session`. The warnings of every tool, deferred or not, are reported the same way.
  OpenAI Responses namespaces (`namespaces:`): see `CMDC.Tool.Deferred.Namespaces`.
  `CMDC.Tool.Cluster.to_schema/1` takes the same options for the tools of a cluster.

      iex> [tool] = CMDC.Tool.to_schema([CMDC.Tool.Examples.Echo])
      iex> tool["type"]
      "function"
      iex> Map.keys(tool["function"])
      ["description", "name", "parameters"]

      iex> [tool] = CMDC.Tool.to_schema([CMDC.Tool.Examples.Echo], %{}, format: :anthropic)
      iex> Map.keys(tool)
      ["description", "input_schema", "name"]
  """
  @spec to_schema(CMDC.Tool.Providers.source(), tool_context(), keyword()) :: [map()]
  def to_schema(modules_or_registry, context \\ %{}, opts \\ [])

  def to_schema(modules, context, [])
      when is_list(modules) or is_struct(modules, CMDC.Tool.Providers.Described) do
    CMDC.Tool.Providers.cmdc_to_schema(modules, context)
  end

  def to_schema(source, context, opts) do
    {mode, opts} = Keyword.pop(opts, :warnings, :log)
    mode = CMDC.Tool.Providers.Warnings.mode!(mode)

    if Enum.any?(CMDC.Tool.Deferred.options(), &Keyword.has_key?(opts, &1)) do
      CMDC.Tool.Deferred.to_schema(source, context, [{:warnings, mode} | opts])
    else
      {tools, warnings} = CMDC.Tool.Providers.convert(source, context, opts)
      CMDC.Tool.Providers.Warnings.report(warnings, Keyword.get(opts, :format, :openai), mode)
      tools
    end
  end

  @doc """
  `to_schema/3` as JSON text, ready for an HTTP body (on a registry: cached natively, returned
  without copying).

      iex> CMDC.Tool.to_schema_json([CMDC.Tool.Examples.Echo], %{}, format: :mcp)
      ~s([{"description":"Echo the given text back.","inputSchema":{"properties":{"text":{"description":"Text to echo","type":"string"}},"required":["text"],"type":"object"},"name":"echo"}])
  """
  @spec to_schema_json(CMDC.Tool.Providers.source(), tool_context(), keyword()) :: String.t()
  def to_schema_json(modules_or_registry, context \\ %{}, opts \\ []) do
    if Enum.any?(CMDC.Tool.Deferred.options(), &Keyword.has_key?(opts, &1)),
      do:
        CMDC.Tool.JSON.encode!(CMDC.Tool.Deferred.to_schema(modules_or_registry, context, opts)),
      else: CMDC.Tool.Providers.to_json(modules_or_registry, context, opts)
  end

  @doc """
  Validates a call's arguments against the tool's `c:parameters/0`, natively.

  Returns `{:ok, args}` (the same map, or, for a call shaped by a strict schema, the map
  without the nulls strict mode put for absent optional fields: see `CMDC.Tool.RoundTrip`) or
  `{:error, errors}`, each error a map with the JSON
  Pointer `:path` of the offending value, the failing schema `:keyword`, a `:message` and the
  `:schema_path`. A schema that does not compile gives one error with keyword `"schema"`.
  Arguments that are not JSON (tuples, pids, non-UTF-8 binaries...) give keyword `"json"`.

      iex> CMDC.Tool.validate(CMDC.Tool.Examples.ReadFile, %{"path" => "mix.exs"})
      {:ok, %{"path" => "mix.exs"}}

      iex> {:error, [error]} = CMDC.Tool.validate(CMDC.Tool.Examples.ReadFile, %{"path" => 7})
      iex> Map.take(error, [:path, :keyword])
      %{keyword: "type", path: "/path"}
  """
  @spec validate(module(), term()) :: {:ok, term()} | {:error, [Schema.error()]}
  def validate(tool_module, args), do: Schema.validate_module(tool_module, args)

  @doc """
  `validate/2` that returns the arguments or raises `ArgumentError` with `format_errors/2`'s
  text: for arguments your own code builds (a test, a script), where invalid ones are a bug.

      iex> CMDC.Tool.validate!(CMDC.Tool.Examples.Echo, %{"text" => "hi"})
      %{"text" => "hi"}

      iex> CMDC.Tool.validate!(CMDC.Tool.Examples.Echo, %{"text" => 1})
      ** (ArgumentError) echo: Invalid arguments:
      - at /text: 1 is not of type "string" (type)
      Accepted parameters: text (string, required).
  """
  @spec validate!(module(), term()) :: term()
  def validate!(tool_module, args) do
    case validate(tool_module, args) do
      {:ok, args} ->
        args

      {:error, errors} ->
        raise ArgumentError, "#{tool_module.name()}: " <> format_errors(errors, tool_module)
    end
  end

  @doc """
  Resolves the tool named `tool_name` in a registry and validates `args` against its schema, in
  one native call: `{:ok, args}`, `{:error, errors}` (as `validate/2`), or
  `{:error, {:not_found, tool_name, suggestions}}` when no such tool is registered.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.ReadFile)
      iex> CMDC.Tool.validate(reg, "read_file", %{"path" => "mix.exs"})
      {:ok, %{"path" => "mix.exs"}}
      iex> CMDC.Tool.validate(reg, "readfile", %{"path" => "mix.exs"})
      {:error, {:not_found, "readfile", ["read_file"]}}
  """
  @spec validate(Registry.t(), String.t(), term()) ::
          {:ok, term()}
          | {:error, [Schema.error()]}
          | {:error, {:not_found, String.t(), [String.t()]}}
  def validate(%Registry{} = registry, tool_name, args),
    do: Registry.validate(registry, tool_name, args)

  @doc """
  Decodes the JSON text a model sent and validates it, in one native call:
  `{:ok, args}` (the decoded map) or `{:error, errors}` (keyword `"json"` for broken JSON).

      iex> CMDC.Tool.validate_json(CMDC.Tool.Examples.Echo, ~s({"text": "hi"}))
      {:ok, %{"text" => "hi"}}
  """
  @spec validate_json(module(), String.t()) :: {:ok, term()} | {:error, [Schema.error()]}
  def validate_json(tool_module, text), do: Schema.validate_module_json(tool_module, text)

  @doc """
  Resolves the tool named `tool_name` in a registry, decodes the JSON text the model sent and
  validates it, in one native call: `{:ok, args}`, `{:error, errors}`, or
  `{:error, {:not_found, tool_name, suggestions}}`.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> CMDC.Tool.validate_json(reg, "echo", ~s({"text": "hi"}))
      {:ok, %{"text" => "hi"}}
  """
  @spec validate_json(Registry.t(), String.t(), String.t()) ::
          {:ok, term()}
          | {:error, [Schema.error()]}
          | {:error, {:not_found, String.t(), [String.t()]}}
  def validate_json(%Registry{} = registry, tool_name, text),
    do: Registry.validate_json(registry, tool_name, text)

  @doc """
  Turns validation errors into one compact text a model can act on: what was wrong, where, and
  (given the tool module or its schema) which parameters the tool accepts.

      iex> {:error, errors} = CMDC.Tool.validate(CMDC.Tool.Examples.ReadFile, %{"limit" => 0})
      iex> CMDC.Tool.format_errors(errors, CMDC.Tool.Examples.ReadFile) |> String.split("\\n")
      [
        "Invalid arguments:",
        "- at /limit: 0 is less than the minimum of 1 (minimum)",
        ~s{- at the root: "path" is a required property (required)},
        "Accepted parameters: limit (integer), path (string, required)."
      ]

  The text stays small whatever the call and the schema (a model reads it, and it costs
  tokens): at most #{@max_error_lines} errors, each message cut at #{@max_message} characters, at
  most #{@max_params} accepted parameters (required ones first) and #{@max_enum} values per
  enum; each cut says how many were left out.
  """
  @spec format_errors([Schema.error()], module() | map() | nil) :: String.t()
  def format_errors(errors, tool_or_schema \\ nil) when is_list(errors) do
    sorted = Enum.sort_by(errors, &{&1.path == "", &1.path})
    {shown, rest} = Enum.split(sorted, @max_error_lines)

    lines =
      Enum.map(shown, fn e -> cut("- #{where(e.path)}: #{e.message} (#{e.keyword})") end) ++
        more(length(rest), "error", "errors")

    Enum.join(["Invalid arguments:" | lines] ++ accepted(tool_or_schema), "\n")
  end

  defp where(""), do: "at the root"
  defp where(path), do: "at " <> path

  defp cut(text) do
    if String.length(text) > @max_message,
      do: String.slice(text, 0, @max_message) <> "… (cut)",
      else: text
  end

  defp more(0, _one, _many), do: []
  defp more(1, one, _many), do: ["- … and 1 more #{one}"]
  defp more(n, _one, many), do: ["- … and #{n} more #{many}"]

  defp accepted(nil), do: []

  defp accepted(module) when is_atom(module) do
    accepted(module.parameters())
  rescue
    _ -> []
  end

  defp accepted(%{"properties" => props} = schema) when is_map(props) and props != %{} do
    required = List.wrap(Map.get(schema, "required", []))

    {shown, rest} =
      props
      |> Enum.sort_by(fn {name, _} -> {name not in required, name} end)
      |> Enum.split(@max_params)

    params =
      shown
      |> Enum.sort_by(&elem(&1, 0))
      |> Enum.map(fn {name, sub} ->
        facts = Enum.reject([type_of(sub), name in required && "required"], &(&1 in [nil, false]))
        cut(if facts == [], do: name, else: "#{name} (#{Enum.join(facts, ", ")})")
      end)

    left_out = if rest == [], do: "", else: " (and #{length(rest)} more, not listed)"
    ["Accepted parameters: #{Enum.join(params, ", ")}#{left_out}."]
  end

  defp accepted(_), do: []

  defp type_of(%{"enum" => values}) when is_list(values) do
    {shown, rest} = Enum.split(values, @max_enum)
    more = if rest == [], do: "", else: " (and #{length(rest)} more)"
    "one of: " <> Enum.map_join(shown, ", ", &inspect/1) <> more
  end

  defp type_of(%{"type" => type}) when is_binary(type), do: type
  defp type_of(%{"type" => types}) when is_list(types), do: Enum.join(types, " or ")
  defp type_of(_), do: nil

  defp exports?(module, function, arity) do
    Code.ensure_loaded?(module) and function_exported?(module, function, arity)
  end
end
