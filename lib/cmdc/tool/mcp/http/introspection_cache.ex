defmodule CMDC.Tool.MCP.HTTP.IntrospectionCache do
  @moduledoc """
  RFC 7662 introspection answers kept by `CMDC.Tool.MCP.HTTP.Auth`, so that a client sending
  the same token with every request costs the authorization server one introspection, not
  one per request.

    * Keyed by the SHA-256 of the token: the token itself is never stored.
    * Only **active** answers are kept, until the token's `exp` or `:cache_ms` (60 s by
      default) from now, whichever comes first; the claims are checked again on every use
      (`exp`, audience), so a cached token still expires on time. The price: a token revoked
      at the authorization server keeps working here for up to `:cache_ms` (`cache_ms: 0`
      turns the cache off).
    * **Inactive** answers, errors and unreachable servers are not kept: a flood of made-up
      tokens would defeat a negative cache anyway (each one is new), and a token issued a
      moment ago is never refused on an earlier answer.
    * Bounded: at most `:cache_size` entries (10,000); when full, expired entries go first,
      then the tenth that would expire soonest.

  The table is public (the request processes write to it) and owned by the server's process:
  it goes with the server.
  """

  @type clock :: (() -> integer())
  @type t :: %{
          table: :ets.tid(),
          ttl_ms: non_neg_integer(),
          size: pos_integer(),
          clock: clock()
        }

  @doc """
  A new cache (an ETS table owned by the calling process). `clock` returns the Unix time in
  ms (the system's by default; a test passes its own, so it never sleeps).

      iex> cache = CMDC.Tool.MCP.HTTP.IntrospectionCache.new(1_000, 10, fn -> 5_000 end)
      iex> CMDC.Tool.MCP.HTTP.IntrospectionCache.put(cache, "t", %{"active" => true})
      iex> CMDC.Tool.MCP.HTTP.IntrospectionCache.fetch(cache, "t")
      {:ok, %{"active" => true}}
  """
  @spec new(non_neg_integer(), pos_integer(), clock()) :: t()
  def new(ttl_ms \\ 60_000, size \\ 10_000, clock \\ &system_ms/0) do
    table = :ets.new(__MODULE__, [:set, :public, read_concurrency: true, write_concurrency: true])
    %{table: table, ttl_ms: ttl_ms, size: size, clock: clock}
  end

  defp system_ms, do: System.system_time(:millisecond)

  @doc "The claims kept for this token, or `:miss`."
  @spec fetch(t(), binary()) :: {:ok, map()} | :miss
  def fetch(%{ttl_ms: 0}, _token), do: :miss

  def fetch(cache, token) do
    key = key(token)

    case :ets.lookup(cache.table, key) do
      [{^key, claims, until}] ->
        if until > cache.clock.(), do: {:ok, claims}, else: expire(cache, key)

      [] ->
        :miss
    end
  end

  @doc "Keeps an introspection answer when it says the token is active (see the moduledoc)."
  @spec put(t(), binary(), map()) :: :ok
  def put(%{ttl_ms: 0}, _token, _claims), do: :ok

  def put(cache, token, %{"active" => true} = claims) do
    now = cache.clock.()
    until = min(now + cache.ttl_ms, expiry(claims))

    if until > now do
      if :ets.info(cache.table, :size) >= cache.size, do: make_room(cache)
      :ets.insert(cache.table, {key(token), claims, until})
    end

    :ok
  end

  def put(_cache, _token, _claims), do: :ok

  @doc "How many answers are kept."
  @spec size(t()) :: non_neg_integer()
  def size(cache), do: :ets.info(cache.table, :size)

  defp key(token), do: :crypto.hash(:sha256, token)

  defp expiry(%{"exp" => exp}) when is_integer(exp), do: exp * 1000
  # No `exp`: the TTL alone bounds it (a number is below any atom in term order).
  defp expiry(_claims), do: :infinity

  defp expire(cache, key) do
    :ets.delete(cache.table, key)
    :miss
  end

  defp make_room(cache) do
    :ets.select_delete(cache.table, [{{:_, :_, :"$1"}, [{:"=<", :"$1", cache.clock.()}], [true]}])

    if :ets.info(cache.table, :size) >= cache.size do
      cache.table
      |> :ets.select([{{:"$1", :_, :"$2"}, [], [{{:"$2", :"$1"}}]}])
      |> Enum.sort()
      |> Enum.take(max(div(cache.size, 10), 1))
      |> Enum.each(fn {_, key} -> :ets.delete(cache.table, key) end)
    end
  end
end
