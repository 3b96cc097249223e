defmodule CMDC.Tool.TestCache do
  @moduledoc false
  # Where tests and benches keep what they install (virtualenvs, npm folders): outside the
  # checkout, so a second run, another clone or a worktree reuses it (`$CMDC_TEST_CACHE`, else
  # `$XDG_CACHE_HOME/cmdc_tool`, else `~/.cache/cmdc_tool`). `with_lock/2` serializes the
  # installs of one entry across OS processes (two test runs on one machine).

  @stale_s 1_200

  @doc "The cache folder of one entry (not created)."
  def dir(name) do
    base =
      System.get_env("CMDC_TEST_CACHE") ||
        Path.join(System.get_env("XDG_CACHE_HOME") || Path.expand("~/.cache"), "cmdc_tool")

    Path.join(base, name)
  end

  @doc """
  Runs `fun` holding a lock on the entry `name` (a directory made atomically beside it); a
  lock older than 20 minutes is taken as left by a killed run.
  """
  def with_lock(name, fun) do
    lock = dir(name) <> ".lock"
    File.mkdir_p!(Path.dirname(lock))
    acquire(lock)

    try do
      fun.()
    after
      File.rmdir(lock)
    end
  end

  # Another run installing may hold it for minutes: the deadline is the age that makes a lock
  # stale, after which it is taken as left by a killed run.
  defp acquire(lock) do
    taken =
      CMDC.Tool.Eventually.eventually(
        fn -> File.mkdir(lock) == :ok or (stale?(lock) and File.rmdir(lock) == :ok and false) end,
        within: @stale_s * 1_000,
        flunk: false
      )

    unless taken do
      File.rmdir(lock)
      acquire(lock)
    end
  end

  defp stale?(lock) do
    case File.stat(lock, time: :posix) do
      {:ok, %{mtime: t}} -> System.os_time(:second) - t > @stale_s
      _ -> false
    end
  end
end
