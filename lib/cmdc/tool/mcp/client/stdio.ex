defmodule CMDC.Tool.MCP.Client.Stdio do
  @moduledoc """
  The stdio transport of `CMDC.Tool.MCP.Client`: the server is a program started through
  `CMDC.Tool.Exec` (its own process group, killed with everything it started when the client
  stops or dies; on Linux also when the VM dies), newline-delimited JSON-RPC on its stdin and
  stdout. Its stderr lines go to the log (`Logger.debug`), and the last few are kept so an error
  can say why the server stopped.

  A transport is plain data owned by the client process: `connect/2` starts the server,
  `send_message/2` writes one message, `handle_info/2` turns the exec messages into decoded
  messages or a `:closed` event.
  """

  require Logger

  alias CMDC.Tool.{Exec, JSON}
  alias CMDC.Tool.MCP.Protocol

  @stderr_kept 20
  # A server's line is one JSON-RPC message: a tools/list of thousands of tools is megabytes.
  @max_line 64 * 1024 * 1024

  defstruct [:exec, :name, :command, stderr: [], garbage: nil]

  @type t :: %__MODULE__{}

  @doc """
  Starts the server. `spec` holds `:command` (program), `:args`, `:env` (a map; added to the
  VM's environment) and `:cwd`.
  """
  @spec connect(map(), String.t()) :: {:ok, t()} | {:error, String.t()}
  def connect(spec, name) do
    opts = [
      stdin: :pipe,
      stream_lines: true,
      stream_stderr: true,
      max_output: 0,
      max_line: @max_line,
      env: Map.get(spec, :env, %{}),
      kill_after: 1_000
    ]

    opts = if spec[:cwd], do: Keyword.put(opts, :cwd, spec[:cwd]), else: opts
    command = spec.command

    case Exec.start(command, Map.get(spec, :args, []), opts) do
      {:ok, exec} -> {:ok, %__MODULE__{exec: exec, name: name, command: command}}
      {:error, message} -> {:error, "cannot start `#{command}`: #{message}"}
    end
  end

  @doc "Writes one message (a map) as a line."
  @spec send_message(t(), map()) :: {:ok, t()} | {:error, String.t()}
  def send_message(%__MODULE__{exec: exec} = t, message) do
    # A program that has ended (or never started) refuses the write; its final exec message
    # follows and says why, as a `:closed` event.
    _ = Exec.write(exec, Protocol.encode_frame(message))
    {:ok, t}
  end

  @doc """
  Handles a message the client process received: `{:messages, [decoded], t}` for a stdout line,
  `{:closed, reason, t}` when the server ended, `{:ok, t}` for other events of this server,
  `:unknown` for anything else.
  """
  @spec handle_info(term(), t()) ::
          {:messages, [map()], t()} | {:ok, t()} | {:closed, String.t(), t()} | :unknown
  def handle_info({:cmdc_exec, id, event}, %__MODULE__{exec: %{id: id}} = t), do: event(event, t)
  def handle_info(_msg, _t), do: :unknown

  defp event({:line, line}, t) do
    case JSON.decode(line) do
      {:ok, message} when is_map(message) or is_list(message) ->
        {:messages, List.wrap(message), t}

      _ ->
        # stdout is the protocol channel: anything else there is the server's bug. Say so
        # once in a while, and keep reading: the next line may be a real message.
        Logger.warning("mcp #{t.name}: ignored a stdout line that is not JSON-RPC: " <> cut(line))
        {:ok, %{t | garbage: cut(line)}}
    end
  end

  defp event({:stderr_line, line}, t) do
    Logger.debug("mcp #{t.name} stderr: " <> line)
    {:ok, %{t | stderr: Enum.take([line | t.stderr], @stderr_kept)}}
  end

  defp event({:started, _os_pid}, t), do: {:ok, t}

  defp event({:exit, %{status: status, code: code, signal: signal}}, t) do
    how =
      case {status, code, signal} do
        {:exited, code, nil} -> "exited with status #{code}"
        {:exited, _, signal} -> "was killed by signal #{signal}"
        {other, _, _} -> "was stopped (#{other})"
      end

    {:closed, "the server `#{t.command}` #{how}" <> last_words(t), t}
  end

  defp event({:error, message}, t), do: {:closed, message, t}

  defp last_words(%{stderr: [], garbage: nil}), do: ""
  defp last_words(%{stderr: [], garbage: g}), do: "; it wrote non-JSON to stdout: " <> g

  defp last_words(%{stderr: lines}),
    do: "; its stderr ended with: " <> cut(Enum.join(Enum.reverse(Enum.take(lines, 5)), "\n"))

  @doc "Stops the server (its whole process group)."
  @spec close(t()) :: :ok
  def close(%__MODULE__{exec: exec}) do
    Exec.close_stdin(exec)
    Exec.cancel(exec)
  end

  @doc "What a time-out message adds about this transport (e.g. garbage seen on stdout)."
  @spec diagnosis(t()) :: String.t()
  def diagnosis(t), do: last_words(t)

  defp cut(text) do
    cond do
      not String.valid?(text) -> inspect(text, limit: 300, binaries: :as_binaries)
      String.length(text) > 300 -> String.slice(text, 0, 300) <> "…"
      true -> text
    end
  end
end
