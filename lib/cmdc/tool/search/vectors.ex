defmodule CMDC.Tool.Search.Vectors do
  @moduledoc """
  Tool vectors for a registry's search index (mirrors the vector NIFs of
  `native/cmdc_tool_nif/src/search.rs`): each tool's passage (its name as words, title,
  description and parameter names) embedded once per content and model, and kept on disk by
  a digest of both, so a restart, another registry or another node on the machine reads a
  vector back in microseconds instead of running the model again.

  The cache folder is `cache:` (an option of `CMDC.Tool.Search.attach/3`), else `vectors/`
  under `$CMDC_TEST_CACHE`, `$XDG_CACHE_HOME/cmdc_tool` or `~/.cache/cmdc_tool`; one file per
  vector (`<sha256>.f32`, the floats little-endian), written whole under a temporary name
  then renamed, so a reader never sees half a vector.
  """

  alias CMDC.Tool.Native
  alias CMDC.Tool.Search.Embedder
  require Native

  # Tools taken from the index per round, and texts per call to the embedder.
  @round 256
  @batch 64

  @doc "The default cache folder (see the module doc)."
  @spec default_cache() :: Path.t()
  def default_cache do
    base =
      System.get_env("CMDC_TEST_CACHE") ||
        Path.join(System.get_env("XDG_CACHE_HOME") || Path.expand("~/.cache"), "cmdc_tool")

    Path.join(base, "vectors")
  end

  @doc """
  Gives every tool of the registry `ref` without a vector its vector: read from `cache`, or
  computed by `embedder` and written there. `{:ok, %{cached: n, computed: m}}`, or
  `{:error, message}` when the embedder fails (the vectors set until then stay).
  """
  @spec sync(reference(), Embedder.t(), Path.t()) ::
          {:ok, %{cached: non_neg_integer(), computed: non_neg_integer()}}
          | {:error, String.t()}
  def sync(ref, embedder, cache) do
    id = Embedder.id(embedder)
    dir = model_dir(cache, id)
    round(ref, embedder, id, dir, %{cached: 0, computed: 0}, MapSet.new())
  end

  # `seen`: names handled in earlier rounds; one missing again means its tool was replaced
  # meanwhile (another round), or that setting failed (stop rather than loop).
  defp round(ref, embedder, id, dir, stats, seen) do
    case Native.with_dirty(registry_missing_vectors(ref, @round)) do
      {:ok, []} ->
        {:ok, stats}

      {:ok, missing} ->
        if Enum.all?(missing, fn {name, _} -> MapSet.member?(seen, name) end) do
          {:ok, stats}
        else
          with {:ok, stats} <- fill(ref, embedder, id, dir, missing, stats) do
            seen = Enum.reduce(missing, seen, fn {name, _}, s -> MapSet.put(s, name) end)
            round(ref, embedder, id, dir, stats, seen)
          end
        end

      {:error, message} ->
        {:error, message}
    end
  end

  defp fill(ref, embedder, id, dir, missing, stats) do
    keyed = for {name, passage} <- missing, do: {name, passage, path(dir, id, passage)}

    {cached, todo} =
      Enum.reduce(keyed, {[], []}, fn {name, passage, path}, {hit, miss} ->
        case File.read(path) do
          {:ok, bin} when bin != "" and rem(byte_size(bin), 4) == 0 -> {[{name, bin} | hit], miss}
          _ -> {hit, [{name, passage, path} | miss]}
        end
      end)

    with :ok <- put(ref, cached),
         {:ok, computed} <- compute(embedder, dir, Enum.reverse(todo)),
         :ok <- put(ref, computed) do
      {:ok, %{cached: stats.cached + length(cached), computed: stats.computed + length(computed)}}
    end
  end

  defp compute(_embedder, _dir, []), do: {:ok, []}

  defp compute(embedder, dir, todo) do
    File.mkdir_p(dir)

    todo
    |> Enum.chunk_every(@batch)
    |> Enum.reduce_while({:ok, []}, fn chunk, {:ok, acc} ->
      case Embedder.embed(embedder, Enum.map(chunk, &elem(&1, 1))) do
        {:ok, vectors} ->
          pairs =
            for {{name, _, path}, v} <- Enum.zip(chunk, vectors) do
              write(path, v)
              {name, v}
            end

          {:cont, {:ok, acc ++ pairs}}

        {:error, message} ->
          {:halt, {:error, message}}
      end
    end)
  end

  defp put(_ref, []), do: :ok

  defp put(ref, pairs) do
    case Native.with_dirty(registry_set_vectors(ref, pairs, false)) do
      {:ok, _count} -> :ok
      {:error, message} -> {:error, message}
    end
  end

  @doc "The folder of model `id`'s vectors in the cache folder `cache`."
  @spec model_dir(Path.t(), String.t()) :: Path.t()
  def model_dir(cache, id), do: Path.join(cache, digest(id) |> binary_part(0, 16))

  @doc "Where the vector of `passage` under model `id` is cached in `dir`."
  @spec path(Path.t(), String.t(), String.t()) :: Path.t()
  def path(dir, id, passage), do: Path.join(dir, digest([id, 0, passage]) <> ".f32")

  defp digest(data), do: :crypto.hash(:sha256, data) |> Base.encode16(case: :lower)

  # A cache that cannot be written (read-only disk, full) costs a recomputation next time,
  # never the search.
  defp write(path, vector) do
    tmp = "#{path}.#{System.unique_integer([:positive])}.tmp"

    with :ok <- File.write(tmp, vector),
         :ok <- File.rename(tmp, path) do
      :ok
    else
      _ -> File.rm(tmp)
    end
  end
end
