defmodule CMDC.Tool.MCP.Calls do
  @moduledoc """
  How every MCP transport runs a `tools/call` effect (`t:CMDC.Tool.MCP.call/0`): through
  `CMDC.Tool.Runner` (validation, permissions, approvals, hooks, time-outs, the tool's OS
  processes reaped on cancel), with its partial results as `notifications/progress` for the
  request's `progressToken`.

  The runner's messages reach the process that called `start/3`:
  `{CMDC.Tool.Runner, ref, {:update, payload}}` and `{CMDC.Tool.Runner, ref, {:done, result}}`
  (`ref` is the handle's). If that process dies, the runner cancels the call.
  """

  alias CMDC.Tool.{MCP, Runner}

  @doc "Starts a call for the current process; returns the runner's handle."
  @spec start(MCP.t(), MCP.call(), CMDC.Context.t()) :: Runner.Handle.t()
  def start(mcp, call, context) do
    id = to_string(call.id)
    request = %{id: id, name: call.module.name(), arguments: call.arguments}
    Runner.async(MCP.tools(mcp), request, %{context | tool_call_id: id})
  end

  @doc """
  The progress notification for the `count`-th partial result, or `nil` when the client asked
  for none (no `progressToken`).
  """
  @spec progress(MCP.call(), pos_integer(), term()) :: map() | nil
  def progress(%{progress_token: nil}, _count, _payload), do: nil

  def progress(%{progress_token: token}, count, payload),
    do: MCP.progress(token, count, text(payload))

  defp text(text) when is_binary(text), do: text

  defp text(details) do
    case CMDC.Tool.JSON.encode(details) do
      {:ok, json} -> json
      {:error, _} -> inspect(details)
    end
  end

  @doc """
  The `CMDC.Context` calls run in when the caller gives none: a session of its own, in
  `working_dir` (the current directory by default; transports pass the one they read at start,
  as `File.cwd!/0` asks the VM's file server, one process for every caller).
  """
  @spec context(String.t(), String.t() | nil) :: CMDC.Context.t()
  def context(prefix \\ "mcp", working_dir \\ nil) do
    CMDC.Context.new(
      session_id: "#{prefix}-#{System.unique_integer([:positive])}",
      working_dir: working_dir || File.cwd!()
    )
  end
end
