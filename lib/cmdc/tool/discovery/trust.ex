defmodule CMDC.Tool.Discovery.Trust do
  @moduledoc """
  Edits the trust list, `trusted.json` (see "Trust" in `CMDC.Tool.Discovery`): the folders whose
  project tool folders (`.cmdc/tools`, …) and `.mcp.json` servers are loaded. What
  `mix cmdc.tools trust [PATH]`, `untrust [PATH]` and `trusted` do.

  The file written is `$CMDC_HOME/trusted.json` when `CMDC_HOME` is usable (absolute, or `~/…`;
  the rule of `CMDC.Tool.Home`), else `~/.cmdc/trusted.json`; `list/1` reads both, as discovery
  does. Entries are absolute paths
  (a relative entry would trust whatever folder an agent runs in).

      iex> home = Path.join(System.tmp_dir!(), "cmdc_trust_doc_#{System.unique_integer([:positive])}")
      iex> project = Path.join(home, "my_agent")
      iex> {:ok, file} = CMDC.Tool.Discovery.Trust.trust(project, home: home, cmdc_home: nil)
      iex> Path.relative_to(file, home)
      ".cmdc/trusted.json"
      iex> CMDC.Tool.Discovery.Trust.list(home: home, cmdc_home: nil) == [{project, file}]
      true
      iex> CMDC.Tool.Discovery.project_trusted?(cwd: project, home: home, cmdc_home: nil)
      true
      iex> {:ok, _} = CMDC.Tool.Discovery.Trust.untrust(project, home: home, cmdc_home: nil)
      iex> CMDC.Tool.Discovery.Trust.list(home: home, cmdc_home: nil)
      []
      iex> File.rm_rf(home) |> elem(0)
      :ok

  ## Errors

  `trust/2` and `untrust/2` answer `{:error, message}` when the list cannot be read (invalid
  JSON: it is left as it is, the message names it) or written; `untrust/2` of a folder not in
  the list is `{:error, message}` too. `list/1` skips unreadable files. Unknown options raise
  `ArgumentError`.

  ## Options

  `:home` (default `System.user_home!/0`), `:cmdc_home` (default `$CMDC_HOME`), `:cwd` (the base
  of a relative `path`, default `File.cwd!/0`).
  """

  alias CMDC.Tool.{Home, JSON}

  @options [:home, :cmdc_home, :cwd]

  @doc "Adds `path` (default: the current folder) to the trust list; `{:ok, file}`."
  @spec trust(Path.t() | nil, keyword()) :: {:ok, String.t()} | {:error, String.t()}
  def trust(path \\ nil, opts \\ []) do
    opts = CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Discovery.Trust.trust/2")
    folder = folder(path, opts)

    with {:ok, file} <- file(opts),
         {:ok, list} <- read(file) do
      if folder in list, do: {:ok, file}, else: write(file, list ++ [folder])
    end
  end

  @doc "Removes `path` (default: the current folder) from the trust list; `{:ok, file}`."
  @spec untrust(Path.t() | nil, keyword()) :: {:ok, String.t()} | {:error, String.t()}
  def untrust(path \\ nil, opts \\ []) do
    opts = CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Discovery.Trust.untrust/2")
    folder = folder(path, opts)

    with {:ok, file} <- file(opts),
         {:ok, list} <- read(file) do
      if folder in list,
        do: write(file, list -- [folder]),
        else: {:error, "#{folder} is not in the trust list #{file}"}
    end
  end

  @doc "The trusted folders, `[{folder, file}]`, from every trust list discovery reads."
  @spec list(keyword()) :: [{String.t(), String.t()}]
  def list(opts \\ []) do
    opts = CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Discovery.Trust.list/1")
    home = home(opts)

    for dir <- Home.cmdc_dirs(home_opts(opts)),
        file = Path.join(dir, "trusted.json"),
        {:ok, list} <- [read(file)],
        folder <- list,
        do: {expand(folder, home), file}
  end

  @doc """
  The trust list file `trust/2` writes: `trusted.json` in the user's cmdc folder
  (`CMDC.Tool.Home.cmdc_dir/1`: `$CMDC_HOME` when it is usable, else `~/.cmdc`), the first file
  discovery reads. `{:error, reason}` when neither folder is usable (a relative `HOME` and no
  absolute `CMDC_HOME`).
  """
  @spec file(keyword()) :: {:ok, String.t()} | {:error, String.t()}
  def file(opts \\ []) do
    case Home.cmdc_dir(home_opts(opts)) do
      nil -> {:error, "no user folder to keep the trust list in: " <> home_reason(opts)}
      dir -> {:ok, Path.join(dir, "trusted.json")}
    end
  end

  defp home_opts(opts), do: Keyword.take(opts, [:home, :cmdc_home])

  defp home_reason(opts) do
    case Home.user_home(home_opts(opts)) do
      {:error, reason} -> reason
      {:ok, _} -> "HOME and CMDC_HOME are unusable"
    end
  end

  defp folder(path, opts) do
    cwd = Keyword.get_lazy(opts, :cwd, &File.cwd!/0)
    Path.expand(path || ".", cwd)
  end

  defp home(opts), do: Path.expand(Keyword.get_lazy(opts, :home, &System.user_home!/0))

  defp expand("~" <> rest, home), do: home <> rest
  defp expand(folder, _home), do: folder

  defp read(file) do
    case File.read(file) do
      {:ok, text} ->
        case JSON.decode(text) do
          {:ok, %{"trusted" => list}} when is_list(list) ->
            {:ok, list}

          {:ok, list} when is_list(list) ->
            {:ok, list}

          _ ->
            {:error, "#{file} is not a trust list ({\"trusted\": [folders]}); fix or remove it"}
        end

      {:error, :enoent} ->
        {:ok, []}

      {:error, reason} ->
        {:error, "cannot read #{file}: #{:file.format_error(reason)}"}
    end
  end

  defp write(file, list) do
    text = JSON.encode!(%{"trusted" => list}, pretty: true) <> "\n"

    with :ok <- File.mkdir_p(Path.dirname(file)),
         :ok <- File.write(file, text) do
      {:ok, file}
    else
      {:error, reason} -> {:error, "cannot write #{file}: #{:file.format_error(reason)}"}
    end
  end
end
