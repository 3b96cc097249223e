defmodule CMDC.Tool.MCP.Client.Limits do
  @moduledoc """
  What one MCP server may send a `CMDC.Tool.MCP.Client`, and how long it may take. Going over
  a limit is an error for that server only (its request fails, or its listing is refused, with a
  message naming the limit), never a VM abort or stall.

  | limit | default | what it bounds |
  |---|---|---|
  | `max_tools` | 5_000 | tools one server may list |
  | `max_total_tools` | 20_000 | remote tools of every server together (each holds one tool module) |
  | `max_name_bytes` | 256 | a tool name as the server sends it |
  | `max_schema_bytes` | 1_048_576 | one tool's `inputSchema` (external term size) |
  | `max_schema_depth` | 64 | nesting of one tool's `inputSchema` |
  | `max_response_bytes` | 16_777_216 | one message: a stdout line, an HTTP body, an SSE event (the body of an HTTP error status is read only up to 64 kB, whatever this limit) |
  | `max_pages` | 100 | pages of one `tools/list` (an endless `nextCursor` stops there) |
  | `max_relists_per_minute` | 6 | `tools/list` re-reads on `list_changed` (more are deferred) |
  | `request_timeout` | 30_000 | ms for a request the client makes itself (`tools/list`, the probe) |
  | `http_connections` | 8 | HTTP requests holding a connection to the server at once, and kept-alive idle connections (more requests wait their turn; the session's one long-lived stream, a legacy `GET` or `subscriptions/listen`, is not counted) |
  | `http_idle_ms` | 30_000 | how long a kept-alive HTTP connection waits idle for the next request before it is closed |
  | `stdio_window` | 64 | a stdio server's lines (stdout and stderr) waiting for the client: past it the server blocks on its full stdout pipe, stderr lines are dropped and counted |
  | `stdio_window_bytes` | 8_388_608 | the bytes of those lines (one longer line passes alone) |
  | `stderr_lines_per_second` | 20 | stderr lines logged (the rest are counted, then summarized) |
  | `max_restarts` / `restart_window` | 10 / 60_000 | failures within the window before the server is marked `:failed` (backoff doubling from 0.2 s keeps an unreachable server under it; a server that crashes right after each start is not) |

  A flood costs no limit: stdio output flows under the credit window (the server waits for the
  client), HTTP bodies are bounded in the native client and SSE events flow under a credit
  window of four (the server waits in its socket buffers; an error status's body is read only up
  to 64 kB), so the client's mailbox stays bounded and a chatty server is never stopped for
  talking.

  Set them per client (`limits:` option of `CMDC.Tool.MCP.Client.start_link/1`) or for every
  client (`config :cmdc_tool, :mcp_limits, max_tools: 5_000`); the option wins.

      iex> limits = CMDC.Tool.MCP.Client.Limits.new(max_tools: 10)
      iex> {limits.max_tools, limits.max_pages}
      {10, 100}
  """

  defstruct max_tools: 5_000,
            max_total_tools: 20_000,
            max_name_bytes: 256,
            max_schema_bytes: 1_048_576,
            max_schema_depth: 64,
            max_response_bytes: 16_777_216,
            max_pages: 100,
            max_relists_per_minute: 6,
            request_timeout: 30_000,
            http_connections: 8,
            http_idle_ms: 30_000,
            stdio_window: 64,
            stdio_window_bytes: 8_388_608,
            stderr_lines_per_second: 20,
            max_restarts: 10,
            restart_window: 60_000

  @type t :: %__MODULE__{}

  @doc """
  The limits: `overrides` (a keyword list or map) over the application's `:mcp_limits` over the
  defaults. An unknown key or a value that is not a positive integer raises `ArgumentError`.
  """
  @spec new(keyword() | map() | nil) :: t()
  def new(overrides \\ []) do
    app = Application.get_env(:cmdc_tool, :mcp_limits, [])

    Enum.reduce(Enum.to_list(app) ++ Enum.to_list(overrides || []), %__MODULE__{}, &put/2)
  end

  defp put({key, value}, limits) when is_integer(value) and value > 0 do
    if Map.has_key?(limits, key) and key != :__struct__,
      do: Map.put(limits, key, value),
      else: raise(ArgumentError, "unknown MCP client limit #{inspect(key)}")
  end

  defp put({key, value}, _limits),
    do:
      raise(
        ArgumentError,
        "MCP client limit #{inspect(key)} must be a positive integer, got #{inspect(value)}"
      )
end
