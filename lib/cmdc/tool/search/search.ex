defmodule CMDC.Tool.Search do
  @moduledoc """
  Tool search over a `CMDC.Tool.Registry` (mirrors `native/cmdc_tool_nif/src/search.rs` and
  `native/cmdc_tool_core/src/search/`): each registry keeps a native index of its tools,
  updated with every registration, so a catalog of thousands of tools can stay out of the
  prompt and be found when the model needs one (see `CMDC.Tool.Deferred`).

  Two modes:

    * `:bm25` (default) - natural language, ranked by BM25 over the tool's name (split on
      `_ . -` and case: `readFile` is "read file"), title, description, parameter names and
      descriptions and namespace, name words weighing most;
    * `:regex` - a regular expression (at most 200 characters, case-insensitive, matched in
      linear time: no pattern can stall it) over the same text; name matches first.

  Filters: `namespace:` (a name or a list; a tool's namespace by the one rule
  `CMDC.Tool.Deferred.OwnNamespace` states and `to_schema`'s `namespaces: true` groups by: the
  registry settings' `"namespace"` (a plugin's name, metadata, `Registry.put_settings/3`), its
  `tool_options/0` or metadata `namespace`, an MCP tool's server; a name's `github__` prefix
  alone is none) and `annotations:` (hints that must be true: `:read_only`,
  `"readOnlyHint"`, `:destructive`, ...).

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile])
      iex> {:ok, [{"read_file", _score} | _]} = CMDC.Tool.Registry.search(reg, "open a file and read it")
      iex> CMDC.Tool.Registry.search(reg, "", [])
      {:error, ~s(the search query is empty: describe the tool you need in a few words, e.g. "read a file")}

  A search costs a few µs on a normal scheduler; one that would read more (a huge catalog, a
  regex over every tool of 100,000) runs on a dirty scheduler.
  """

  alias CMDC.Tool.{Native, Structured}
  require Native

  @options [:limit, :mode, :namespace, :annotations]

  @typedoc "A found tool: its registered name and score (higher is better)."
  @type hit :: {String.t(), float()}

  @doc false
  # CMDC.Tool.Registry.search/3 (documented there), over the registry's native resource: the
  # registry calls this module, never the reverse.
  @spec run(reference(), String.t(), keyword()) :: {:ok, [hit()]} | {:error, String.t()}
  def run(ref, query, opts) when is_binary(query) do
    CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Registry.search/3")

    with {:ok, nif_opts} <- options(opts) do
      case Native.with_dirty(registry_search(ref, query, nif_opts)) do
        {:ok, {_generation, hits}} -> {:ok, hits}
        {:error, message} -> {:error, message}
      end
    end
  end

  defp options(opts) do
    limit = Keyword.get(opts, :limit, 5)
    mode = Keyword.get(opts, :mode, :bm25)
    namespaces = opts |> Keyword.get(:namespace, []) |> List.wrap()
    annotations = opts |> Keyword.get(:annotations, []) |> List.wrap()

    cond do
      not (is_integer(limit) and limit >= 1) ->
        {:error, "limit: expects a positive integer, got #{inspect(limit)}"}

      mode not in [:bm25, :regex] ->
        {:error, "mode: expects :bm25 or :regex, got #{inspect(mode)}"}

      not Enum.all?(namespaces ++ annotations, &(is_binary(&1) or is_atom(&1))) ->
        {:error, "namespace: and annotations: expect names (strings or atoms)"}

      true ->
        {:ok,
         %{
           regex: mode == :regex,
           limit: min(limit, 1_000),
           namespaces: Enum.map(namespaces, &to_string/1),
           annotations: Enum.map(annotations, &to_string/1)
         }}
    end
  end

  @doc false
  # What the index reads of a module beyond name, description and parameters:
  # `{title, namespace, true_annotations}` (CMDC.Tool.Registry sends it with the module and the
  # registry's settings of the name).
  @spec meta(module(), String.t(), map()) :: {String.t() | nil, String.t() | nil, [String.t()]}
  def meta(module, name, settings \\ %{}) do
    title = safe(fn -> Structured.title(module) end)
    annotations = safe(fn -> Structured.annotations(module) end) || %{}
    hints = for {key, true} <- annotations, do: to_string(key)
    namespace = CMDC.Tool.Deferred.OwnNamespace.of(module, name, settings)
    {if(is_binary(title), do: title), namespace, hints}
  end

  defp safe(fun) do
    fun.()
  rescue
    _ -> nil
  end
end
