defmodule CMDC.Tool.Home do
  @moduledoc """
  The user's folders: the home folder (`~`) and `$CMDC_HOME`, checked once for everything that
  reads user files (discovery, MCP configs, the compile cache, the script cache key).

  Both must be absolute paths. A relative or empty one would be read relative to whatever folder
  the agent runs in, so a cloned repository's `mcp.json`, `trusted.json`, tools and plugins
  would become the user's own. Such a value is **ignored, with a logged warning** (once per
  value) and an error entry in the reports of `CMDC.Tool.Discovery.discover/1` and
  `CMDC.Tool.MCP.Servers.load/1` (`type: :bad_home`): an ignored `$CMDC_HOME` leaves the default
  `~/.cmdc`, an unusable home folder leaves no user folders at all. `$CMDC_HOME` may also be
  written `~/…`.

  Run from the home folder itself, the "project" is the user's home: its `.cmdc/tools`,
  `.mcp.json` and `.cmdc/mcp.json` are the user's own files, loaded as user files (see
  `home?/2`), not as an untrusted project.

      iex> CMDC.Tool.Home.cmdc_home(cmdc_home: "/opt/cmdc", home: "/home/u")
      {:ok, "/opt/cmdc"}
      iex> CMDC.Tool.Home.cmdc_home(cmdc_home: "~/cmdc", home: "/home/u")
      {:ok, "/home/u/cmdc"}
      iex> CMDC.Tool.Home.cmdc_home(cmdc_home: nil)
      {:ok, nil}
      iex> {:error, reason} = CMDC.Tool.Home.cmdc_home(cmdc_home: ".cmdc", home: "/home/u", log: false)
      iex> reason
      ~s|CMDC_HOME is ".cmdc", not an absolute path: ignored (a relative one would be read from the project folder, making a repository's files the user's). Set it to an absolute path or unset it|
  """

  require Logger

  @doc """
  The home folder: `{:ok, absolute}` from `:home` (default: `System.user_home/0`), or
  `{:error, reason}` when it is unset or not absolute (logged once).
  """
  @spec user_home(keyword()) :: {:ok, String.t()} | {:error, String.t()}
  def user_home(opts \\ []) do
    raw = Keyword.get_lazy(opts, :home, &System.user_home/0)

    if is_binary(raw) and Path.type(raw) == :absolute do
      {:ok, Path.expand(raw)}
    else
      refuse(
        opts,
        "the home folder is #{inspect(raw)}, not an absolute path: user folders, plugins and " <>
          "user MCP configs are not read (set HOME to an absolute path)"
      )
    end
  end

  @doc """
  `$CMDC_HOME`: `{:ok, nil}` when unset, `{:ok, absolute}`, or `{:error, reason}` when it is
  empty or relative (ignored; logged once unless `log: false`). Options: `:cmdc_home` (default:
  the `CMDC_HOME` variable), `:home`.
  """
  @spec cmdc_home(keyword()) :: {:ok, String.t() | nil} | {:error, String.t()}
  def cmdc_home(opts \\ []) do
    raw = Keyword.get_lazy(opts, :cmdc_home, fn -> System.get_env("CMDC_HOME") end)

    cond do
      raw == nil ->
        {:ok, nil}

      is_binary(raw) and Path.type(raw) == :absolute ->
        {:ok, Path.expand(raw)}

      is_binary(raw) and (raw == "~" or String.starts_with?(raw, "~/")) ->
        with {:ok, home} <- user_home(opts),
             do: {:ok, Path.join(home, String.trim_leading(raw, "~"))}

      true ->
        refuse(
          opts,
          "CMDC_HOME is #{inspect(raw)}, not an absolute path: ignored (a relative one would " <>
            "be read from the project folder, making a repository's files the user's). Set it " <>
            "to an absolute path or unset it"
        )
    end
  end

  @doc """
  The user's cmdc folder: `$CMDC_HOME` when valid, else `~/.cmdc`; `nil` when neither is usable.
  """
  @spec cmdc_dir(keyword()) :: String.t() | nil
  def cmdc_dir(opts \\ []) do
    case cmdc_home(opts) do
      {:ok, dir} when is_binary(dir) ->
        dir

      _ ->
        case user_home(opts) do
          {:ok, home} -> Path.join(home, ".cmdc")
          {:error, _} -> nil
        end
    end
  end

  @doc """
  Whether `cwd` is the home folder (the same folder on disk, symlinks followed): its project
  files are then the user's.

      iex> CMDC.Tool.Home.home?("/nonexistent/u/", "/nonexistent/u")
      true
      iex> CMDC.Tool.Home.home?("/nonexistent/u/src", "/nonexistent/u")
      false
  """
  @spec home?(Path.t(), Path.t()) :: boolean()
  def home?(cwd, home), do: identity(cwd) == identity(home)

  @doc """
  The errors to report for `opts` (as discovery's entries, `type: :bad_home`): one per folder
  that is set but not usable.
  """
  @spec errors(keyword()) :: [map()]
  def errors(opts) do
    for {:error, reason} <- [user_home(opts), cmdc_home(opts)] do
      %{type: :bad_home, source: :user, provider: "cmdc", path: "", reason: reason}
    end
  end

  # The same folder on disk (symlinks followed): same device and inode.
  defp identity(path) do
    case File.stat(path) do
      {:ok, %File.Stat{major_device: dev, inode: inode}} when inode > 0 -> {dev, inode}
      _ -> Path.expand(path)
    end
  end

  defp refuse(opts, reason) do
    if Keyword.get(opts, :log, true) do
      key = {__MODULE__, :warned, reason}

      unless :persistent_term.get(key, false) do
        :persistent_term.put(key, true)
        Logger.warning("cmdc_tool: #{reason}")
      end
    end

    {:error, reason}
  end
end
