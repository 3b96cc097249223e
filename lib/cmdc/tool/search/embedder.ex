defmodule CMDC.Tool.Search.Embedder do
  @moduledoc """
  What turns text into vectors for tool search (`CMDC.Tool.Search.attach/3`): a behaviour, so
  any model can serve — the native one (`CMDC.Tool.Search.Embedder.Native`, all-MiniLM-L6-v2
  run in Rust) or any Elixir function (an embeddings API, a local server, Bumblebee) through
  `function/2`.

  An embedder is `{module, state}`: `module` implements this behaviour, `state` is what its
  callbacks receive. `c:id/1` names the model (vectors of two ids are never compared, and the
  disk cache keys vectors by it); `c:embed/2` answers one vector per text, in order, as a
  list of floats or a binary of 32-bit little-endian floats. Vectors need not be unit length.

      iex> fun = fn texts -> {:ok, Enum.map(texts, &[String.length(&1) * 1.0, 1.0])} end
      iex> e = CMDC.Tool.Search.Embedder.function(fun, id: "length/v1")
      iex> {:ok, [v]} = CMDC.Tool.Search.Embedder.embed(e, ["abc"])
      iex> for <<x::float-32-little <- v>>, do: x
      [3.0, 1.0]
      iex> CMDC.Tool.Search.Embedder.id(e)
      "length/v1"
  """

  @typedoc "An embedder: its module and the state its callbacks receive."
  @type t :: {module(), term()}

  @typedoc "A vector as an embedder may answer it."
  @type vector :: [number()] | binary()

  @doc "The model's name and version: vectors of different ids never meet."
  @callback id(state :: term()) :: String.t()

  @doc "One vector per text, in order."
  @callback embed(state :: term(), texts :: [String.t()]) ::
              {:ok, [vector()]} | {:error, String.t()}

  @doc """
  An embedder from a function of a list of texts to `{:ok, vectors}` (or `{:error, message}`).
  `id:` (required) names the model: change it when the function starts answering other
  vectors, and the cached ones are left behind.
  """
  @spec function(([String.t()] -> {:ok, [vector()]} | {:error, String.t()}), keyword()) :: t()
  def function(fun, opts) when is_function(fun, 1) do
    CMDC.Tool.Options.check!(opts, [:id], "CMDC.Tool.Search.Embedder.function/2")

    case Keyword.fetch(opts, :id) do
      {:ok, id} when is_binary(id) and id != "" ->
        {CMDC.Tool.Search.Embedder.Function, %{fun: fun, id: id}}

      _ ->
        raise ArgumentError,
              "CMDC.Tool.Search.Embedder.function/2: id: must name the model " <>
                ~s[(a non-empty string such as "openai/text-embedding-3-small")]
    end
  end

  @doc "The embedder's model id."
  @spec id(t()) :: String.t()
  def id({module, state}), do: module.id(state)

  @doc """
  Embeds `texts`: `{:ok, vectors}` as binaries of 32-bit little-endian floats, one per text;
  `{:error, message}` when the embedder fails, raises, or answers the wrong shape (a wrong
  count, a non-number, vectors of different lengths) — it never raises itself.
  """
  @spec embed(t(), [String.t()]) :: {:ok, [binary()]} | {:error, String.t()}
  def embed(_embedder, []), do: {:ok, []}

  def embed({module, state} = embedder, texts) do
    case safe_call(fn -> module.embed(state, texts) end) do
      {:ok, vectors} when is_list(vectors) and length(vectors) == length(texts) ->
        to_binaries(vectors, embedder)

      {:ok, other} ->
        {:error,
         "the embedder #{inspect(id_of(embedder))} answered #{describe(other)} for " <>
           "#{length(texts)} texts: it must answer one vector per text"}

      {:error, message} when is_binary(message) ->
        {:error, "the embedder #{inspect(id_of(embedder))} failed: #{message}"}

      other ->
        {:error,
         "the embedder #{inspect(id_of(embedder))} answered #{inspect(other, limit: 5)}; " <>
           "expected {:ok, vectors} or {:error, message}"}
    end
  end

  defp safe_call(fun) do
    fun.()
  rescue
    e -> {:error, "it raised #{Exception.message(e)}"}
  catch
    kind, reason -> {:error, "it exited (#{kind}: #{inspect(reason, limit: 5)})"}
  end

  defp id_of({module, state}) do
    case safe_call(fn -> {:ok, module.id(state)} end) do
      {:ok, id} -> id
      _ -> inspect(module)
    end
  end

  defp describe(list) when is_list(list), do: "#{length(list)} vectors"
  defp describe(other), do: inspect(other, limit: 5)

  defp to_binaries(vectors, embedder) do
    binaries = Enum.map(vectors, &to_binary/1)

    cond do
      Enum.any?(binaries, &(&1 == :error)) ->
        {:error,
         "the embedder #{inspect(id_of(embedder))} answered a vector that is not a non-empty " <>
           "list of numbers or a binary of 32-bit floats"}

      binaries |> Enum.map(&byte_size/1) |> Enum.uniq() |> length() > 1 ->
        {:error, "the embedder #{inspect(id_of(embedder))} answered vectors of different lengths"}

      true ->
        {:ok, binaries}
    end
  end

  defp to_binary(bin) when is_binary(bin) and bin != "" and rem(byte_size(bin), 4) == 0, do: bin

  defp to_binary([_ | _] = list) do
    if Enum.all?(list, &is_number/1),
      do: for(x <- list, into: <<>>, do: <<x * 1.0::float-32-little>>),
      else: :error
  end

  defp to_binary(_), do: :error
end
