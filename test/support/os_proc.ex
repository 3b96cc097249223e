defmodule CMDC.Test.OsProc do
  @moduledoc false
  # Facts about OS processes for the tests, read from /proc.

  @doc "Whether the OS process runs (a zombie counts as dead: its parent may be the init)."
  def running?(os_pid) do
    case File.read("/proc/#{os_pid}/stat") do
      {:ok, stat} ->
        [_, after_name] = String.split(stat, ") ", parts: 2)
        not String.starts_with?(after_name, "Z")

      {:error, _} ->
        false
    end
  end

  @doc "Waits up to `ms` for the OS process to be gone; returns whether it is."
  def wait_dead(os_pid, ms \\ 3000) do
    cond do
      not running?(os_pid) -> true
      ms <= 0 -> false
      true -> Process.sleep(20) && wait_dead(os_pid, ms - 20)
    end
  end

  @doc "Waits up to `ms` for the OS process to be gone from /proc (dead and reaped)."
  def wait_gone(os_pid, ms \\ 3000) do
    cond do
      not exists?(os_pid) -> true
      ms <= 0 -> false
      true -> Process.sleep(20) && wait_gone(os_pid, ms - 20)
    end
  end

  @doc "Whether the OS process exists at all in /proc (a zombie does)."
  def exists?(os_pid), do: File.exists?("/proc/#{os_pid}")
end
