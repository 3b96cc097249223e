defmodule CMDC.Tool.MCP.HTTP.Limits do
  @moduledoc """
  What `CMDC.Tool.MCP.HTTP` accepts, and for how long: every limit of the server and its
  default, in one place (`docs/SECURITY.md` explains each). Going over one is an answer for
  that request or connection only (a JSON-RPC error with its HTTP status, or the connection
  closed), never a stop of the server.

  | limit | default | what it bounds |
  |---|---|---|
  | `max_body` | 4_194_304 | a request body (413; a `Content-Length` over it is refused on the head) |
  | `header_timeout_ms` | 30_000 | reading a request's head, counted from the previous answer on a kept-alive connection (so also the idle time-out): the connection is closed |
  | `body_timeout_ms` | 30_000 | reading a body, counted from its head (408) |
  | `max_header_bytes` | 16_384 | a request's head (431) |
  | `max_connections` | 4_096 | connections served at once (more wait in the listen backlog) |
  | `stream_soft_bytes` | 262_144 | unsent bytes of one SSE stream past which progress notifications are dropped |
  | `stream_hard_bytes` | 1_048_576 | unsent bytes of one SSE stream past which it is closed and its call cancelled |
  | `max_sessions` | 10_000 | 2025-era sessions (past it, the least recently used idle one is evicted) |
  | `max_sessions_per_principal` | 100 | sessions of one principal: a token's subject, or the client's address without OAuth (past it, that principal's least recently used idle session is evicted) |
  | `session_idle_ms` | 600_000 | a session unused that long is gone (404: the client initializes again) |

  The options of the same names of `CMDC.Tool.MCP.HTTP.start_link/1` set them
  (`:idle_timeout_ms` is the older name of `:header_timeout_ms`).

      iex> limits = CMDC.Tool.MCP.HTTP.Limits.new(max_body: 1024)
      iex> {limits.max_body, limits.session_idle_ms}
      {1024, 600000}
  """

  defstruct max_body: 4 * 1024 * 1024,
            header_timeout_ms: 30_000,
            body_timeout_ms: 30_000,
            max_header_bytes: 16 * 1024,
            max_connections: 4_096,
            stream_soft_bytes: 256 * 1024,
            stream_hard_bytes: 1024 * 1024,
            max_sessions: 10_000,
            max_sessions_per_principal: 100,
            session_idle_ms: 600_000

  @type t :: %__MODULE__{}

  @doc "The limit names, as `CMDC.Tool.MCP.HTTP.start_link/1` takes them."
  @spec keys() :: [atom()]
  def keys, do: %__MODULE__{} |> Map.from_struct() |> Map.keys()

  @doc """
  The limits: the defaults with `opts` over them (other keys are ignored: the caller checks
  option names). `:idle_timeout_ms` sets `header_timeout_ms`, and `body_timeout_ms` unless
  given. A value that is not a positive integer raises `ArgumentError`.
  """
  @spec new(keyword()) :: t()
  def new(opts \\ []) do
    idle = Keyword.get(opts, :idle_timeout_ms)

    implied =
      if idle,
        do: [header_timeout_ms: idle, body_timeout_ms: Keyword.get(opts, :body_timeout_ms, idle)],
        else: []

    opts
    |> Keyword.take(keys())
    |> then(&Keyword.merge(implied, &1))
    |> Enum.reduce(%__MODULE__{}, &put/2)
  end

  defp put({key, value}, limits) when is_integer(value) and value > 0,
    do: Map.put(limits, key, value)

  defp put({key, value}, _limits),
    do:
      raise(
        ArgumentError,
        "MCP HTTP server limit #{inspect(key)} must be a positive integer, got #{inspect(value)}"
      )
end
