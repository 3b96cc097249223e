# Quality per set and variant, and the figures of dense retrieval (read by bench/search.exs).
#
# Variants, each over the same bench index (`Native.search_bench_*`, the registry's code):
#   BM25 (plain)  one field, words = lower-case alphanumeric runs, no name splitting, no
#                 stemming, Okapi k1 1.5 b 0.75 with rank_bm25's idf floor: what a plain BM25
#                 library gives over "name description parameters" (computed here, in Elixir)
#   BM25F         the index's words mode (fields weighted, names split, stemmed)
#   dense         all-MiniLM-L6-v2 (the native embedder) cosine, i8-quantized vectors
#   hybrid        BM25F and dense fused by reciprocal rank (K = 60, depth 50)
#
# Tool vectors come from the disk cache of CMDC.Tool.Search.Vectors (first run: computed).
defmodule SearchBench.Semantic do
  alias CMDC.Tool.{JSON, Native}
  alias CMDC.Tool.Search.{Embedder, Vectors}

  def run(sets) do
    case CMDC.Tool.Search.Embedder.Native.fetch() do
      {:ok, dir} ->
        # One core for the model's matrix products: the figures are per core.
        System.put_env("RAYON_NUM_THREADS", "1")
        embedder = CMDC.Tool.Search.Embedder.Native.load!(dir)
        IO.puts("model: #{Embedder.id(embedder)} (#{dir})\n")
        quality(sets, embedder)

      {:error, reason} ->
        IO.puts("dense variants skipped: #{reason}\n")
        quality(sets, nil)
    end
  end

  defp quality(sets, embedder) do
    IO.puts(
      String.pad_trailing("set (tools, queries)", 44) <>
        String.pad_trailing("variant", 14) <> "recall@1  recall@5  nDCG@10"
    )

    results =
      for set <- sets do
        docs = for {n, d, p} <- set.tools, do: {n, d, JSON.encode!(p)}
        {index, _} = Native.search_bench_build(docs)
        vectors? = embedder && put_vectors(index, embedder)
        texts = Enum.map(set.queries, &elem(&1, 0))

        qvec =
          if vectors?, do: embed_queries(embedder, texts), else: Enum.map(texts, fn _ -> nil end)

        paired = Enum.zip(texts, qvec)

        variants =
          [{"BM25 (plain)", plain_bm25(set.tools)}] ++
            for {label, mode} <- [{"BM25F", :bm25}, {"dense", :dense}, {"hybrid", :hybrid}],
                mode == :bm25 or vectors? do
              {:ok, {_, tops}} = Native.search_bench_query_mode(index, paired, mode, 10, 1)
              tops = Map.new(Enum.zip(texts, tops))
              {label, &Map.fetch!(tops, &1)}
            end

        label =
          "#{set.label} (#{length(set.tools)}, #{length(set.queries)})" <>
            if(set.held_out, do: " *", else: "")

        rows =
          for {{variant, rank}, i} <- Enum.with_index(variants) do
            {r1, r5, n10} = SearchBench.score(set.queries, rank)
            head = if i == 0, do: label, else: ""

            IO.puts(
              String.pad_trailing(head, 44) <>
                String.pad_trailing(variant, 14) <> "#{f(r1)}     #{f(r5)}     #{f(n10)}"
            )

            {variant, r5}
          end

        {set.label, rows}
      end

    IO.puts("* held out from all tuning\n")

    for {label, rows} <- results do
      rows = Map.new(rows)

      if rows["BM25F"] < rows["BM25 (plain)"],
        do: IO.puts("NOT MET on #{label}: BM25F recall@5 below plain BM25's")
    end

    if embedder, do: speed(sets, embedder)
  end

  # Sets every tool's vector (cache, else the model); true when all have one.
  defp put_vectors(index, embedder) do
    id = Embedder.id(embedder)
    dir = Vectors.model_dir(Vectors.default_cache(), id)
    File.mkdir_p!(dir)
    passages = Native.search_bench_passages(index)

    {cached, todo} =
      Enum.split_with(passages, fn {_, p} -> File.exists?(Vectors.path(dir, id, p)) end)

    computed =
      todo
      |> Enum.chunk_every(64)
      |> Enum.flat_map(fn chunk ->
        {:ok, vs} = Embedder.embed(embedder, Enum.map(chunk, &elem(&1, 1)))

        for {{name, p}, v} <- Enum.zip(chunk, vs) do
          File.write!(Vectors.path(dir, id, p), v)
          {name, v}
        end
      end)

    read = for {name, p} <- cached, do: {name, File.read!(Vectors.path(dir, id, p))}
    {:ok, _} = Native.search_bench_set_vectors(index, read ++ computed)

    if todo != [],
      do: IO.puts("  (#{length(todo)} tool vectors computed, #{length(cached)} cached)")

    true
  end

  defp embed_queries(embedder, texts) do
    texts
    |> Enum.chunk_every(64)
    |> Enum.flat_map(fn chunk ->
      {:ok, vs} = Embedder.embed(embedder, chunk)
      vs
    end)
  end

  # ----------------------------------------------------------------------------------------
  # Plain BM25 (rank_bm25's BM25Okapi: k1 1.5, b 0.75, negative idf floored at 0.25 × mean)

  defp plain_bm25(tools) do
    docs = for {n, d, p} <- tools, do: {n, words("#{n} #{d} #{param_text(p)}")}
    n = length(docs)
    avgdl = Enum.sum(Enum.map(docs, fn {_, w} -> length(w) end)) / max(n, 1)

    postings =
      for {name, ws} <- docs, {w, tf} <- Enum.frequencies(ws), reduce: %{} do
        acc -> Map.update(acc, w, [{name, tf, length(ws)}], &[{name, tf, length(ws)} | &1])
      end

    idf =
      for {w, ps} <- postings,
          into: %{},
          do: {w, :math.log((n - length(ps) + 0.5) / (length(ps) + 0.5))}

    floor = 0.25 * Enum.sum(Map.values(idf)) / max(map_size(idf), 1)
    idf = Map.new(idf, fn {w, v} -> {w, if(v < 0, do: floor, else: v)} end)

    fn query ->
      query
      |> words()
      |> Enum.reduce(%{}, fn w, acc ->
        Enum.reduce(Map.get(postings, w, []), acc, fn {name, tf, dl}, acc ->
          s = idf[w] * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * dl / avgdl))
          Map.update(acc, name, s, &(&1 + s))
        end)
      end)
      |> Enum.sort_by(fn {name, s} -> {-s, name} end)
      |> Enum.take(10)
      |> Enum.map(&elem(&1, 0))
    end
  end

  defp words(text), do: text |> String.downcase() |> String.split(~r/[^\p{L}\p{N}]+/u, trim: true)

  defp param_text(%{"properties" => props}) when is_map(props) do
    Enum.map_join(props, " ", fn {k, v} ->
      "#{k} #{if is_map(v), do: v["description"], else: ""} #{if is_map(v), do: param_text(v), else: ""}"
    end)
  end

  defp param_text(_), do: ""

  # ----------------------------------------------------------------------------------------
  # Speed with vectors

  def speed(sets, embedder) do
    own = hd(sets)
    texts = own.queries |> Enum.map(&elem(&1, 0)) |> Enum.take(100)

    # Embedding one query, one core (RAYON_NUM_THREADS=1): wall time of the NIF call, the
    # machine's load included (printed), and the median.
    walls =
      for t <- texts do
        {us, {:ok, [_]}} = :timer.tc(fn -> Embedder.embed(embedder, [t]) end)
        us
      end

    passages = own.tools |> Enum.take(50) |> Enum.map(fn {n, d, _} -> "#{n}. #{d}" end)

    tool_walls =
      for p <- passages do
        {us, {:ok, [_]}} = :timer.tc(fn -> Embedder.embed(embedder, [p]) end)
        us
      end

    load = File.read!("/proc/loadavg") |> String.split() |> Enum.take(3) |> Enum.join(" ")
    IO.puts("load average: #{load}")

    IO.puts(
      "embedding one query (1 thread, wall, median of #{length(walls)}): #{ms(median(walls) * 1000)} " <>
        "(p90 #{ms(pct(walls, 90) * 1000)}); target <= 5 ms on one core"
    )

    IO.puts(
      "embedding one tool's passage (median of #{length(tool_walls)}): #{ms(median(tool_walls) * 1000)}"
    )

    # 10k tools: the own set repeated under numbered names, each copy with its tool's vector.
    n = 10_000
    m = length(own.tools)
    arr = List.to_tuple(own.tools)

    docs =
      for i <- 0..(n - 1) do
        {name, d, p} = elem(arr, rem(i, m))
        {"#{name}_#{i}", d, JSON.encode!(p)}
      end

    {index, _} = Native.search_bench_build(docs)

    {small, _} =
      Native.search_bench_build(for {nm, d, p} <- own.tools, do: {nm, d, JSON.encode!(p)})

    # The passages first: once a tool has its vector it is no longer listed as missing one.
    by_passage = Map.new(Native.search_bench_passages(small))
    put_vectors(small, embedder)

    base =
      for {nm, _, _} <- own.tools, into: %{} do
        p = by_passage[nm]
        {nm, File.read!(Vectors.path(dir_of(embedder), Embedder.id(embedder), p))}
      end

    vectors =
      for {{nm, _, _}, i} <- Enum.with_index(Stream.cycle(own.tools) |> Enum.take(n)),
          do: {"#{nm}_#{i}", base[nm]}

    {:ok, set_ns} = Native.search_bench_set_vectors(index, vectors)
    {count, bytes} = Native.search_bench_vector_info(index)
    qv = embed_queries(embedder, texts)
    paired = Enum.zip(texts, qv)

    IO.puts(
      "10k tools (#{count} vectors of #{div(byte_size(hd(qv)), 4)} dims): vectors hold #{Float.round(bytes / 1.0e6, 2)} MB"
    )

    IO.puts(
      "setting one tool's vector (the add of a tool whose vector is cached, index side): median #{us(median(set_ns))}"
    )

    # Adding one tool with its cached vector, whole: read the file + index put + set vector.
    extra = for i <- 1..200, do: put_elem(Enum.at(docs, rem(i, m)), 0, "added_#{i}")
    add_ns = Native.search_bench_add(index, extra)

    read_us =
      for {{nm, _, _}, i} <- Enum.zip(Enum.take(Stream.cycle(own.tools), 200), 1..200) do
        p = by_passage[nm]
        path = Vectors.path(dir_of(embedder), Embedder.id(embedder), p)
        {us, {:ok, v}} = :timer.tc(fn -> File.read(path) end)
        {:ok, _} = Native.search_bench_set_vectors(index, [{"added_#{i}", v}])
        us
      end

    IO.puts(
      "add one tool with its cached vector: index put #{us(median(add_ns))} + vector #{us(median(set_ns))} + " <>
        "cache file read #{us(median(read_us) * 1000)} (wall) = #{us(median(add_ns) + median(set_ns) + median(read_us) * 1000)}; target <= 50 µs"
    )

    for mode <- [:bm25, :dense, :hybrid] do
      {:ok, {times, _}} = Native.search_bench_query_mode(index, paired, mode, 10, 5)

      IO.puts(
        "query at 10k, #{mode}: median #{us(median(times))}, p90 #{us(pct(times, 90))} (CPU, best of 5, after embedding)"
      )
    end

    IO.puts("targets: BM25F <= 50 µs; dense/hybrid <= 1 ms after the embedding")
  end

  defp dir_of(embedder), do: Vectors.model_dir(Vectors.default_cache(), Embedder.id(embedder))

  # ----------------------------------------------------------------------------------------

  defp median(list), do: list |> Enum.sort() |> Enum.at(div(length(list), 2))

  defp pct(list, p),
    do: list |> Enum.sort() |> Enum.at(min(length(list) - 1, div(length(list) * p, 100)))

  defp f(x), do: :erlang.float_to_binary(x * 1.0, decimals: 3)
  defp ms(ns), do: "#{Float.round(ns / 1.0e6, 2)} ms"
  defp us(ns), do: "#{Float.round(ns / 1000, 2)} µs"
end
