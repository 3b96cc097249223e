defmodule CMDC.Tool.Script.CacheKey do
  @moduledoc """
  The user's key for the tags of `{name}.tool.json` caches (see `CMDC.Tool.Script`, "The
  description cache"): 32 random bytes, as hex, in `cache.key` under the user's cmdc folder
  (`$CMDC_HOME`, else `~/.cmdc`: `CMDC.Tool.Home`), created on first use with mode 0600.

  A cache is taken as the script's description only when its tag was made with this key, so a
  `.tool.json` that arrives with a repository (or is edited by hand) is never trusted: nobody
  without the key can make a valid tag. When the folder cannot be written, a key for this VM
  alone is used (caches then help only while it runs).
  """

  require Logger

  @file_name "cache.key"

  @doc "The key (64 hex characters) for `opts` (`:cmdc_home`, `:home`, as `CMDC.Tool.Home`)."
  @spec get(keyword()) :: String.t()
  def get(opts \\ []) do
    path =
      with dir when is_binary(dir) <- CMDC.Tool.Home.cmdc_dir(opts),
           do: Path.join(dir, @file_name)

    cached = {__MODULE__, path}

    case :persistent_term.get(cached, nil) do
      nil ->
        key = read_or_create(path)
        :persistent_term.put(cached, key)
        key

      key ->
        key
    end
  end

  defp read_or_create(nil), do: vm_key("no home folder to keep it in")

  defp read_or_create(path) do
    case read(path) do
      {:ok, key} -> key
      :error -> create(path)
    end
  end

  defp read(path) do
    with {:ok, %File.Stat{type: :regular, size: 64}} <- File.lstat(path),
         {:ok, text} <- File.read(path),
         true <- text =~ ~r/\A[0-9a-f]{64}\z/ do
      {:ok, text}
    else
      _ -> :error
    end
  end

  # Written aside, then linked into place: of two VMs creating it at once, one key wins and
  # both use it.
  defp create(path) do
    key = Base.encode16(:crypto.strong_rand_bytes(32), case: :lower)
    tmp = "#{path}.#{System.pid()}.#{System.unique_integer([:positive])}"

    result =
      with :ok <- File.mkdir_p(Path.dirname(path)),
           :ok <- File.write(tmp, "", [:exclusive]),
           :ok <- File.chmod(tmp, 0o600),
           :ok <- File.write(tmp, key),
           :ok <- place(tmp, path) do
        read(path)
      end

    File.rm(tmp)

    case result do
      {:ok, key} -> key
      other -> vm_key("cannot write #{path}: #{inspect(other)}")
    end
  end

  defp place(tmp, path) do
    case :file.make_link(tmp, path) do
      :ok -> :ok
      # Another VM made it first (use its key), or a broken file is there (replace it).
      {:error, :eexist} -> if read(path) == :error, do: File.rename(tmp, path), else: :ok
      # A file system without hard links: the rename is atomic too, the last writer wins.
      {:error, _} -> File.rename(tmp, path)
    end
  end

  defp vm_key(why) do
    Logger.warning("cmdc_tool: script caches are kept for this VM only (#{why})")
    Base.encode16(:crypto.strong_rand_bytes(32), case: :lower)
  end
end
