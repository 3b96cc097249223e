# Tool search figures: `MIX_ENV=bench mix run bench/search.exs` (`-- quick` skips 100k,
# `-- quality` prints only the quality figures).
#
#   1. Quality on the evaluation set (bench/search_eval/: tools.json, the tool lists of real MCP
#      servers dumped by dump_tools.py plus this repo's example tools; queries.tsv, natural
#      language queries with their relevant tools): recall@1, recall@5 and nDCG@10 of the
#      registry's BM25 (`CMDC.Tool.Registry.search/3` over real tool modules), of the regex mode
#      given the query's words as an alternation (what a model writing a quick regex gets), and
#      of a name-only baseline (query words found in the tool's name). Target: BM25 recall@5
#      >= 0.9.
#   2. Speed at 1k, 10k and 100k tools (the evaluation tools repeated with numbered names):
#      index build, incremental add of one tool, query latency (pure Rust, and one whole NIF
#      call from Elixir), next to the Python BM25 libraries rank_bm25 and bm25s (PyPI, in a venv
#      of CMDC.Tool.TestCache) on the same corpus and queries in the same run; then each query
#      paired with bm25s's (timed one right after the other, so both meet the same load).
#      Targets: query <= 50 µs at 10k tools and >= 10x the Python library; incremental add
#      <= 10 µs.
#
# Timings vary with the machine's load (2 shared cores here).
#
# Measured 2026-11-26 14:58-15:02 (three runs back to back, load average 3-7 on 2 shared cores
# while other builds ran; CPU time of the measuring thread). Our query = one `Index::search`
# call: tokenize the text, score, top 10, their names. bm25s = one `retrieve([tokens], k: 10)`
# call (query handed over as tokens: its tokenizing is not timed), rank_bm25 = one `get_top_n`.
#
#   quality (335 tools, 209 queries)   recall@1  recall@5  nDCG@10   (unchanged by the speed work)
#   BM25 (registry)                    0.780     0.950     0.881
#   regex (query words)                0.129     0.287     0.264
#   name only                          0.550     0.710     0.646
#
#   tools  build     add one  query    query NIF p50/p99  rank_bm25 query  bm25s query  x rank_bm25  x bm25s
#   1k     11.8 ms   6.6 µs   2.86 µs  4 / 12 µs          1,493 µs         75.4 µs      522x         26.4x
#   10k    117 ms    7.0 µs   8.51 µs  12 / 25 µs         23,307 µs        176 µs       2,738x       20.7x
#   100k   1.22 s    8.1 µs   60.3 µs  92 / 2,002 µs      313,578 µs       962 µs       5,203x       16.0x
#
#   (rows 1k and 10k from the third run, 100k from the second: the spread says how far they move)
#   the three runs' spread:  add 6.6-9.5 µs (1k), 7.0-10.9 µs (10k), 8.1-9.3 µs (100k); query
#   2.9-4.9 µs, 8.5-13.7 µs, 60-84 µs; x bm25s 15.8-26.4x (1k), 10.5-20.7x (10k), 8.0-16.0x
#   (100k). bm25s itself moved 71-77 µs, 144-176 µs and 576-962 µs. A pure-Rust loop over the
#   same corpus and queries (median of each query's best of 5, load 3-6) gave 2.3 / 7.0-7.7 /
#   53-59 µs, against 4.3 / 7.2-12.0 / 62-64 µs before this round's changes (the read-back in
#   one pass: each block's best against the live floor, then cleared while in cache; the first
#   term stores rather than adds; the floor's ties named through a bounded heap).
#
# Where the time goes at 100k (perf, the query loop alone): adding postings into the score
# array ~40%, reading the 100,000 scores back ~25% (memory-bound: 400 kB read and cleared),
# naming the ~300 copies that tie at the top score ~18% (a cache miss or two per tie). Exact
# top-k pruning (MaxScore/WAND) needs postings in slot order and document-at-a-time scoring,
# so that the long, low-idf postings are skipped and the ties' contributions are read in
# order; postings here are unordered (`swap_remove` on removal, slots reused), which keeps
# removal O(the tool's words). Not done yet: it is what the >= 10x at 100k needs in every run.
#
# Re-measured by the lead 15:33-15:36 (three runs, load ~1.0, the host's cores shared): add
# 5.3-6.2 / 6.4-9.9 / 7.1-11.0 µs; query 2.7-2.8 / 8.0-12.2 / 61-94 µs; x bm25s 15.0-26.4x,
# 7.0-15.9x, 5.5-8.7x (bm25s 515-532 µs at 100k, faster than in the runs above). So at 10k
# and 100k, >= 10x is not held in every run, and add one at 100k went over 10 µs in 2 of 3.
#
# Before this work (load ~17-20): add 20-29 µs; query 9.7 / 49 / 248 µs; 4.1x / 1.6x / 2.9x bm25s.
#
# Targets met (as of 2026-11-26; see the dated notes below for what followed): recall@5 >= 0.9;
# query <= 50 µs at 10k; >= 10x rank_bm25; add <= 10 µs (every
# run but one 10.9 µs at 10k under load; 11.0 µs at 100k in 2 of 3 re-measures). >= 10x bm25s: met at 1k in every run; at 10k
# in the three runs above (10.5-20.7x) but not in the re-measure (7.0x once); at 100k two runs of
# six (5.5-16.0x): NOT met. The scoring stays exact BM25
# (no precomputed norms that drift; `exact_tests.rs` checks every shortcut against scoring
# every tool), and the corpus repeats the 335 tools, so at 100k a query reads ~30,000 postings
# (median) and about 300 copies tie at each score: a worst case for a long catalog. Given our
# own tokens (stop words dropped, stemmed) bm25s is slower still (441 µs at 10k, measured
# separately: its argpartition over mostly-zero scores), so its own regex tokens are kept here
# as the harder reference.

