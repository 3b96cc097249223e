defmodule CMDC.Tool.Providers do
  @moduledoc """
  Tool lists in each model provider's format (mirrors `native/cmdc_tool_core/src/providers/`).

  Formats (`format:` option):

    * `:openai` (default) - chat completions, cmdc's shape:
      `%{"type" => "function", "function" => %{"name", "description", "parameters"}}`;
    * `:openai_responses` - the Responses API's flat
      `%{"type" => "function", "name", "description", "parameters", "strict"}` (`"strict"` is
      always given: that API assumes `true` when it is absent);
    * `:anthropic` - `%{"name", "description", "input_schema"}`;
    * `:gemini` - `[%{"functionDeclarations" => [%{"name", "description", "parameters"}]}]`,
      parameters rewritten into Gemini's OpenAPI 3.0 subset (`$ref` inlined, type unions as
      `nullable`, `const` as a one-value `enum`, unsupported keywords dropped with a warning); a
      tool without parameters omits them, as Gemini requires;
    * `:gemini_json_schema` - the same list with `"parametersJsonSchema"`: the full JSON Schema,
      which the current Gemini API also takes (nothing rewritten);
    * `:mcp` - MCP `tools/list` entries `%{"name", "description", "inputSchema"}`. MCP reads an
      `inputSchema` without `$schema` as JSON Schema 2020-12; this library validates such a
      schema as Draft 7, so where the two drafts read it differently (a `$ref` with siblings,
      `items` as a list, `additionalItems`, `dependencies`) the output says
      `"$schema" => "http://json-schema.org/draft-07/schema#"`.

  ## Strict mode

  `strict: true` (OpenAI formats and Anthropic; ignored by the others) rewrites each schema by
  that provider's own rules (the ones its Python package applies):

    * OpenAI: every object closed (`"additionalProperties" => false`) with every property
      required; what was optional becomes a union with null, so the model sends `null` for a
      field it leaves out. `CMDC.Tool.validate/2,3`, `validate_json/2,3`, `CMDC.Tool.Runner`,
      the MCP server and the cluster drop exactly those nulls again (see `CMDC.Tool.RoundTrip`),
      so the tool receives what its original schema means. A `$ref` with siblings is inlined.
    * Anthropic: `required` as the author wrote it, objects closed, one `type` per schema (a
      type union becomes `anyOf`, nullable is `anyOf` with `%{"type" => "null"}`), keywords it
      does not support moved into the description, as its package does.

  Every schema is first read in its dialect (`CMDC.Tool.Schema`: `$schema`, else evidence such
  as Pydantic's `prefixItems` or OpenAPI 3.0's `nullable`; a warning says the choice). Tuples,
  `const` objects, maps and `$ref`s are rewritten into each target's exact form where it has
  one; `docs/PROVIDERS.md` lists every rewrite and every warning.

  Where the target cannot say what the original says, the output changes meaning and a warning
  says how: "the result accepts more than the original" (a constraint dropped; calls are still
  validated against the original) or "accepts less" (e.g. an open object closed). Nothing else
  is lost. OpenAI's limits (5,000 properties, 10 levels of nesting, 1,000 enum values, 120,000
  characters) are checked.

  ## Tool names

  Tool names follow one rule, MCP's: 1 to 128 of `A-Za-z0-9_.-`. OpenAI and Anthropic take
  `^[a-zA-Z0-9_-]{1,64}$`, Gemini a letter or `_` first: their output carries a mapped name
  (`fs.read` → `fs_read`; a name over 64 characters is cut and given a hash suffix), with a
  warning, and `CMDC.Tool.Runner` maps the model's call back. Two tools that one provider would
  be given the same name are refused (`ArgumentError` naming both).

  Warnings are maps `%{tool: name, path: json_pointer, keyword: keyword, message: text}`: `path`
  points into the tool's `parameters` (`""` is the root). `convert/3` returns them;
  `CMDC.Tool.to_schema/3` and `to_json/3` log each once (`warnings: :log`, the default), raise
  (`:raise`) or ignore them (`:ignore`), see `CMDC.Tool.Providers.Warnings`.

  Errors: `convert/3` and `to_json/3` have no error return (cmdc's `to_schema/2` has none);
  they raise `ArgumentError` for an unknown `format:`, a `strict:` that is not a boolean, two
  tools one provider would give the same name, or a module list's `parameters/0` that is not
  JSON.

      iex> {[tool], []} = CMDC.Tool.Providers.convert([CMDC.Tool.Examples.Echo], %{}, format: :mcp)
      iex> tool["inputSchema"]["required"]
      ["text"]

  On a `CMDC.Tool.Registry` the output is built natively and cached in the registry, per
  format, strictness and context, as JSON text and as external term format: a cached
  `to_json/3` (`CMDC.Tool.to_schema_json/3`) returns the stored JSON binary without copying it,
  a cached `convert/3` decodes the stored term (`:erlang.binary_to_term/1`, about 1 µs per tool).
  Any change to the registry's tools (register, unregister, replace) clears its cache; the cache
  keeps at most 64 lists (oldest out first), so any number of contexts is safe. MCP's `title`,
  `annotations` and `outputSchema` are read from the modules on each call, outside the cache.
  """

  alias CMDC.Tool.{Native, Registry}
  alias CMDC.Tool.Providers.{Described, Warnings}

  @typedoc "Something the conversion dropped, rewrote with a loss, or found over a limit."
  @type warning :: %{tool: String.t(), path: String.t(), keyword: String.t(), message: String.t()}

  @typedoc """
  Where the tools come from: modules, a registry, or tools described as data
  (`CMDC.Tool.Providers.Described`, what `CMDC.Tool.Cluster` collects from other nodes).
  """
  @type source :: [module()] | Registry.t() | Described.t()

  @doc """
  The formats `convert/3` knows: one per row of the native format table
  (`native/cmdc_tool_core/src/providers/format.rs`), in its order.

      iex> CMDC.Tool.Providers.formats()
      [:openai, :openai_responses, :anthropic, :gemini, :gemini_json_schema, :mcp]
  """
  @spec formats() :: [atom()]
  def formats, do: Enum.map(Native.providers_formats(), &elem(&1, 0))

  @doc """
  The tools list in a provider's format, and the warnings: `{tools, warnings}`.

  Options: `format:` (see the module doc, default `:openai`) and `strict:` (default `false`).
  A list of modules with neither option gives cmdc's output unchanged (parameters exactly as the
  modules return them) and no warnings.

      iex> {tools, warnings} =
      ...>   CMDC.Tool.Providers.convert([CMDC.Tool.Examples.ReadFile], %{}, format: :openai, strict: true)
      iex> tools |> hd() |> get_in(["function", "parameters", "properties", "limit", "type"])
      ["integer", "null"]
      iex> warnings
      []
  """
  @spec convert(source(), CMDC.Tool.tool_context(), keyword()) :: {[map()], [warning()]}
  def convert(source, context \\ %{}, opts \\ [])

  def convert(modules, context, opts) when is_list(modules) do
    format_strict = options(opts)
    converted(modules, Enum.map(modules, &triple(&1, context)), format_strict, opts)
  end

  def convert(%Described{} = described, _context, opts) do
    format_strict = options(opts)
    converted(described, Described.triples(described), format_strict, opts)
  end

  def convert(%Registry{} = reg, context, opts) do
    {format, strict} = options(opts)
    {_json, term_etf, _fresh?} = Registry.provider_output(reg, format, strict, context)
    {tools, warnings} = :erlang.binary_to_term(term_etf)
    {tools |> with_mcp_fields(format, reg) |> with_examples(format, reg), warnings}
  end

  # A module list's or described tools' output (the registry's comes from its native cache).
  defp converted(source, triples, {format, strict}, opts) do
    if Keyword.take(opts, [:format, :strict]) == [] and
         Enum.all?(triples, &object_root?(elem(&1, 2))) do
      {cmdc_shape(triples), []}
    else
      case Native.providers_convert(triples, format, strict) do
        {:ok, term_etf} ->
          {tools, warnings} = :erlang.binary_to_term(term_etf)
          {tools |> with_mcp_fields(format, source) |> with_examples(format, source), warnings}

        {:error, message} ->
          raise ArgumentError, message
      end
    end
  end

  defp triple(module, context),
    do: {module.name(), CMDC.Tool.Structured.description(module, context), module.parameters()}

  @doc """
  The tools list as JSON text, ready for an HTTP body. On a registry the text is cached natively
  and returned without copying.

      iex> CMDC.Tool.Providers.to_json([CMDC.Tool.Examples.Echo], %{}, format: :anthropic)
      ~s([{"description":"Echo the given text back.","input_schema":{"properties":{"text":{"description":"Text to echo","type":"string"}},"required":["text"],"type":"object"},"name":"echo"}])
  """
  @spec to_json(source(), CMDC.Tool.tool_context(), keyword()) :: String.t()
  def to_json(source, context \\ %{}, opts \\ [])

  def to_json(modules, context, opts) when is_list(modules) or is_struct(modules, Described) do
    {mode, opts} = warnings_mode(opts)
    {tools, warnings} = convert(modules, context, opts)
    Warnings.report(warnings, Keyword.get(opts, :format, :openai), mode)
    CMDC.Tool.JSON.encode!(tools)
  end

  def to_json(%Registry{} = reg, context, opts) do
    {mode, opts} = warnings_mode(opts)
    {format, strict} = options(opts)

    if (format == :mcp and mcp_fields(reg) != %{}) or
         CMDC.Tool.InputExamples.any?(Registry.list(reg)) do
      {tools, warnings} = convert(reg, context, opts)
      Warnings.report(warnings, format, mode)
      CMDC.Tool.JSON.encode!(tools)
    else
      {json, term_etf, fresh?} = Registry.provider_output(reg, format, strict, context)
      # A cached list's warnings were logged when it was built: only `:raise` reads them again.
      if mode == :raise or (mode == :log and fresh?) do
        {_tools, warnings} = :erlang.binary_to_term(term_etf)
        Warnings.report(warnings, format, mode)
      end

      json
    end
  end

  # `warnings:` is `to_schema/3`'s and `to_json/3`'s option (`CMDC.Tool.Providers.Warnings`).
  defp warnings_mode(opts) do
    {mode, opts} = Keyword.pop(opts, :warnings, :log)
    {Warnings.mode!(mode), opts}
  end

  @doc """
  Warnings as text, one line each (what a CLI prints on stderr).

      iex> CMDC.Tool.Providers.format_warnings([
      ...>   %{tool: "t", path: "/properties/x", keyword: "not", message: "`not` at /properties/x dropped"}
      ...> ])
      "t: `not` at /properties/x dropped"
  """
  @spec format_warnings([warning()]) :: String.t()
  defdelegate format_warnings(warnings), to: Warnings, as: :format

  @doc false
  # cmdc's to_schema/2, kept byte for byte.
  def cmdc_to_schema(%Described{} = described, _context),
    do: cmdc_shape(Described.triples(described))

  def cmdc_to_schema(modules, context),
    do: cmdc_shape(Enum.map(modules, &triple(&1, context)))

  defp cmdc_shape(triples) do
    Enum.map(triples, fn {name, description, parameters} ->
      %{
        "type" => "function",
        "function" => %{"name" => name, "description" => description, "parameters" => parameters}
      }
    end)
  end

  # Without options cmdc's output is kept as it is unless a root is not an object schema (e.g.
  # Pydantic's `{"$defs", "$ref"}`, which the native conversion inlines, with its warnings).
  defp object_root?(%{"type" => "object"}), do: true
  defp object_root?(_), do: false

  # MCP's tool objects have a place for a tool's title, annotations and output schema
  # (`CMDC.Tool.Structured`); read from the modules on each call, so no cache holds them.
  defp with_mcp_fields(tools, :mcp, source) do
    case mcp_fields(source) do
      fields when fields == %{} -> tools
      fields -> Enum.map(tools, &Map.merge(&1, Map.get(fields, &1["name"], %{})))
    end
  end

  defp with_mcp_fields(tools, _format, _source), do: tools

  # A tool's examples (`CMDC.Tool.InputExamples`): Anthropic's `input_examples`, else a block at
  # the end of the description. A pass of its own over the output, read from the modules on
  # each call like the MCP fields, so the provider cache never holds them.
  defp with_examples(tools, format, %Registry{} = reg),
    do: with_examples(tools, format, Registry.list(reg))

  defp with_examples(tools, format, %Described{} = described),
    do: CMDC.Tool.InputExamples.put_all(tools, format, Described.examples(described))

  defp with_examples(tools, format, modules),
    do: CMDC.Tool.InputExamples.with_examples(tools, format, modules)

  defp mcp_fields(%Registry{} = reg), do: mcp_fields(Registry.list(reg))
  defp mcp_fields(%Described{} = described), do: Described.fields(described)

  defp mcp_fields(modules) do
    for module <- modules,
        fields = CMDC.Tool.Structured.mcp_fields(module),
        fields != %{},
        into: %{},
        do: {module.name(), fields}
  end

  @doc """
  Every option `CMDC.Tool.to_schema/3` takes (`CMDC.Tool.Cluster.to_schema/1` takes them too).

      iex> :namespaces in CMDC.Tool.Providers.schema_options()
      true
  """
  @spec schema_options() :: [atom()]
  def schema_options, do: [:format, :strict, :warnings | deferral_options()]

  @doc false
  # The options of the deferral pass (`CMDC.Tool.Deferred.options/0`). Written here, the lower
  # module, so that this one can check every option without calling the pass.
  @spec deferral_options() :: [atom()]
  def deferral_options, do: [:defer, :always_loaded, :search, :loaded, :namespaces]

  defp options(opts) do
    CMDC.Tool.Options.check!(
      opts,
      schema_options(),
      "CMDC.Tool.to_schema/3 (and to_schema_json/3, Providers.convert/3, Providers.to_json/3)"
    )

    format = Keyword.get(opts, :format, :openai)
    strict = Keyword.get(opts, :strict, false)

    formats = formats()

    unless format in formats do
      raise ArgumentError,
            "unknown format #{inspect(format)}; expected one of #{inspect(formats)}"
    end

    unless is_boolean(strict) do
      raise ArgumentError, "strict: expects true or false, got #{inspect(strict)}"
    end

    {format, strict}
  end
end
