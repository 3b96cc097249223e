defmodule CMDC.Tool.MCP.Client.Transport do
  @moduledoc """
  The contract of a `CMDC.Tool.MCP.Client` transport (the transports' table, which
  `CMDC.Tool.MCP.Config` and the client both read, is `CMDC.Tool.MCP.Client.Transports`).

  A transport is plain data owned by the client process. The client calls `connect/3`, then
  `send_message/2` for each message, hands every message its process receives to
  `handle_info/2`, calls `ready/3` once the server's era and version are known, `cancel/2` when
  a request ends early (time-out, cancelled caller: the transport frees what it holds for it),
  and `close/1` when it stops. `handle_info/2` answers:

    * `{:messages, [map], t}` - decoded messages from the server (checked by the client);
    * `{:ok, t}` - an event of this transport with nothing for the client;
    * `{:failed, id, reason, t}` - the request `id` will never be answered;
    * `{:lost, reason, t}` - the server forgot this client (HTTP 404 on a session): the client
      connects again and re-sends what was pending, once;
    * `{:closed, reason, t}` - the server or the connection is gone;
    * `{:refused, reason, t}` - the server is gone and refused to run at all (a nested
      `cmdc-mcp`'s self-guard, `CMDC.Tool.MCP.SelfGuard.refusal?/2`): final, not retried;
    * `:unknown` - not this transport's message.

  Adding a transport: a module implementing these callbacks, a row in
  `CMDC.Tool.MCP.Client.Transports`, and the config keys it reads in `CMDC.Tool.MCP.Config`.
  """

  alias CMDC.Tool.MCP.Client.Limits

  @type t :: term()
  @type event ::
          {:messages, [map()], t()}
          | {:ok, t()}
          | {:failed, term(), String.t(), t()}
          | {:lost, String.t(), t()}
          | {:closed, String.t(), t()}
          | {:refused, String.t(), t()}
          | :unknown

  @doc "Prepares the connection (starts a program, checks a URL). Nothing is sent yet."
  @callback connect(spec :: map(), server :: String.t(), limits :: Limits.t()) ::
              {:ok, t()} | {:error, String.t()}

  @doc "Sends one JSON-RPC message (a map)."
  @callback send_message(t(), map()) :: {:ok, t()} | {:error, String.t()}

  @doc "Turns a message of the client process into an event (see the module doc)."
  @callback handle_info(term(), t()) :: event()

  @doc "The handshake is done: `era` is `:modern` or `:legacy`, `version` the protocol version."
  @callback ready(t(), era :: :modern | :legacy, version :: String.t()) :: t()

  @doc "Request `id` ended early: free what the transport holds for it (an open stream)."
  @callback cancel(t(), id :: term()) :: t()

  @doc "Closes the connection (stops the program, ends the session)."
  @callback close(t()) :: :ok

  @doc "What a failure message adds about this transport (the server's last words)."
  @callback diagnosis(t()) :: String.t()
end