# 2026-11-26 17:57-18:00 (load 1.0-1.4, after the top-k buffers were reused per thread and a
# candidate above the floor replaces the k-th with one sift): add 7.7 / 9.1 / 7.4 µs; query 4.3 /
# 11.8 / 62.3 µs (second run 3.9 / 11.7 µs at 1k / 10k); x bm25s 15.5-17.3x / 11.3-12.1x / 8.6x
# (bm25s 67 / 132-142 / 536 µs). >= 10x bm25s at 100k: still NOT met.
#
# 2026-11-27 00:40-00:50 (load 0.1-1.0): the dense read-back zeroed each 64-slot block with a
# `memset` call (`fill`: ~1,600 calls a query at 100k) and reduced each block's eight lanes to
# one maximum before comparing it with the floor; now inline SSE stores and one lane-wise
# comparison. In-process A/B (the two read-backs alternated per query in one binary, each
# query's best of 20): 100k 73.3 -> 63.8 and 75.6 -> 66.8 µs for the stores, then 50.7 -> 47.2
# and 48.9 -> 45.3 µs for the comparison; 10k 6.8 -> 6.0, then 5.9 -> 5.6 µs. Scores unchanged
# (exact_tests.rs).
#
# The sequential columns above time our queries, then bm25s's a minute later, and on this host
# the two sides meet different loads: five runs within 12 minutes gave bm25s at 100k 572, 793,
# 910, 634 and 999 µs, ours 81.5, 47.7, 70.8, 76.4 and 47.6 µs (x bm25s 7.0, 16.6, 12.8, 8.3,
# 21.0). So the bench now also pairs them: each query timed by us (best of 5) and at once by
# bm25s in the Python process left serving (best of 3), three passes, each side's best per
# query. Paired, the last three runs: x bm25s (ratio of medians / median of per-query ratios)
# 1k 20.7 / 20.1, 19.3 / 19.4, 20.7 / 20.9; 10k 13.7 / 13.9, 14.4 / 14.4, 15.2 / 15.7; 100k
# 12.1 / 12.8, 12.2 / 12.5, 12.7 / 12.6; our side 3.5-4.1 / 8.6-10.1 / 57-65 µs (caches cold:
# bm25s runs between our queries). Add one tool 5.5-8.4 / 6.7-9.0 / 8.0-10.95 µs (over 10 µs
# at 100k in one run of five). A sixth run (02:09, load 1.0): paired 20.0 / 20.1, 15.0 / 15.2,
# 12.7 / 12.3, but add one 9.2 / 10.46 / 11.11 µs: add <= 10 µs is NOT held in every run.
#
# 2026-11-27 03:00-04:25: adding a tool. Where an add went (perf, puts of new names at 100k):
# reading the tool into words ~57% (tokenizing ~47%: per word a few mispredicted branches, the
# stop-word binary search the largest), inserting ~25% (cache misses on the term's entry, its
# postings' header and the three arrays' ends), the allocator ~10%. Now: ASCII text is read
# eight bytes at a time into class masks and walked a word boundary at a time; stop words by
# a perfect hash (one multiply); a word is hashed once, its hash reused by the term table
# (hashbrown's HashTable); a thread's word bag is reused; the three arrays of a posting share
# one buffer, a slot's term ids and positions one array; insert fetches its words' entries and
# ends ahead; a batch (`insert_all`, the registry's bulk path) grows each posting once.
# Tokenizing the corpus's names and descriptions: 60-65 -> 47-53 ns a word; puts in one
# process, old and new alternated: median 4.35 -> 4.01, 4.57 -> 4.14, 4.69 -> 4.47 µs at
# 100k, 3.46 -> 3.37, 3.65 -> 3.54 µs at 1k; queries unchanged (51.4 vs 52.6, 71.9 vs 74.2 µs
# at 100k). Scores unchanged (exact_tests.rs, eval_tests.rs; a random-text test holds the
# tokenizer to the reference one). Found on the way: adds after a batch ran 1.4-1.7x the time
# of adds after one-by-one puts (10k, same process: 8.0-8.6 vs 4.8-4.9 µs), and a first
# `insert_all` reserved an exact fit, so the next tool with a word copied that word's whole
# posting (bench: add at 100k 13.5 µs); a batch now leaves the power-of-two slack of
# one-at-a-time growth.
# Bench runs (add one 1k / 10k / 100k; load average at the start; ending at): 03:35, before the changes
# to batches, 8.4 / 10.56 / 6.84 µs (1.6). With them: 04:09 6.51 / 9.01 / 9.42 µs (1.8);
# 04:12 5.55 / 5.63 / 6.93 (0.4); 04:14 7.73 / 8.90 / 7.17 (0.3); 04:21 (term ids and
# positions in one array) 6.06 / 5.41 / 6.25 (2.0); 05:05, right after a CI run (0.2, 2.6 over
# 15 minutes) 6.38 / 9.85 / 11.0. In those five: paired x bm25s 19.9-22.8x / 12.5-14.4x /
# 11.7-13.0x; query at 10k 5.6-10.1 µs; build 1.07-1.66 s at 100k (1.2-2.0 s before). So add
# <= 10 µs held in four runs of five: still NOT in every run.
#
# Tried and measured, not kept (same corpus, pure-Rust loop, each query's best of 200, A/B in
# one binary or interleaved runs; min over rounds):
#   - Postings in slot order (slots not reused, removal marks entries, lists tidied when mostly
#     marks) with document-at-a-time MaxScore (Turtle & Flood; exact, strict pruning so floor
#     ties stay): "find GitHub users by name" at 100k walked 21,300 of ~72,000 postings' documents
#     and probed 1,932, yet ran 1.0-1.3x the term-at-a-time time (branchy per-document merge at
#     ~4 ns/document; per-term bounds loose, and each 335-tool stretch of the repeated corpus
#     holds a copy of the best tool, so the floor's ties keep most lists essential).
#   - Term at a time in windows of 4,096 slots over those ordered lists (scores in L1): equal
#     (89.9 vs 90.3, 86.8 vs 94.7, 60.5 vs 59.0 µs); the runs' galloping searches ate the gain.
#   - MaxScore term at a time (2026-11-27): rarest word first; each word's weight bounded by
#     the Pareto points of its postings' (frequency, length); once the k-th best partial score
#     beats what the remaining words can add, only the tools within reach (a bit each) take the
#     common words, whose postings are read for those bits. Exact (exact_tests.rs plus a test
#     of its own), taken in 87% of queries at 100k, yet 10-13% slower than the current path in
#     an in-process A/B (65.3 vs 73.8, 62.6 vs 71.0 µs at 100k; 6.9 vs 7.7 at 10k): the kept
#     floor, the candidates' selection and their read-back are random reads, where the current
#     path stores the longest word's weights without reading and reads the rest back in order.
#   - AVX2 (runtime-detected) for the weights and the dense read-back: 0-9% (84.3 vs 85.0, 84.4
#     vs 90.5, 50.2 vs 54.8 µs). A list of reached slots instead of the dense read-back at 100k:
#     1.4x slower (random reads); at 10k equal.
# Hot profile at 100k (each query repeated): adding postings ~36% of a query, the dense read-back
# of 100,000 scores ~34%, naming the floor's ~300 ties ~12%. The work is proportional to the
# postings of the query's words and to the slots; an exact top 10 with ties by name over 300
# identical copies cannot skip them without treating identical tools as one (which would make
# this corpus say nothing about a real catalog of that size).

