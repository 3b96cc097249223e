defmodule CMDC.Tool.Search do
  @moduledoc """
  Tool search over a `CMDC.Tool.Registry` (mirrors `native/cmdc_tool_nif/src/search.rs` and
  `native/cmdc_tool_core/src/search/`): each registry keeps a native index of its tools,
  updated with every registration, so a catalog of thousands of tools can stay out of the
  prompt and be found when the model needs one (see `CMDC.Tool.Deferred`).

  Modes:

    * `:bm25` - natural language, ranked by BM25F: the tool's name (split on `_ . -` and case:
      `readFile` is "read file"), title, description, parameter names and descriptions and
      namespace, each a field with its weight (name words weigh most);
    * `:dense` - by meaning: the query's embedding against each tool's, by cosine (needs an
      embedder, `attach/3`);
    * `:hybrid` - both rankings fused by reciprocal rank: a request that shares no word with
      the right tool ("show me what's inside settings.yaml" for `read_text_file`) is found by
      meaning, an exact name by its words;
    * `:regex` - a regular expression (at most 200 characters, case-insensitive, matched in
      linear time: no pattern can stall it) over the same text; name matches first.

  The default is `:hybrid` when the registry has an embedder (`attach/3`), else `:bm25`
  (`ranking/1` says which). Every path that searches a registry — `search_tools`
  (`CMDC.Tool.Search.Tool`), OpenAI's client `tool_search`, Anthropic's client search, the
  MCP catalog (`CMDC.Tool.MCP.Catalog`) — calls `CMDC.Tool.Registry.search/3`, so all of them
  rank alike.

  Options of `CMDC.Tool.Registry.search/3`: `limit:` (default 5, at most 1,000), `mode:`
  (`:bm25`, `:dense`, `:hybrid`, `:regex`), `namespace:`, `annotations:`, `rerank:` and
  `rerank_depth:`. Unknown names raise `ArgumentError`; bad values are `{:error, message}`.

  An embedder that fails on the query (a network API down) does not fail the search: it runs as
  `:bm25` and a warning is logged. `mode: :dense` without an embedder is an error.

  Rerank: `rerank: fun` is called with the query and the best `rerank_depth:` (default 20)
  candidates, `[{name, score}]`, and answers them reordered (a list of names, or of `{name,
  score}`; names not among the candidates are dropped) — a cross-encoder, an LLM judging each
  candidate; the first `limit` are returned. A reranker that raises or answers something else
  leaves the search's own order (and a warning is logged).

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
      iex> CMDC.Tool.Search.ranking(reg).mode
      :bm25

  A BM25F search costs a few µs on a normal scheduler; one that would read more (a huge
  catalog, a regex over every tool of 100,000, a dense scan of many vectors) runs on a dirty
  scheduler. A `:hybrid` or `:dense` search first embeds the query (milliseconds with the
  native model). See `docs/SEARCH.md`.
  """

  alias CMDC.Tool.{Native, Structured}
  alias CMDC.Tool.Search.{Embedder, Vectors}
  require Native
  require Logger

  @search_opts [:limit, :mode, :namespace, :annotations, :rerank, :rerank_depth]

  @typedoc "A `CMDC.Tool.Registry` (read here by its fields only: the registry calls this module)."
  @type registry :: %{
          required(:ref) => reference(),
          required(:id) => pos_integer(),
          optional(atom()) => term()
        }

  @typedoc "A found tool: its registered name and score (higher is better)."
  @type hit :: {String.t(), float()}

  @doc false
  # CMDC.Tool.Registry.search/3 (its documentation points here), over the registry's fields
  # (`ref`, `id`): the registry calls this module, never the reverse.
  #
  # Options and what they do: the module doc.
  @spec run(registry(), String.t(), keyword()) :: {:ok, [hit()]} | {:error, String.t()}
  def run(%{ref: ref} = reg, query, opts) when is_binary(query) do
    CMDC.Tool.Options.check!(opts, @search_opts, "CMDC.Tool.Registry.search/3")
    attached = attached(reg)

    with {:ok, nif_opts} <- options(opts, attached),
         {:ok, nif_opts} <- with_vector(reg, attached, query, nif_opts),
         {:ok, hits} <- ranked(ref, query, nif_opts, opts) do
      {:ok, hits}
    end
  end

  defp ranked(ref, query, nif_opts, opts) do
    case Keyword.get(opts, :rerank) do
      nil ->
        call(ref, query, nif_opts)

      fun when is_function(fun, 2) ->
        depth = Keyword.get(opts, :rerank_depth, 20)

        with {:ok, candidates} <-
               call(ref, query, %{nif_opts | limit: max(depth, nif_opts.limit)}) do
          {:ok, rerank(fun, query, candidates) |> Enum.take(nif_opts.limit)}
        end

      other ->
        {:error,
         "rerank: expects a function of 2 arguments (query, candidates), got #{inspect(other)}"}
    end
  end

  defp call(ref, query, nif_opts) do
    case Native.with_dirty(registry_search(ref, query, nif_opts)) do
      {:ok, {_generation, hits}} -> {:ok, hits}
      {:error, message} -> {:error, message}
    end
  end

  defp rerank(fun, query, candidates) do
    scores = Map.new(candidates)

    answer =
      try do
        fun.(query, candidates)
      rescue
        e -> {:raised, e}
      end

    case answer do
      list when is_list(list) ->
        list
        |> Enum.flat_map(fn
          {name, score} when is_map_key(scores, name) and is_number(score) ->
            [{name, score * 1.0}]

          name when is_map_key(scores, name) ->
            [{name, scores[name]}]

          _ ->
            []
        end)
        |> Enum.uniq_by(&elem(&1, 0))

      other ->
        Logger.warning(
          "CMDC.Tool.Search: the reranker answered #{inspect(other, limit: 5)}; " <>
            "the search's own order is kept"
        )

        candidates
    end
  end

  # The query's vector for the dense and hybrid modes (the registry's tools synced first).
  defp with_vector(_reg, _attached, _query, %{mode: mode} = o) when mode in [:bm25, :regex],
    do: {:ok, o}

  defp with_vector(_reg, nil, _query, %{mode: :dense}),
    do: {:error, "mode: :dense needs an embedder: attach one with CMDC.Tool.Search.attach/3"}

  defp with_vector(_reg, nil, _query, o), do: {:ok, %{o | mode: :bm25}}

  defp with_vector(reg, %{embedder: embedder} = attached, query, o) do
    with {:ok, _} <- Vectors.sync(reg.ref, embedder, attached.cache),
         {:ok, [vector]} <- Embedder.embed(embedder, [query]) do
      {:ok, %{o | vector: vector}}
    else
      {:error, message} when o.mode == :hybrid ->
        Logger.warning("CMDC.Tool.Search: #{message}; this search ranks by BM25F alone")
        {:ok, %{o | mode: :bm25}}

      {:error, message} ->
        {:error, message}
    end
  end

  defp options(opts, attached) do
    limit = Keyword.get(opts, :limit, 5)
    mode = Keyword.get(opts, :mode, if(attached, do: :hybrid, else: :bm25))
    namespaces = opts |> Keyword.get(:namespace, []) |> List.wrap()
    annotations = opts |> Keyword.get(:annotations, []) |> List.wrap()
    depth = Keyword.get(opts, :rerank_depth, 20)

    cond do
      not (is_integer(limit) and limit >= 1) ->
        {:error, "limit: expects a positive integer, got #{inspect(limit)}"}

      mode not in [:bm25, :regex, :dense, :hybrid] ->
        {:error, "mode: expects :bm25, :dense, :hybrid or :regex, got #{inspect(mode)}"}

      not (is_integer(depth) and depth in 1..1_000) ->
        {:error, "rerank_depth: expects an integer from 1 to 1000, got #{inspect(depth)}"}

      not Enum.all?(namespaces ++ annotations, &(is_binary(&1) or is_atom(&1))) ->
        {:error, "namespace: and annotations: expect names (strings or atoms)"}

      true ->
        {:ok,
         %{
           mode: mode,
           limit: min(limit, 1_000),
           namespaces: Enum.map(namespaces, &to_string/1),
           annotations: Enum.map(annotations, &to_string/1),
           vector: nil
         }}
    end
  end

  @doc """
  Gives `reg` an embedder (`CMDC.Tool.Search.Embedder`): every tool gets its vector now (from
  the disk cache when this model has seen the same tool content before, see
  `CMDC.Tool.Search.Vectors`), tools registered later get theirs at the next search, and
  searches default to `:hybrid`. Attaching another model replaces the vectors.
  `{:ok, %{cached: n, computed: m}}` or `{:error, message}` (the registry then searches as
  before).

  Options: `cache:` (the vector cache folder; `false` keeps none on disk).
  """
  @spec attach(registry(), Embedder.t(), keyword()) ::
          {:ok, %{cached: non_neg_integer(), computed: non_neg_integer()}}
          | {:error, String.t()}
  def attach(%{ref: _, id: _} = reg, {module, _} = embedder, opts \\ []) when is_atom(module) do
    CMDC.Tool.Options.check!(opts, [:cache], "CMDC.Tool.Search.attach/3")
    cache = cache_dir(Keyword.get(opts, :cache, Vectors.default_cache()))
    id = Embedder.id(embedder)
    before = attached(reg)

    if before == nil or before.id != id do
      {:ok, _} = Native.with_dirty(registry_set_vectors(reg.ref, [], true))
    end

    case Vectors.sync(reg.ref, embedder, cache) do
      {:ok, stats} ->
        :persistent_term.put(key(reg), %{embedder: embedder, id: id, cache: cache})
        {:ok, stats}

      {:error, message} ->
        {:ok, _} = Native.with_dirty(registry_set_vectors(reg.ref, [], true))
        if before, do: :persistent_term.erase(key(reg))
        {:error, message}
    end
  end

  defp cache_dir(false),
    do: Path.join(System.tmp_dir!(), "cmdc_tool_vectors_#{System.unique_integer([:positive])}")

  defp cache_dir(dir) when is_binary(dir), do: Path.expand(dir)

  @doc "Takes `reg`'s embedder away: searches rank by BM25F again. `:ok`."
  @spec detach(registry()) :: :ok
  def detach(%{ref: _, id: _} = reg) do
    :persistent_term.erase(key(reg))
    {:ok, _} = Native.with_dirty(registry_set_vectors(reg.ref, [], true))
    :ok
  end

  @doc """
  How `reg` ranks: `%{mode: :hybrid | :bm25, embedder: id | nil, tools: n, vectors: n,
  dimension: d, vector_bytes: b, note: text}` — `note` says in words what a search does.
  """
  @spec ranking(registry()) :: map()
  def ranking(%{ref: ref, id: _} = reg) do
    {tools, vectors, dim, bytes} = Native.registry_vector_info(ref)
    attached = attached(reg)

    {mode, note} =
      case attached do
        nil ->
          {:bm25,
           "BM25F only: no embedder attached, so requests that share no word with a tool's " <>
             "name or description may miss it (CMDC.Tool.Search.attach/3 adds meaning)"}

        %{id: id} ->
          {:hybrid, "BM25F fused with dense vectors of #{id} (reciprocal rank fusion)"}
      end

    %{
      mode: mode,
      embedder: attached && attached.id,
      tools: tools,
      vectors: vectors,
      dimension: dim,
      vector_bytes: bytes,
      note: note
    }
  end

  defp key(%{id: id}), do: {__MODULE__, id}
  defp attached(reg), do: :persistent_term.get(key(reg), nil)

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
