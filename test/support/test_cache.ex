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

  @doc """
  A virtualenv of the entry `name` with `packages` from PyPI, made once: `{:ok, python}` when
  `probe` (Python source, e.g. `"import jsonschema"`) runs in it, else `{:skip, reason}` when
  PyPI cannot be reached. Python runs outside the checkout (some packages write caches in their
  working directory).
  """
  def venv(name, packages, probe) do
    venv = dir(name)
    py = Path.join([venv, "bin", "python"])

    if venv_ready?(py, probe),
      do: {:ok, py},
      else: with_lock(name, fn -> create_venv(venv, py, packages, probe) end)
  end

  defp venv_ready?(py, probe) do
    File.exists?(py) and
      match?(
        {_, 0},
        System.cmd(py, ["-c", probe], stderr_to_stdout: true, cd: System.tmp_dir!())
      )
  end

  defp create_venv(venv, py, packages, probe) do
    if venv_ready?(py, probe) do
      {:ok, py}
    else
      python3 = System.find_executable("python3") || raise "python3 is needed for this check"

      with {_, 0} <- System.cmd(python3, ["-m", "venv", venv], stderr_to_stdout: true),
           {_, 0} <-
             System.cmd(py, ["-m", "pip", "install", "--quiet" | packages], stderr_to_stdout: true) do
        {:ok, py}
      else
        {out, _} ->
          if out =~
               ~r/(Could not find a version|Failed to establish|Temporary failure|Network is unreachable|No matching distribution)/i,
             do: {:skip, String.slice(out, -300, 300)},
             else: raise("creating #{venv} failed: #{out}")
      end
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
