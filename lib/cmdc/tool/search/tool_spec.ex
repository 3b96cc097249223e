defmodule CMDC.Tool.Search.ToolSpec do
  @moduledoc false
  # The search tool's interface as data: what `CMDC.Tool.Deferred` declares to providers and
  # `CMDC.Tool.Search.Tool` implements. Deferred sits below `CMDC.Tool` (whose to_schema/3 calls
  # it) and the search tool above it (a `CMDC.Tool`), so Deferred reads this module, never the
  # tool's.

  @name "search_tools"

  def name, do: @name

  def description do
    "Search the catalog of tools that are not loaded yet. Describe the capability you need in " <>
      "a few words (e.g. \"create a GitHub issue\"), or give a regular expression with " <>
      "mode \"regex\" (at most 200 characters, matched against names, descriptions and " <>
      "parameters). The tools found become callable in your next turn."
  end

  def parameters do
    %{
      "type" => "object",
      "properties" => %{
        "query" => %{
          "type" => "string",
          "description" => "What the tool should do, in a few words; or a regex",
          "minLength" => 1,
          "maxLength" => 4096
        },
        "mode" => %{
          "type" => "string",
          "enum" => ["bm25", "regex"],
          "description" => "bm25 (default): natural language; regex: a regular expression"
        },
        "limit" => %{
          "type" => "integer",
          "minimum" => 1,
          "maximum" => 20,
          "description" => "How many tools to return (default 5)"
        }
      },
      "required" => ["query"]
    }
  end

  def output_schema do
    %{
      "type" => "object",
      "properties" => %{"tools" => %{"type" => "array", "items" => %{"type" => "object"}}},
      "required" => ["tools"]
    }
  end

  @doc """
  The search tool as `CMDC.Tool.Providers.Described` data (what providers are given for it in
  `search: :client` mode).
  """
  @spec described() :: map()
  def described do
    %{
      name: @name,
      description: description(),
      parameters: parameters(),
      module: nil,
      fields: %{"outputSchema" => output_schema()},
      examples: [],
      namespace: nil
    }
  end

  @doc "Whether `module` is the library's own search tool (not a user's tool of the same name)."
  @spec own?(term()) :: boolean()
  def own?(module) when is_atom(module),
    do: Code.ensure_loaded?(module) and function_exported?(module, :__cmdc_search_tool__, 0)

  def own?(_), do: false
end
