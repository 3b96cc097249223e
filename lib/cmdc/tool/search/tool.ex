defmodule CMDC.Tool.Search.Tool do
  @moduledoc """
  The client-side search tool, `search_tools`: a `CMDC.Tool` the model calls to find deferred
  tools (see `CMDC.Tool.Deferred`). `CMDC.Tool.Runner` runs it like any other tool (hooks,
  approval, telemetry); it searches the registry the runner resolves calls against.

  Its result is structured (`%{"tools" => [%{"name", "description", "parameters"}]}`, plus
  `"examples"` for a tool that has some: at most 3 valid calls of at most 300 characters; the
  same as JSON text for providers that read text): `CMDC.Tool.Session.observe/2` loads the
  tools found into the next request, `CMDC.Tool.Deferred.anthropic_result/2` and
  `CMDC.Tool.Deferred.openai_search_output/2` turn it into Anthropic `tool_reference` blocks
  and an OpenAI `tool_search_output` item.
  """

  @behaviour CMDC.Tool

  alias CMDC.Tool.Registry

  alias CMDC.Tool.Search.ToolSpec

  @name ToolSpec.name()

  @impl true
  defdelegate name, to: ToolSpec

  @impl true
  defdelegate description, to: ToolSpec

  @impl true
  defdelegate parameters, to: ToolSpec

  @impl true
  defdelegate output_schema, to: ToolSpec

  @doc false
  # The mark by which CMDC.Tool.Deferred knows this module for its own (ToolSpec.own?/1).
  def __cmdc_search_tool__, do: true

  @impl true
  def execute(args, context) do
    # A catalog (CMDC.Tool.MCP.Catalog) names its registry and wants to know what was found;
    # otherwise the registry the runner resolves calls against is searched.
    case {Map.get(context.assigns, :cmdc_tool_search), Map.get(context.private, :tools)} do
      {%{registry: reg, on_found: on_found}, _} ->
        with {:ok, found} <- find(reg, args) do
          on_found.(for %{"name" => name} <- found["tools"], do: name)
          {:ok, found}
        end

      {_, %Registry{} = reg} ->
        find(reg, args)

      _ ->
        {:error, "search_tools needs a CMDC.Tool.Registry to search; none was given"}
    end
  end

  @doc """
  Searches `reg` as the tool does and describes each tool found:
  `{:ok, %{"tools" => [%{"name", "description", "parameters", "examples"?}]}}` or
  `{:error, message}`.
  The search tool never lists itself.
  """
  @spec find(Registry.t(), map()) :: {:ok, map()} | {:error, String.t()}
  def find(reg, args) do
    # Words (the default) rank as the registry ranks: by meaning too when it has an embedder.
    mode = if args["mode"] == "regex", do: [mode: :regex], else: []
    limit = Map.get(args, "limit", 5)

    with {:ok, hits} <- Registry.search(reg, args["query"], [limit: limit + 1] ++ mode) do
      tools =
        for {name, _score} <- hits,
            name != @name,
            {:ok, module} <- [Registry.find(reg, name)],
            do: describe(name, module)

      {:ok, %{"tools" => Enum.take(tools, limit)}}
    end
  end

  # The model reads a found tool's examples with its schema (validated at registration;
  # capped as in descriptions, `CMDC.Tool.InputExamples.capped/1`).
  defp describe(name, module) do
    found = %{
      "name" => name,
      "description" => module.description(),
      "parameters" => module.parameters()
    }

    case CMDC.Tool.InputExamples.for_result(module, name) do
      [] -> found
      examples -> Map.put(found, "examples", examples)
    end
  end
end
