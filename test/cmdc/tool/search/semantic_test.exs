defmodule CMDC.Tool.Search.SemanticTest do
  # Dense and hybrid search through a registry: an Elixir function as the embedder (a small
  # concept model written here, so the rankings are known), the disk cache of vectors, and the
  # native all-MiniLM-L6-v2 model when it can be had.
  use ExUnit.Case, async: true

  import ExUnit.CaptureLog

  alias CMDC.Tool.{Registry, Search}
  alias CMDC.Tool.Search.{Embedder, Vectors}
  alias CMDC.Tool.Search.Tool, as: SearchTool
  alias CMDC.Tool.Test.Factory

  doctest CMDC.Tool.Search.Embedder
  doctest CMDC.Tool.Search.Embedder.Native

  # Words of four concepts: a text's vector counts its words of each (plus a small constant,
  # so no vector is all zeros).
  @concepts [
    ~w(file files contents inside read show open text yaml settings),
    ~w(weather forecast rain temperature umbrella tomorrow sunny),
    ~w(commit changes repository record history save),
    ~w(email mail message send inbox write)
  ]

  defp concept_vector(text) do
    words = text |> String.downcase() |> String.split(~r/[^a-z]+/, trim: true)
    for c <- @concepts, do: Enum.count(words, &(&1 in c)) + 0.05
  end

  # A concept embedder counting the texts it embeds in `counter`.
  defp embedder(counter, id \\ "concepts/v1") do
    Embedder.function(
      fn texts ->
        :counters.add(counter, 1, length(texts))
        {:ok, Enum.map(texts, &concept_vector/1)}
      end,
      id: id
    )
  end

  defp tools do
    [
      Factory.tool(
        "fs__read_text_file",
        "Read the complete contents of a file as text.",
        %{"type" => "object", "properties" => %{"path" => %{"type" => "string"}}}
      ),
      Factory.tool("weather__get_forecast", "Get the weather forecast for a location."),
      Factory.tool("git__git_commit", "Record changes to the repository."),
      Factory.tool("mail__send_email", "Send an email message.")
    ]
  end

  defp registry(modules \\ tools()) do
    reg = Registry.new()
    :ok = Registry.register(reg, modules)
    reg
  end

  defp tmp_cache(context) do
    dir =
      Path.join(
        System.tmp_dir!(),
        "cmdc_vectors_#{context.test |> :erlang.phash2()}_#{System.unique_integer([:positive])}"
      )

    on_exit(fn -> File.rm_rf(dir) end)
    dir
  end

  defp names({:ok, hits}), do: Enum.map(hits, &elem(&1, 0))

  test "without an embedder, search is BM25F and says so" do
    reg = registry()
    assert %{mode: :bm25, embedder: nil, vectors: 0, note: note} = Search.ranking(reg)
    assert note =~ "BM25F only"
    # A request sharing no word with any tool finds nothing by words.
    assert names(Registry.search(reg, "should I take an umbrella tomorrow?")) == []

    assert {:error, "mode: :dense needs an embedder" <> _} =
             Registry.search(reg, "umbrella", mode: :dense)
  end

  test "an attached embedder finds requests that share no word with the tool", context do
    reg = registry()
    counter = :counters.new(1, [])

    assert {:ok, %{computed: 4, cached: 0}} =
             Search.attach(reg, embedder(counter), cache: tmp_cache(context))

    assert %{mode: :hybrid, embedder: "concepts/v1", tools: 4, vectors: 4, dimension: 4} =
             Search.ranking(reg)

    query = "should I take an umbrella tomorrow?"
    assert hd(names(Registry.search(reg, query))) == "weather__get_forecast"
    assert hd(names(Registry.search(reg, query, mode: :dense))) == "weather__get_forecast"
    # BM25F alone is still there, and still finds nothing for it.
    assert names(Registry.search(reg, query, mode: :bm25)) == []
    # Words and meaning agree: the exact name stays first.
    assert hd(names(Registry.search(reg, "git commit"))) == "git__git_commit"

    assert hd(names(Registry.search(reg, "show me what's inside settings.yaml"))) ==
             "fs__read_text_file"
  end

  test "vectors are computed once per tool content and read back from disk", context do
    cache = tmp_cache(context)
    counter = :counters.new(1, [])
    modules = tools()

    assert {:ok, %{computed: 4}} =
             Search.attach(registry(modules), embedder(counter), cache: cache)

    assert :counters.get(counter, 1) == 4

    # Another registry of the same tools: every vector from the cache, the model not run.
    reg = registry(modules)
    assert {:ok, %{cached: 4, computed: 0}} = Search.attach(reg, embedder(counter), cache: cache)
    assert :counters.get(counter, 1) == 4

    # A tool registered later gets its vector at the next search (the query is embedded too).
    :ok = Registry.register(reg, [Factory.tool("cal__add_event", "Open the calendar file.")])
    assert %{tools: 5, vectors: 4} = Search.ranking(reg)
    {:ok, _} = Registry.search(reg, "umbrella")
    assert :counters.get(counter, 1) == 4 + 1 + 1
    assert %{tools: 5, vectors: 5} = Search.ranking(reg)

    # A tool whose content changed is embedded again; unchanged ones are not.
    :ok = Registry.unregister(reg, "cal__add_event")

    :ok =
      Registry.register(reg, [Factory.tool("cal__add_event", "Send a calendar invite by email.")])

    {:ok, _} = Registry.search(reg, "umbrella")
    assert :counters.get(counter, 1) == 6 + 1 + 1
    # Replacing the whole set rebuilds the index: every vector comes back from the disk.
    :ok = Registry.replace(reg, modules)
    {:ok, _} = Registry.search(reg, "umbrella")
    assert :counters.get(counter, 1) == 8 + 1
    assert %{tools: 4, vectors: 4} = Search.ranking(reg)
    assert File.ls!(cache) |> length() == 1
    [model_dir] = File.ls!(cache)
    assert length(File.ls!(Path.join(cache, model_dir))) == 6

    # Another model's vectors are never mixed in: attaching it recomputes all.
    other = :counters.new(1, [])

    assert {:ok, %{computed: 4, cached: 0}} =
             Search.attach(reg, embedder(other, "concepts/v2"), cache: cache)
  end

  test "the cache file of a vector is its floats, named by model and passage" do
    path = Vectors.path("/c", "m/1", "read file")
    assert path =~ ~r"^/c/[0-9a-f]{64}[.]f32$"
    refute path == Vectors.path("/c", "m/2", "read file")
  end

  test "an embedder that fails leaves BM25F: at attach, and per query", context do
    reg = registry()
    broken = Embedder.function(fn _ -> {:error, "connection refused"} end, id: "down/v1")
    assert {:error, message} = Search.attach(reg, broken, cache: tmp_cache(context))
    assert message =~ "down/v1" and message =~ "connection refused"
    assert %{mode: :bm25, vectors: 0} = Search.ranking(reg)

    # Tools embed, queries fail: the search runs by words and logs why.
    flaky =
      Embedder.function(
        fn
          [text] when text == "email the team" -> raise "quota exceeded"
          texts -> {:ok, Enum.map(texts, &concept_vector/1)}
        end,
        id: "flaky/v1"
      )

    assert {:ok, _} = Search.attach(reg, flaky, cache: tmp_cache(context))

    log =
      capture_log(fn ->
        assert hd(names(Registry.search(reg, "email the team"))) == "mail__send_email"
      end)

    assert log =~ "quota exceeded" and log =~ "BM25F alone"
    assert {:error, message} = Registry.search(reg, "email the team", mode: :dense)
    assert message =~ "quota exceeded"

    :ok = Search.detach(reg)
    assert %{mode: :bm25, vectors: 0} = Search.ranking(reg)
  end

  test "embedders answering the wrong shape are errors, never crashes" do
    bad = fn answer -> Embedder.function(fn _ -> answer end, id: "bad") end
    assert {:error, m} = Embedder.embed(bad.({:ok, [[1.0]]}), ["a", "b"])
    assert m =~ "1 vectors for 2 texts"
    assert {:error, m} = Embedder.embed(bad.({:ok, [[1.0], [1.0, 2.0]]}), ["a", "b"])
    assert m =~ "different lengths"
    assert {:error, m} = Embedder.embed(bad.({:ok, [["x"]]}), ["a"])
    assert m =~ "not a non-empty list of numbers"
    assert {:error, m} = Embedder.embed(bad.(:nope), ["a"])
    assert m =~ "expected {:ok, vectors}"
    assert {:ok, []} = Embedder.embed(bad.(:nope), [])

    assert_raise ArgumentError, ~r/id: must name the model/, fn ->
      Embedder.function(fn _ -> {:ok, []} end, [])
    end

    assert_raise ArgumentError, ~r/did you mean :id/, fn ->
      Embedder.function(fn _ -> {:ok, []} end, idd: "x")
    end
  end

  test "a vector of another dimension or all zeros is refused with the reason", context do
    reg = registry()
    zeros = Embedder.function(fn t -> {:ok, Enum.map(t, fn _ -> [0.0, 0.0] end)} end, id: "z")
    assert {:error, m} = Search.attach(reg, zeros, cache: tmp_cache(context))
    assert m =~ "all zeros"
  end

  test "rerank reorders the best candidates; a broken reranker keeps the order", context do
    reg = registry()
    {:ok, _} = Search.attach(reg, embedder(:counters.new(1, [])), cache: tmp_cache(context))
    {:ok, plain} = Registry.search(reg, "read the file", limit: 4)

    reversed = fn _query, candidates -> candidates |> Enum.reverse() |> Enum.map(&elem(&1, 0)) end

    {:ok, reranked} =
      Registry.search(reg, "read the file", limit: 2, rerank: reversed, rerank_depth: 4)

    assert Enum.map(reranked, &elem(&1, 0)) ==
             plain |> Enum.reverse() |> Enum.take(2) |> Enum.map(&elem(&1, 0))

    log =
      capture_log(fn ->
        assert {:ok, ^plain} =
                 Registry.search(reg, "read the file", limit: 4, rerank: fn _, _ -> :oops end)
      end)

    assert log =~ "reranker"

    assert_raise ArgumentError, ~r/did you mean :rerank/, fn ->
      Registry.search(reg, "x", rerankk: 1)
    end
  end

  test "search_tools ranks as the registry does", context do
    reg = registry()
    {:ok, _} = Search.attach(reg, embedder(:counters.new(1, [])), cache: tmp_cache(context))

    assert {:ok, %{"tools" => [%{"name" => "weather__get_forecast"} | _]}} =
             SearchTool.find(reg, %{"query" => "will it rain tomorrow?", "limit" => 2})
  end

  describe "the native model (all-MiniLM-L6-v2)" do
    setup do
      case CMDC.Tool.Search.Embedder.Native.fetch() do
        {:ok, dir} ->
          {:ok, native: CMDC.Tool.Search.Embedder.Native.load!(dir)}

        {:error, reason} ->
          IO.puts("skipped: the model could not be fetched (#{String.slice(reason, 0, 200)})")
          {:ok, native: nil}
      end
    end

    test "finds the forecast for a request that shares no word with it",
         %{native: native} = context do
      if native do
        reg =
          registry([
            Factory.tool(
              "filesystem__read_text_file",
              "Read the complete contents of a file from the file system as text."
            ),
            Factory.tool(
              "circleci__config_helper",
              "Help with CircleCI configuration: validate and explain config.yml."
            ),
            Factory.tool(
              "home-assistant__get_dashboard_config",
              "Get the configuration of a Lovelace dashboard."
            ),
            Factory.tool("weather__get_forecast", "Get the weather forecast for a location.")
          ])

        query = "should I bring an umbrella tomorrow?"
        assert names(Registry.search(reg, query)) == []
        assert {:ok, %{computed: 4}} = Search.attach(reg, native, cache: tmp_cache(context))
        # No word is shared: meaning alone finds it, first, in both modes that read vectors.
        assert hd(names(Registry.search(reg, query, mode: :dense))) == "weather__get_forecast"
        assert hd(names(Registry.search(reg, query))) == "weather__get_forecast"
        # Words still count: an exact capability stays first.
        assert hd(names(Registry.search(reg, "read a text file"))) == "filesystem__read_text_file"
        assert %{dimension: 384, vectors: 4} = Search.ranking(reg)
        {:ok, [v]} = Embedder.embed(native, ["hello"])
        assert byte_size(v) == 384 * 4
      end
    end
  end
end
