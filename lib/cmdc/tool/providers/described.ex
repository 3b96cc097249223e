defmodule CMDC.Tool.Providers.Described do
  @moduledoc """
  Tools given as data instead of modules: what `CMDC.Tool.Providers` reads from a tool module
  (name, description, parameters, MCP fields, examples) and what
  `CMDC.Tool.Deferred.Namespaces` reads for its namespace, taken once where the modules live.

  `CMDC.Tool.Cluster` describes the tools of each node on that node (their modules may exist
  there only) and passes the result to `CMDC.Tool.to_schema/3` as a source, so a cluster's
  tools go through the one conversion, deferral and grouping path a module list takes, and
  give the same output.

      iex> alias CMDC.Tool.Providers.Described
      iex> described = Described.new([CMDC.Tool.Examples.Echo])
      iex> CMDC.Tool.to_schema(described, %{}, format: :mcp) ==
      ...>   CMDC.Tool.to_schema([CMDC.Tool.Examples.Echo], %{}, format: :mcp)
      true
  """

  alias CMDC.Tool.Registry

  @typedoc "One tool as data. `namespace` is its own namespace (`nil` without one)."
  @type tool :: %{
          name: String.t(),
          description: String.t(),
          parameters: map(),
          module: module(),
          fields: map(),
          examples: [map()],
          namespace: String.t() | nil
        }

  @type t :: %__MODULE__{tools: [tool()]}
  defstruct tools: []

  @doc """
  The tools of `source` (modules or a `CMDC.Tool.Registry`) as data, descriptions for
  `context`. `namespace` is left `nil`: whoever needs it fills it
  (`CMDC.Tool.Deferred.Namespaces.own_namespace/3`, which reads the registry's settings).
  """
  @spec new([module()] | Registry.t(), CMDC.Tool.tool_context()) :: t()
  def new(source, context \\ %{}) do
    modules = if match?(%Registry{}, source), do: Registry.list(source), else: source
    %__MODULE__{tools: Enum.map(modules, &tool(&1, context))}
  end

  defp tool(module, context) do
    name = module.name()

    %{
      name: name,
      description: CMDC.Tool.Structured.description(module, context),
      parameters: module.parameters(),
      module: module,
      fields: CMDC.Tool.Structured.mcp_fields(module),
      examples: CMDC.Tool.InputExamples.checked(module, name),
      namespace: nil
    }
  end

  @doc "`{name, description, parameters}` of each tool (what the native conversion takes)."
  @spec triples(t()) :: [{String.t(), String.t(), map()}]
  def triples(%__MODULE__{tools: tools}),
    do: Enum.map(tools, &{&1.name, &1.description, &1.parameters})

  @doc "MCP's `title`/`annotations`/`outputSchema` by tool name (tools that have any)."
  @spec fields(t()) :: %{String.t() => map()}
  def fields(%__MODULE__{tools: tools}),
    do: for(t <- tools, t.fields != %{}, into: %{}, do: {t.name, t.fields})

  @doc "Checked examples by tool name (tools that have any)."
  @spec examples(t()) :: %{String.t() => [map()]}
  def examples(%__MODULE__{tools: tools}),
    do: for(t <- tools, t.examples != [], into: %{}, do: {t.name, t.examples})
end
