defmodule CMDC.Test.OsProc do
  @moduledoc false
  # Facts about OS processes for the tests, read from /proc.

  import CMDC.Tool.Eventually

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

  # The default deadline only bounds a hang (`CMDC.Tool.Eventually`): a busy machine is slow to
  # schedule a killed process's exit.

  @doc "Waits (at most `ms`) for the OS process to be gone; returns whether it is."
  def wait_dead(os_pid, ms \\ 30_000),
    do: eventually(fn -> not running?(os_pid) end, within: ms, flunk: false)

  @doc "Waits (at most `ms`) for the OS process to be gone from /proc (dead and reaped)."
  def wait_gone(os_pid, ms \\ 30_000),
    do: eventually(fn -> not exists?(os_pid) end, within: ms, flunk: false)

  @doc "Whether the OS process exists at all in /proc (a zombie does)."
  def exists?(os_pid), do: File.exists?("/proc/#{os_pid}")
end