# Issue 42 (dense + hybrid, `-- semantic` prints only this part), measured 2026-11-28 14:36-15:00
# under load average 20-32 on 2 shared cores (8 builds at once): quality is load-independent,
# the times are not (wall time of a single-threaded embedding, waits for a core included).
#
#   set (tools, queries)                  variant       recall@1  recall@5  nDCG@10
#   own (MCP servers) (335, 209)          BM25 (plain)  0.809     0.926     0.883
#                                         BM25F         0.780     0.950     0.881
#                                         dense         0.837     0.946     0.907
#                                         hybrid        0.813     0.971     0.913
#   BFCL (simple, multiple) (589, 600)    BM25 (plain)  0.740     0.925     0.854
#                                         BM25F         0.773     0.945     0.874
#                                         dense         0.702     0.933     0.847
#                                         hybrid        0.770     0.947     0.881
#   BFCL live (held out) (515, 1311)      BM25 (plain)  0.523     0.788     0.691
#                                         BM25F         0.590     0.857     0.752
#                                         dense         0.635     0.894     0.788
#                                         hybrid        0.654     0.896     0.804
#
#   embedding one query, 1 thread, wall: median 53 ms, p90 66 ms (load 23-26); a second run
#   (15:08, load 17-21) 13.2 ms, p90 21.7 ms; one tool passage 21-26 ms. Target 5 ms: NOT met
#   under this load; re-measure on an idle machine.
#   10k tools with vectors (second run, CPU time of the thread, best of 5, median over queries):
#   BM25F 5.2 µs; dense 767 µs; hybrid 788 µs (target <= 1 ms after the embedding). Add one tool
#   with its cached vector: index put 4.4 µs + set vector 2.0 µs + cache file read 35 µs (wall)
#   = 41 µs (target <= 50 µs). Vectors of 10k tools: 6.36 MB allocated (3.9 MB used: 384 i8 +
#   a 4-byte scale per tool; the rest is doubling slack).

