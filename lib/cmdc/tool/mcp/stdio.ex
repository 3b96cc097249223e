defmodule CMDC.Tool.MCP.Stdio do
  @moduledoc """
  Keeps stdout for the protocol alone.

  `bin/cmdc-mcp` starts the VM with the protocol channel on file descriptor 3 and descriptor 1
  pointing at stderr (`exec 3>&1 1>&2`), and says so in `CMDC_MCP_FD`. So from the first
  instruction on, whatever writes to "stdout" — `IO.puts/1` from any process, `:io.format/2`,
  a library's logging, a NIF, the VM's port helper and every program started through it or
  natively — reaches stderr. `open/0` marks descriptor 3 close-on-exec (no program inherits
  it) and opens a port writing to it: only frames written there reach the client.

  Started another way (`mix cmdc.mcp`), `open/0` moves the channel itself: it duplicates
  descriptor 1 to a close-on-exec one and points 1 at stderr (natively,
  `native/cmdc_tool_nif/src/stdio.rs`). Only programs started by Erlang ports with
  `:nouse_stdio` still see the original stdout then (the VM's port helper was started before).
  """

  alias CMDC.Tool.Native

  @env "CMDC_MCP_FD"

  @doc """
  Takes the protocol channel and returns `{:ok, port}` for protocol frames, or
  `{:error, reason}` (then nothing changed). Call it once per VM, before anything prints.
  """
  @spec open() :: {:ok, port()} | {:error, String.t()}
  def open do
    given = System.get_env(@env)
    # Programs the tools start must not think they own a protocol channel.
    System.delete_env(@env)

    with {:ok, fd} <- parse_fd(given),
         {:ok, fd} <- Native.stdio_protocol_fd(fd) do
      # Output only: stdin stays with the VM's `user` device, which the server reads.
      {:ok, Port.open({:fd, fd, fd}, [:out, :binary])}
    end
  end

  defp parse_fd(nil), do: {:ok, 1}

  defp parse_fd(text) do
    case Integer.parse(text) do
      {fd, ""} when fd >= 1 -> {:ok, fd}
      _ -> {:error, "#{@env}=#{text} is not a file descriptor"}
    end
  end
end
