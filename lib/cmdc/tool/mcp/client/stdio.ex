defmodule CMDC.Tool.MCP.Client.Stdio do
  @moduledoc """
  The stdio transport of `CMDC.Tool.MCP.Client`: the server is a program started through
  `CMDC.Tool.Exec` (its own process group, killed with everything it started when the client
  stops or dies; on Linux also when the VM dies), newline-delimited JSON-RPC on its stdin and
  stdout. Its stderr lines go to the log (`Logger.debug`), and the last few are kept so an error
  can say why the server stopped.

  A transport (`CMDC.Tool.MCP.Client.Transport`) is plain data owned by the client process:
  `connect/3` starts the server, `send_message/2` writes one message, `handle_info/2` turns the
  exec messages into decoded messages or a `:closed` event.

  What a server writes is bounded: a line over `max_response_bytes` fails the request it answers
  (its id read from the line's head) and is skipped; a line that starts like JSON but does not
  decode (invalid UTF-8, say) fails its request the same way; stderr reaches the log at most
  `stderr_lines_per_second` lines a second (`CMDC.Tool.MCP.Client.Limits`). A failure message
  quotes only the stderr written since the server's last message or the last call sent, never
  an earlier call's.

  Backpressure: the server's lines flow under a credit window of `stdio_window` messages and
  `stdio_window_bytes` bytes (`CMDC.Tool.Exec`'s `:window`), each returned as the client
  takes its line from the mailbox. A server writing faster than its client reads blocks on its own full stdout
  pipe: the client's mailbox never holds more than the window, and nobody is stopped for it.
  stderr lines over the window are dropped natively, counted, and the count logged (at most
  once a second); the server's last stderr line before it exits is always delivered.
  """

  @behaviour CMDC.Tool.MCP.Client.Transport

  require Logger

  alias CMDC.Tool.{Exec, JSON}
  alias CMDC.Tool.MCP.Client.LogLimit
  alias CMDC.Tool.MCP.{Protocol, SelfGuard}

  @stderr_kept 20

  defstruct [
    :exec,
    :name,
    :command,
    :max_line,
    :logs,
    :drop_logs,
    stderr_dropped: 0,
    stderr: [],
    garbage: nil,
    skipping?: false
  ]

  @type t :: %__MODULE__{}

  @doc """
  Starts the server. `spec` holds `:command` (program), `:args`, `:env` (a map; added to the
  VM's environment) and `:cwd`.
  """
  @impl true
  def connect(spec, name, limits) do
    opts = [
      stdin: :pipe,
      stream_lines: true,
      stream_stderr: true,
      max_output: 0,
      # A longer line arrives in pieces of this size: the first piece is how one is noticed.
      max_line: limits.max_response_bytes,
      env: Map.get(spec, :env, %{}),
      kill_after: 1_000,
      window: limits.stdio_window,
      window_bytes: limits.stdio_window_bytes
    ]

    opts = if spec[:cwd], do: Keyword.put(opts, :cwd, spec[:cwd]), else: opts
    command = spec.command

    case Exec.start(command, Map.get(spec, :args, []), opts) do
      {:ok, exec} ->
        {:ok,
         %__MODULE__{
           exec: exec,
           name: name,
           command: command,
           max_line: limits.max_response_bytes,
           logs: LogLimit.new(limits.stderr_lines_per_second),
           drop_logs: LogLimit.new(1)
         }}

      {:error, message} ->
        {:error, "cannot start `#{command}`: #{message}"}
    end
  end

  @impl true
  def ready(t, _era, _version), do: t

  @impl true
  def cancel(t, _id), do: t

  @impl true
  def send_message(%__MODULE__{exec: exec} = t, message) do
    # A program that has ended (or never started) refuses the write; its final exec message
    # follows and says why, as a `:closed` event.
    _ = Exec.write(exec, Protocol.encode_frame(message))
    # A new call starts a new story: what stderr said before belongs to an earlier one.
    if message["method"] == "tools/call", do: {:ok, %{t | stderr: []}}, else: {:ok, t}
  end

  @impl true
  def handle_info({:cmdc_exec, id, event}, %__MODULE__{exec: %{id: id}} = t),
    do: event(event, credit(event, t))

  def handle_info(_msg, _t), do: :unknown

  # A line taken from the mailbox frees its credit at once: a credit held back while the
  # client waits could stall the byte bound (a long line waits for the bytes of lines already
  # read). One native call (a lock and a counter) per line.
  defp credit({kind, _line}, t) when kind in [:line, :stderr_line] do
    _ = Exec.ack(t.exec, 1)
    t
  end

  defp credit(_event, t), do: t

  # The rest of a line over the limit: skipped up to its end (its last piece is shorter).
  defp event({:line, piece}, %{skipping?: true} = t),
    do: {:ok, %{t | skipping?: byte_size(piece) == t.max_line}}

  defp event({:line, line}, t) when byte_size(line) >= t.max_line do
    t = %{t | skipping?: true, stderr: []}
    reason = "a message over #{t.max_line} bytes (max_response_bytes) was skipped"
    {:failed, head_id(line), reason, t}
  end

  defp event({:line, line}, t) do
    case JSON.decode(line) do
      {:ok, message} when is_map(message) or is_list(message) ->
        {:messages, List.wrap(message), %{t | stderr: []}}

      {:error, reason} ->
        undecodable(line, reason, t)

      {:ok, _scalar} ->
        undecodable(line, "not an object", t)
    end
  end

  defp event({:stderr_line, line}, t) do
    logs = LogLimit.log(t.logs, :debug, fn -> "mcp #{t.name} stderr: " <> cut(line) end)
    # Kept as a bounded raw head (cheap per line under a flood); made readable when quoted.
    head = binary_part(line, 0, min(byte_size(line), 400))
    {:ok, %{t | logs: logs, stderr: [head | Enum.take(t.stderr, @stderr_kept - 1)]}}
  end

  defp event({:stderr_dropped_lines, n}, t) do
    dropped = t.stderr_dropped + n

    text = fn ->
      "mcp #{t.name}: #{dropped} stderr lines dropped so far (the server writes its log " <>
        "faster than it is read)"
    end

    {:ok, %{t | stderr_dropped: dropped, drop_logs: LogLimit.log(t.drop_logs, :warning, text)}}
  end

  defp event({:started, _os_pid}, t), do: {:ok, t}

  defp event({:exit, %{status: status, code: code, signal: signal}}, t) do
    how =
      case {status, code, signal} do
        {:exited, code, nil} -> "exited with status #{code}"
        {:exited, _, signal} -> "was killed by signal #{signal}"
        {other, _, _} -> "was stopped (#{other})"
      end

    if status == :exited and SelfGuard.refusal?(code, t.stderr) do
      {:refused,
       "the server `#{t.command}` is cmdc-mcp refusing to start below this one (it #{how}; " <>
         "an MCP config it reads runs cmdc-mcp again): not retried" <> last_words(t), t}
    else
      {:closed, "the server `#{t.command}` #{how}" <> last_words(t), t}
    end
  end

  defp event({:error, message}, t), do: {:closed, message, t}

  # stdout is the protocol channel. A line that looks like a message but does not decode fails
  # the request it names; anything else there is the server's bug: logged (within the budget),
  # and reading goes on, as the next line may be a real message.
  defp undecodable(line, reason, t) do
    case {line, head_id(line)} do
      {"{" <> _, id} when id != nil ->
        {:failed, id, "an answer that does not decode (#{cut(to_string(reason))})", t}

      _ ->
        text = fn ->
          "mcp #{t.name}: ignored a stdout line that is not JSON-RPC: " <> cut(line)
        end

        {:ok, %{t | garbage: cut(line), logs: LogLimit.log(t.logs, :warning, text)}}
    end
  end

  @doc false
  # The id of a message from its first bytes, when they can be read without decoding it all.
  def head_id(text) do
    head = binary_part(text, 0, min(byte_size(text), 4096))

    case Regex.run(~r/"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,200}")/, head) do
      [_, "\"" <> quoted] -> String.trim_trailing(quoted, "\"")
      [_, digits] -> String.to_integer(digits)
      nil -> nil
    end
  end

  defp last_words(%{stderr: [], garbage: nil}), do: ""
  defp last_words(%{stderr: [], garbage: g}), do: "; it wrote non-JSON to stdout: " <> g

  defp last_words(%{stderr: lines}),
    do:
      "; its stderr ended with: " <>
        (lines |> Enum.take(5) |> Enum.reverse() |> Enum.map_join("\n", &cut/1) |> cut())

  @impl true
  def close(%__MODULE__{exec: exec}) do
    Exec.close_stdin(exec)
    Exec.cancel(exec)
  end

  @impl true
  def diagnosis(t), do: last_words(t)

  defp cut(text) do
    cond do
      not String.valid?(text) -> inspect(text, limit: 300, binaries: :as_binaries)
      String.length(text) > 300 -> String.slice(text, 0, 300) <> "…"
      true -> text
    end
  end
end
