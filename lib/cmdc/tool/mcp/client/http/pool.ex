defmodule CMDC.Tool.MCP.Client.HTTP.Pool do
  @moduledoc """
  The idle kept-alive connections of one `CMDC.Tool.MCP.Client.HTTP` transport, per
  (scheme, host, port): plain data owned by the client process, like the transport.

  A connection comes back here only when its answer was read to its end and both sides kept
  it alive (`CMDC.Tool.MCP.Client.HTTP.Conn.reusable?/1`); an event stream, an answer cut
  short, a timed-out or cancelled request's connection is closed instead. At most `max_idle`
  connections wait per origin (a surplus one is closed), each for at most `idle_ms`
  (`{:cmdc_mcp_http, :idle, socket, stamp}` closes it then). An idle connection reads in
  `active: :once`, so a server closing it (or writing to it) is seen at once and the
  connection dropped (`idle_message/2`); one it closed in the instant before it was taken is
  the transport's to retry. `close_all/1` closes every idle connection (the client stops).

      iex> pool = CMDC.Tool.MCP.Client.HTTP.Pool.new(4, 30_000)
      iex> CMDC.Tool.MCP.Client.HTTP.Pool.checkout(pool, {"http", "127.0.0.1", 80})
      {nil, pool}
      iex> CMDC.Tool.MCP.Client.HTTP.Pool.key(URI.parse("https://mcp.example/mcp"))
      {"https", "mcp.example", 443}
  """

  alias CMDC.Tool.MCP.Client.HTTP.Conn

  defstruct max_idle: 8, idle_ms: 30_000, idle: %{}, sockets: %{}

  @type key :: {String.t(), String.t(), :inet.port_number()}
  @type t :: %__MODULE__{
          max_idle: non_neg_integer(),
          idle_ms: pos_integer(),
          idle: %{key() => [{Conn.t(), reference()}]},
          sockets: %{term() => {key(), reference()}}
        }

  @doc "An empty pool keeping at most `max_idle` connections per origin, `idle_ms` each."
  @spec new(non_neg_integer(), pos_integer()) :: t()
  def new(max_idle, idle_ms), do: %__MODULE__{max_idle: max_idle, idle_ms: idle_ms}

  @doc "The origin a URI's connections are kept under."
  @spec key(URI.t()) :: key()
  def key(%URI{scheme: scheme, host: host, port: port}), do: {scheme, host, port}

  @doc "How many connections are idle (every origin)."
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{sockets: sockets}), do: map_size(sockets)

  @doc """
  The most recently used idle connection of `key`, made passive (its reads no longer arrive
  as messages), or `nil`. One whose server closed it or wrote to it meanwhile is closed and the
  next one tried.
  """
  @spec checkout(t(), key()) :: {Conn.t() | nil, t()}
  def checkout(%__MODULE__{} = pool, key) do
    case Map.get(pool.idle, key, []) do
      [] ->
        {nil, pool}

      [{conn, _stamp} | rest] ->
        pool = %{pool | idle: put_list(pool.idle, key, rest)}
        pool = %{pool | sockets: Map.delete(pool.sockets, conn.socket)}

        if Conn.passive(conn) == :ok and not stale?(conn),
          do: {conn, pool},
          else: checkout(close_conn(pool, conn), key)
    end
  end

  # Reads are stopped now; a message the socket sent before that is still in the mailbox.
  defp stale?(%Conn{socket: socket}) do
    receive do
      {tag, ^socket} when tag in [:tcp_closed, :ssl_closed] -> true
      {tag, ^socket, _} when tag in [:tcp, :ssl, :tcp_error, :ssl_error] -> true
    after
      0 -> false
    end
  end

  defp close_conn(pool, conn) do
    Conn.close(conn)
    pool
  end

  @doc """
  Keeps `conn` (its answer read to the end) for the next request to `key`, or closes it when
  `key` already has `max_idle` waiting.
  """
  @spec checkin(t(), key(), Conn.t()) :: t()
  def checkin(%__MODULE__{} = pool, key, %Conn{} = conn) do
    list = Map.get(pool.idle, key, [])

    if length(list) >= pool.max_idle or Conn.next(conn) != :ok do
      close_conn(pool, conn)
    else
      stamp = make_ref()
      Process.send_after(self(), {:cmdc_mcp_http, :idle, conn.socket, stamp}, pool.idle_ms)
      fresh = %Conn{socket: conn.socket, mod: conn.mod}

      %{
        pool
        | idle: Map.put(pool.idle, key, [{fresh, stamp} | list]),
          sockets: Map.put(pool.sockets, conn.socket, {key, stamp})
      }
    end
  end

  @doc "Whether `socket` is one of the idle connections."
  @spec idle?(t(), term()) :: boolean()
  def idle?(%__MODULE__{sockets: sockets}, socket), do: is_map_key(sockets, socket)

  @doc """
  A socket message for an idle connection (the server closed it, or sent what nobody asked
  for): the connection is closed and forgotten.
  """
  @spec idle_message(t(), term()) :: t()
  def idle_message(%__MODULE__{} = pool, socket), do: remove(pool, socket, nil)

  @doc "The idle timer of `socket` fired: closed, unless it was taken and kept again since."
  @spec expire(t(), term(), reference()) :: t()
  def expire(%__MODULE__{} = pool, socket, stamp), do: remove(pool, socket, stamp)

  defp remove(pool, socket, stamp) do
    case pool.sockets[socket] do
      {key, held} when stamp in [nil, held] ->
        {[{conn, _}], rest} = Enum.split_with(pool.idle[key], fn {c, _} -> c.socket == socket end)
        Conn.close(conn)

        %{
          pool
          | idle: put_list(pool.idle, key, rest),
            sockets: Map.delete(pool.sockets, socket)
        }

      _ ->
        pool
    end
  end

  defp put_list(idle, key, []), do: Map.delete(idle, key)
  defp put_list(idle, key, list), do: Map.put(idle, key, list)

  @doc "Closes every idle connection."
  @spec close_all(t()) :: t()
  def close_all(%__MODULE__{} = pool) do
    for {_key, list} <- pool.idle, {conn, _} <- list, do: Conn.close(conn)
    %{pool | idle: %{}, sockets: %{}}
  end
end
