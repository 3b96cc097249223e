defmodule CMDC.Tool.Discovery.CompileCache do
  @moduledoc """
  What the compiler VM made of an Elixir tool file, kept on disk so that a file already compiled
  once is not compiled again: not on the next start of an MCP server, nor when a watcher sees a
  file touched but not changed. No compiler VM starts when every file is cached.

  An entry is keyed by a SHA-256 digest of the file's path and content, the Elixir and OTP
  versions and this library's `CMDC.Tool` module (what compiling the file depends on); it holds
  the file's `.beam` binaries and what its tools' `name/0`, `description/0` and `parameters/0`
  returned (`t:CMDC.Tool.Discovery.Compiler.result/0`). Only successful compilations are kept: a
  file that failed is compiled again next time.

  The folder is `:compile_cache` (a path, or `false` for no cache), else
  `$CMDC_HOME/cache/compiled` when `:cmdc_home` (or the `CMDC_HOME` variable) is set, else the
  user's cache folder (`~/.cache/cmdc_tool/compiled` on Linux). The host loads the binaries it
  finds there, so the folder must be the user's own: it is made private (`0700`) on use, and a
  folder that cannot be (someone else's) is not used. Entries are written whole (a temporary
  file renamed), so two servers sharing the folder never read half an entry.
  """

  alias CMDC.Tool.Discovery.Compiler

  @typedoc "An open cache: its folder, or `nil` when caching is off or the folder unusable."
  @type t :: String.t() | nil

  @doc """
  The cache folder for discovery options (see the module documentation), created and made
  private; `nil` when caching is off or the folder cannot be used.

      iex> CMDC.Tool.Discovery.CompileCache.open(compile_cache: false)
      nil
  """
  @spec open(keyword()) :: t()
  def open(opts) do
    case folder(opts) do
      nil ->
        nil

      dir ->
        with :ok <- File.mkdir_p(dir),
             :ok <- File.chmod(dir, 0o700) do
          dir
        else
          _ -> nil
        end
    end
  end

  defp folder(opts) do
    # An empty or relative CMDC_HOME is ignored (CMDC.Tool.Home).
    cmdc_home =
      case CMDC.Tool.Home.cmdc_home(opts) do
        {:ok, dir} -> dir
        {:error, _} -> nil
      end

    case Keyword.get(opts, :compile_cache) do
      false -> nil
      dir when is_binary(dir) -> Path.expand(dir)
      nil when is_binary(cmdc_home) -> Path.join([cmdc_home, "cache", "compiled"])
      nil -> :filename.basedir(:user_cache, "cmdc_tool") |> to_string() |> Path.join("compiled")
    end
  end

  @doc """
  The key of a file's current content, or `nil` when the file cannot be read (it is compiled,
  and the compiler reports why).
  """
  @spec key(String.t()) :: String.t() | nil
  def key(path) do
    case File.read(path) do
      {:ok, content} ->
        context =
          {path, System.version(), :erlang.system_info(:otp_release), CMDC.Tool.module_info(:md5)}

        :crypto.hash(:sha256, [:erlang.term_to_binary(context), content])
        |> Base.url_encode64(padding: false)

      {:error, _} ->
        nil
    end
  end

  @doc "The cached result for `key`, or `nil`."
  @spec fetch(t(), String.t() | nil) :: Compiler.result() | nil
  def fetch(nil, _key), do: nil
  def fetch(_dir, nil), do: nil

  def fetch(dir, key) do
    with {:ok, binary} <- File.read(Path.join(dir, key)),
         {:ok, {:ok, binaries, infos} = result} when is_list(binaries) and is_map(infos) <-
           decode(binary) do
      result
    else
      _ -> nil
    end
  end

  defp decode(binary) do
    # Not `:safe`: the modules' names are new atoms in a fresh VM (the folder is private).
    {:ok, :erlang.binary_to_term(binary)}
  rescue
    ArgumentError -> :error
  end

  @doc """
  Keeps a successful result under `key` (taken before compiling), when the file still has that
  content (an edit made while compiling must not be stored under the old content's key).
  Failures are not kept. Returns `:ok` whatever happens: the cache is an optimisation.
  """
  @spec store(t(), String.t() | nil, String.t(), Compiler.result()) :: :ok
  def store(nil, _key, _path, _result), do: :ok
  def store(_dir, nil, _path, _result), do: :ok

  def store(dir, key, path, {:ok, _, _} = result) do
    if key(path) == key do
      tmp = Path.join(dir, "#{key}.#{System.pid()}.#{System.unique_integer([:positive])}.tmp")

      with :ok <- File.write(tmp, :erlang.term_to_binary(result)),
           :ok <- File.rename(tmp, Path.join(dir, key)) do
        :ok
      else
        _ -> File.rm(tmp)
      end
    end

    :ok
  end

  def store(_dir, _key, _path, _result), do: :ok
end
