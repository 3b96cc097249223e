defmodule CMDC.Tool.MCP.Transport do
  @moduledoc """
  What an MCP server transport does with the protocol core's output. `CMDC.Tool.MCP.handle/3`
  returns JSON-RPC messages and effects (`t:CMDC.Tool.MCP.effect/0`); `perform/3` hands each,
  in order, to the transport's callback for its kind, so a transport never matches the list's
  shape and a new effect is one new callback. `CMDC.Tool.MCP.Server` (stdio: writes each
  message, keeps calls and subscriptions in its loop) and `CMDC.Tool.MCP.HTTP.Handler` (one
  HTTP answer per request: a message, a call's result or stream, a subscription's stream)
  implement it.
  """

  alias CMDC.Tool.MCP

  @typedoc "The transport's own state, threaded through the callbacks."
  @type state :: term()

  @doc "A JSON-RPC message for the client (a reply, an error, a notification)."
  @callback reply(message :: map(), state()) :: state()
  @doc "A `tools/call` to run (`CMDC.Tool.MCP.Calls`)."
  @callback call(MCP.call(), state()) :: state()
  @doc "A subscription (`subscriptions/listen`) to keep open under the request `id`."
  @callback listen(id :: term(), filter :: map(), state()) :: state()
  @doc "The client cancelled request `id` (a call or a subscription)."
  @callback cancel(id :: term(), state()) :: state()

  @doc "Applies `outgoing` (from `CMDC.Tool.MCP.handle/3`) in order through `transport`."
  @spec perform([map() | MCP.effect()], module(), state()) :: state()
  def perform(outgoing, transport, state) do
    Enum.reduce(outgoing, state, fn
      %{} = message, acc -> transport.reply(message, acc)
      {:call, call}, acc -> transport.call(call, acc)
      {:listen, id, filter}, acc -> transport.listen(id, filter, acc)
      {:cancel, id}, acc -> transport.cancel(id, acc)
    end)
  end
end