Code.require_file("search_eval/sets.exs", __DIR__)

defmodule SearchBench do
  alias CMDC.Tool.{JSON, Native, Registry}
  alias CMDC.Tool.Test.Factory

  @packages ~w(rank_bm25==0.2.2 bm25s==0.3.16)
  # Passes of the paired timing (each query: ours, then bm25s's, per pass).
  @passes 3

  def run(args) do
    tools = catalog()
    queries = queries()
    IO.puts("evaluation set: #{length(tools)} tools, #{length(queries)} queries\n")
    quality(tools, queries)
    semantic()
    if "quality" in args or "semantic" in args, do: System.halt(0)
    sizes = if "quick" in args, do: [1_000, 10_000], else: [1_000, 10_000, 100_000]
    speed(tools, Enum.map(queries, &elem(&1, 0)), sizes)
  end

  # ------------------------------------------------------------------------------------------
  # The evaluation set

  # The project's own set (search_eval/sets.exs reads it, with the other people's sets).
  def catalog, do: SearchBench.Sets.own().tools
  def queries, do: SearchBench.Sets.own().queries

  # ------------------------------------------------------------------------------------------
  # 1b. Quality on other people's data, per variant, and the dense figures
  # (search_eval/sets.exs, search_eval/semantic.exs)

  defp semantic do
    Code.require_file("search_eval/semantic.exs", __DIR__)

    bfcl =
      case SearchBench.Sets.bfcl() do
        {:skip, reason} ->
          IO.puts("BFCL sets skipped: #{reason}")
          []

        sets ->
          sets
      end

    SearchBench.Semantic.run([SearchBench.Sets.own() | bfcl])
  end

  # ------------------------------------------------------------------------------------------
  # 1. Quality

  defp quality(tools, queries) do
    reg = Registry.new()
    :ok = Registry.register(reg, Enum.map(tools, fn {n, d, p} -> Factory.tool(n, d, p) end))
    names = Enum.map(tools, &elem(&1, 0))
    missing = for {_, rel} <- queries, r <- rel, r not in names, do: r
    if missing != [], do: raise("queries name unknown tools: #{inspect(Enum.uniq(missing))}")

    rankers = [
      {"BM25 (registry)", fn q -> ranked(Registry.search(reg, q, limit: 10)) end},
      {"regex (query words)",
       fn q -> ranked(Registry.search(reg, regex_of(q), mode: :regex, limit: 10)) end},
      {"name only", fn q -> name_only(names, q) end}
    ]

    IO.puts(String.pad_trailing("ranker", 22) <> "  recall@1  recall@5  nDCG@10")

    for {label, rank} <- rankers do
      {r1, r5, ndcg} = score(queries, rank)
      IO.puts("#{String.pad_trailing(label, 22)}  #{f(r1)}     #{f(r5)}     #{f(ndcg)}")
    end

    IO.puts("target: BM25 recall@5 >= 0.90\n")
  end

  defp ranked({:ok, hits}), do: Enum.map(hits, &elem(&1, 0))
  defp ranked({:error, _}), do: []

  defp regex_of(query) do
    words =
      query
      |> String.downcase()
      |> String.split(~r/[^a-z0-9]+/, trim: true)
      |> Enum.filter(&(String.length(&1) > 2))

    words
    |> Enum.uniq()
    |> Enum.join("|")
    |> String.slice(0, 200)
    |> then(&if(&1 == "", do: "x^", else: &1))
  end

  defp name_only(names, query) do
    words = MapSet.new(String.split(String.downcase(query), ~r/[^a-z0-9]+/, trim: true))

    names
    |> Enum.map(fn n -> {n, name_words(n) |> Enum.count(&MapSet.member?(words, &1))} end)
    |> Enum.filter(fn {_, c} -> c > 0 end)
    |> Enum.sort_by(fn {n, c} -> {-c, n} end)
    |> Enum.take(10)
    |> Enum.map(&elem(&1, 0))
  end

  defp name_words(name) do
    name
    |> String.split("__", parts: 2)
    |> List.last()
    |> String.replace(~r/([a-z])([A-Z])/, "\\1 \\2")
    |> String.downcase()
    |> String.split(~r/[^a-z0-9]+/, trim: true)
  end

  # recall@k: the share of a query's relevant tools in the first k, averaged over queries.
  def score(queries, rank) do
    per =
      for {q, relevant} <- queries do
        got = rank.(q)
        rel = MapSet.new(relevant)

        recall = fn k ->
          Enum.count(Enum.take(got, k), &MapSet.member?(rel, &1)) / min(k, MapSet.size(rel))
        end

        {recall.(1), recall.(5), ndcg(got, rel)}
      end

    n = length(per)
    {sum(per, 0) / n, sum(per, 1) / n, sum(per, 2) / n}
  end

  defp ndcg(got, rel) do
    dcg =
      got
      |> Enum.take(10)
      |> Enum.with_index(1)
      |> Enum.map(fn {t, i} -> if MapSet.member?(rel, t), do: 1 / :math.log2(i + 1), else: 0 end)
      |> Enum.sum()

    ideal = 1..min(10, MapSet.size(rel)) |> Enum.map(&(1 / :math.log2(&1 + 1))) |> Enum.sum()
    dcg / ideal
  end

  defp sum(rows, i), do: rows |> Enum.map(&elem(&1, i)) |> Enum.sum()

  # ------------------------------------------------------------------------------------------
  # 2. Speed

  defp speed(tools, queries, sizes) do
    python = python()

    case File.read("/proc/loadavg") do
      {:ok, load} ->
        IO.puts("load average: #{load |> String.split() |> Enum.take(3) |> Enum.join(" ")}")

      _ ->
        :ok
    end

    IO.puts(
      "CPU time of this thread (build; median add; median over queries of each query's best of 5, Python best of 3);\n" <>
        "query Rust = one Index::search call (tokenize the text, score, top 10, their names); bm25s = one\n" <>
        "retrieve([tokens], k: 10) call, rank_bm25 = one get_top_n(tokens, corpus, 10) call (queries handed over\n" <>
        "as token lists: their tokenization is not timed); the NIF column is wall time of whole calls from\n" <>
        "Elixir (p50/p99), waits for a core included.\n" <>
        "tools     build (ours)   add one   query Rust   query NIF (p50/p99)   rank_bm25 build/query     bm25s build/query    x rank_bm25  x bm25s"
    )

    rows =
      for n <- sizes do
        docs = corpus(tools, n)
        {index, build_ns} = Native.search_bench_build(docs)

        extra =
          for i <- 1..1_000, do: put_elem(Enum.at(docs, rem(i, length(tools))), 0, "added_#{i}")

        add_ns = index |> Native.search_bench_add(extra) |> median()
        {per_query, _tops} = Native.search_bench_query(index, queries, false, 10, 5)
        rust_ns = median(per_query)
        {p50, p99} = nif_latency(index, queries)
        {py, port} = python_figures(python, docs, queries)
        paired = paired(index, queries, port)

        IO.puts(
          "#{String.pad_trailing(to_string(n), 8)}  #{pad(ms(build_ns), 13)}  #{pad(us(add_ns), 8)}  #{pad(us(rust_ns), 11)}  #{pad(us(p50 * 1000) <> " / " <> us(p99 * 1000), 20)}  " <>
            "#{pad(py_fig(py, "rank_bm25"), 24)}  #{pad(py_fig(py, "bm25s"), 19)}  #{pad(ratio(py, "rank_bm25", rust_ns), 11)}  #{ratio(py, "bm25s", rust_ns)}"
        )

        {n, paired}
      end

    IO.puts("""

    Paired with bm25s: each query timed on our side (best of 5) and right after by bm25s (best of
    3), in #{@passes} passes, each side's best per query kept; so both sides of a query meet the same
    load. Medians over queries, and the median of the per-query ratios.
    tools     query Rust   bm25s query   x bm25s (medians)   x bm25s (per-query median)\
    """)

    for {n, paired} <- rows do
      case paired do
        nil ->
          IO.puts("#{String.pad_trailing(to_string(n), 8)}  -")

        %{rust_ns: r, py_us: p, ratio: x} ->
          IO.puts(
            "#{String.pad_trailing(to_string(n), 8)}  #{pad(us(r), 11)}  #{pad("#{Float.round(p, 1)} µs", 12)}  #{pad("#{Float.round(p * 1000 / r, 1)}x", 18)}  #{Float.round(x, 1)}x"
          )
      end
    end

    IO.puts("targets: query <= 50 µs at 10k tools, >= 10x the Python library; add <= 10 µs")
  end

  # n documents: the evaluation tools repeated with numbered names.
  defp corpus(tools, n) do
    m = length(tools)
    arr = List.to_tuple(tools)

    for i <- 0..(n - 1) do
      {name, description, params} = elem(arr, rem(i, m))
      {"#{name}_#{i}", description, JSON.encode!(params)}
    end
  end

  defp median(list), do: list |> Enum.sort() |> Enum.at(div(length(list), 2))

  defp nif_latency(index, queries) do
    times =
      for _ <- 1..5, q <- queries do
        {t, _} = :timer.tc(fn -> Native.search_bench_one(index, q, 10) end)
        t
      end
      |> Enum.sort()

    n = length(times)
    {Enum.at(times, div(n, 2)), Enum.at(times, div(n * 99, 100))}
  end

  # Each query timed by us and at once by bm25s in the Python process left serving, `@passes`
  # times over; each side's best per query.
  defp paired(_index, _queries, nil), do: nil

  defp paired(index, queries, port) do
    indexed = Enum.with_index(queries)

    best =
      Enum.reduce(1..@passes, %{}, fn _, acc ->
        Enum.reduce(indexed, acc, fn {q, i}, acc ->
          {[ns], _} = Native.search_bench_query(index, [q], false, 10, 5)
          Port.command(port, "#{i} 3\n")
          us = port_line(port) |> String.trim() |> String.to_float()
          Map.update(acc, i, {ns, us}, fn {r, p} -> {min(r, ns), min(p, us)} end)
        end)
      end)

    Port.close(port)
    timed = for {_, {r, p}} <- best, p >= 0, do: {r, p}

    %{
      rust_ns: timed |> Enum.map(&elem(&1, 0)) |> median(),
      py_us: timed |> Enum.map(&elem(&1, 1)) |> median(),
      ratio: timed |> Enum.map(fn {r, p} -> p * 1000 / r end) |> median()
    }
  end

  defp port_line(port, acc \\ "") do
    receive do
      {^port, {:data, {:eol, line}}} -> acc <> line
      {^port, {:data, {:noeol, part}}} -> port_line(port, acc <> part)
      {^port, {:exit_status, status}} -> raise "bm25s process exited with status #{status}"
    after
      600_000 -> raise "bm25s process silent for 10 minutes"
    end
  end

  defp python_figures(nil, _docs, _queries), do: {nil, nil}

  defp python_figures(python, docs, queries) do
    tmp = System.tmp_dir!()
    corpus = Path.join(tmp, "search_bench_corpus_#{System.unique_integer([:positive])}.json")
    qs = Path.join(tmp, "search_bench_queries_#{System.unique_integer([:positive])}.json")

    File.write!(
      corpus,
      JSON.encode!(Enum.map(docs, fn {n, d, p} -> [n, d <> " " <> param_text(p)] end))
    )

    File.write!(qs, JSON.encode!(queries))

    port =
      Port.open({:spawn_executable, python}, [
        :binary,
        :exit_status,
        {:line, 1_048_576},
        args: [Path.expand("search_py.py", __DIR__), corpus, qs, "10", "--serve"]
      ])

    try do
      # The first line is the figures' JSON (library warnings may come before it).
      figures = first_json(port)
      if figures, do: {figures, port}, else: {nil, nil}
    after
      File.rm(corpus)
      File.rm(qs)
    end
  end

  defp first_json(port) do
    line = port_line(port)

    case JSON.decode(line) do
      {:ok, %{} = figures} -> figures
      _ -> first_json(port)
    end
  rescue
    e -> IO.puts("python failed: #{Exception.message(e)}") && nil
  end

  defp param_text(json) do
    case JSON.decode!(json) do
      %{"properties" => props} when is_map(props) ->
        Enum.map_join(props, " ", fn {k, v} ->
          "#{k} #{if is_map(v), do: v["description"] || ""}"
        end)

      _ ->
        ""
    end
  end

  defp python do
    venv = CMDC.Tool.TestCache.dir("search-bench-venv")
    py = Path.join([venv, "bin", "python"])

    CMDC.Tool.TestCache.with_lock("search-bench-venv", fn ->
      with false <-
             File.exists?(py) and
               match?({_, 0}, System.cmd(py, ["-c", "import rank_bm25, bm25s"])),
           {_, 0} <- System.cmd("python3", ["-m", "venv", venv], stderr_to_stdout: true),
           {_, 0} <-
             System.cmd(Path.join([venv, "bin", "pip"]), ["install", "-q" | @packages],
               stderr_to_stdout: true
             ) do
        py
      else
        true ->
          py

        {out, _} ->
          IO.puts(
            "Python BM25 libraries not installed (#{String.slice(out, 0, 200)}): their columns are empty"
          )

          nil
      end
    end)
  end

  defp py_fig(nil, _), do: "-"

  defp py_fig(py, lib) do
    case py[lib] do
      %{"build_s" => b, "query_us" => q} ->
        "#{Float.round(b * 1000, 1)} ms / #{Float.round(q, 1)} µs"

      %{"error" => e} ->
        "error: #{String.slice(e, 0, 40)}"

      _ ->
        "-"
    end
  end

  defp ratio(nil, _, _), do: "-"

  defp ratio(py, lib, rust_ns) do
    case py[lib] do
      %{"query_us" => q} -> "#{Float.round(q * 1000 / rust_ns, 1)}x"
      _ -> "-"
    end
  end

  defp f(x), do: :erlang.float_to_binary(x * 1.0, decimals: 3)
  defp ms(ns), do: "#{Float.round(ns / 1.0e6, 2)} ms"
  defp us(ns), do: "#{Float.round(ns / 1000, 2)} µs"
  defp pad(s, n), do: String.pad_trailing(s, n)
end

SearchBench.run(System.argv())
