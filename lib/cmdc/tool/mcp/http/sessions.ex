defmodule CMDC.Tool.MCP.HTTP.Sessions do
  @moduledoc """
  The 2025-era sessions of `CMDC.Tool.MCP.HTTP` (`initialize` mints an `Mcp-Session-Id`), in
  two ETS tables the server owns and its request processes read:

    * each session belongs to the **principal** that opened it (a token's subject under OAuth,
      else the client's address): the same id from another principal is unknown (404), so a
      leaked or guessed id is useless elsewhere;
    * a principal holds at most `max_sessions_per_principal`, the server `max_sessions`; a new
      session past either bound **evicts the least recently used idle session** (of that
      principal, or of all) rather than refusing the newcomer, so a client opening sessions in
      a loop only ever evicts its own once at its quota. A session with a call or stream in
      flight is not idle; only when no idle one is found among the oldest is the newcomer
      refused (503);
    * a session unused for `session_idle_ms` is gone (404, the client initializes again),
      whether or not a sweep has removed it yet.

  Time is the caller's `now` (milliseconds, monotonic): the server passes its clock, tests a
  number of their own, so nothing waits for a sweep.
  """

  alias CMDC.Tool.MCP.HTTP.Limits

  @enforce_keys [:table, :lru]
  defstruct [:table, :lru]

  @typedoc "The two tables: sessions and busy counters (`:set`), recency (`:ordered_set`)."
  @type t :: %__MODULE__{table: :ets.tid(), lru: :ets.tid()}
  @type principal :: String.t()

  # The oldest sessions looked at for an idle one to evict.
  @scan 64

  @doc "New, empty tables owned by the caller."
  @spec new() :: t()
  def new do
    %__MODULE__{
      table:
        :ets.new(__MODULE__, [:set, :public, read_concurrency: true, write_concurrency: true]),
      lru: :ets.new(__MODULE__, [:ordered_set, :public, write_concurrency: true])
    }
  end

  @doc """
  Opens a session for `principal` holding `state`: `{:ok, id}`, evicting the least recently
  used idle session when a bound is reached, or `{:error, :full}` when every session near the
  bound is busy. Call it from one process (the server), so bounds are not raced.
  """
  @spec open(t(), principal(), term(), Limits.t(), integer()) ::
          {:ok, String.t()} | {:error, :full}
  def open(sessions, principal, state, %Limits{} = limits, now) do
    with :ok <- room(sessions, {:by, principal}, limits.max_sessions_per_principal),
         :ok <- room(sessions, :all, limits.max_sessions) do
      id = Base.url_encode64(:crypto.strong_rand_bytes(18), padding: false)
      touched = stamp(now)
      :ets.insert(sessions.table, {id, %{state: state, principal: principal, touched: touched}})
      index(sessions, id, principal, touched)
      {:ok, id}
    end
  end

  @doc """
  The session `id` of `principal`, touched: `{:ok, state}`, or `:error` when it does not exist
  for that principal (never opened, ended, idle too long, or another principal's).
  """
  @spec fetch(t(), String.t(), principal(), Limits.t(), integer()) :: {:ok, term()} | :error
  def fetch(sessions, id, principal, %Limits{} = limits, now) do
    case :ets.lookup(sessions.table, id) do
      [{^id, %{principal: ^principal} = entry}] ->
        if expired?(entry, limits, now) do
          remove(sessions, id, entry)
          :error
        else
          touch(sessions, id, entry, now)
          {:ok, entry.state}
        end

      _ ->
        :error
    end
  end

  @doc "Stores a session's new state (after a request changed it); `:error` if it is gone."
  @spec put(t(), String.t(), term(), integer()) :: :ok | :error
  def put(sessions, id, state, now) do
    case :ets.lookup(sessions.table, id) do
      [{^id, entry}] -> touch(sessions, id, %{entry | state: state}, now)
      [] -> :error
    end
  end

  @doc "Ends the session `id` of `principal`: `:ok`, or `:error` when it is not theirs."
  @spec delete(t(), String.t(), principal()) :: :ok | :error
  def delete(sessions, id, principal) do
    case :ets.lookup(sessions.table, id) do
      [{^id, %{principal: ^principal} = entry}] -> remove(sessions, id, entry)
      _ -> :error
    end
  end

  @doc "Whether session `id` exists for `principal` and is not idle too long (not touched)."
  @spec member?(t(), String.t(), principal(), Limits.t(), integer()) :: boolean()
  def member?(sessions, id, principal, limits, now) do
    case :ets.lookup(sessions.table, id) do
      [{^id, %{principal: ^principal} = entry}] -> not expired?(entry, limits, now)
      _ -> false
    end
  end

  @doc """
  Marks a call or stream in flight on session `id` (`+1`) or ended (`-1`): a busy session is
  never evicted for a newcomer.
  """
  @spec busy(t(), String.t(), 1 | -1) :: :ok
  def busy(sessions, id, delta) do
    :ets.update_counter(sessions.table, {:busy, id}, delta, {{:busy, id}, 0})

    if delta < 0,
      do:
        :ets.select_delete(sessions.table, [{{{:busy, id}, :"$1"}, [{:"=<", :"$1", 0}], [true]}])

    :ok
  end

  @doc "Removes the sessions unused for `session_idle_ms` before `now`; returns how many."
  @spec sweep(t(), Limits.t(), integer()) :: non_neg_integer()
  def sweep(sessions, %Limits{} = limits, now), do: sweep(sessions, limits, now, 0)

  defp sweep(sessions, limits, now, count) do
    case :ets.first(sessions.lru) do
      {:all, {ms, _}, id} = key when ms + limits.session_idle_ms <= now ->
        case :ets.lookup(sessions.table, id) do
          [{^id, entry}] -> remove(sessions, id, entry)
          [] -> :ets.delete(sessions.lru, key)
        end

        :ets.delete(sessions.lru, key)
        sweep(sessions, limits, now, count + 1)

      _ ->
        count
    end
  end

  @doc "How many sessions are open (in total, or of one principal)."
  @spec count(t(), principal() | :all) :: non_neg_integer()
  def count(sessions, :all), do: :ets.select_count(sessions.lru, [{{{:all, :_, :_}}, [], [true]}])

  def count(sessions, principal),
    do: :ets.select_count(sessions.lru, [{{{:by, principal, :_, :_}}, [], [true]}])

  # --- bounds and recency ---------------------------------------------------------------------

  defp room(sessions, scope, max) do
    if count(sessions, scope(scope)) < max, do: :ok, else: evict(sessions, scope)
  end

  defp scope(:all), do: :all
  defp scope({:by, principal}), do: principal

  # The least recently used idle session of the scope goes; stale recency keys (a session
  # touched twice at once leaves its older key) are dropped on the way.
  defp evict(sessions, scope) do
    start = if scope == :all, do: {:all, -1, nil}, else: {:by, elem(scope, 1), -1, nil}
    evict(sessions, scope, :ets.next(sessions.lru, start), @scan)
  end

  defp evict(_sessions, _scope, _key, 0), do: {:error, :full}

  defp evict(sessions, scope, key, left) do
    case in_scope(key, scope) do
      nil ->
        {:error, :full}

      {touched, id} ->
        next = :ets.next(sessions.lru, key)

        case :ets.lookup(sessions.table, id) do
          [{^id, %{touched: ^touched} = entry}] ->
            if busy?(sessions, id),
              do: evict(sessions, scope, next, left - 1),
              else: remove(sessions, id, entry)

          _ ->
            :ets.delete(sessions.lru, key)
            evict(sessions, scope, next, left)
        end
    end
  end

  defp in_scope({:all, touched, id}, :all), do: {touched, id}
  defp in_scope({:by, p, touched, id}, {:by, p}), do: {touched, id}
  defp in_scope(_key, _scope), do: nil

  defp busy?(sessions, id) do
    case :ets.lookup(sessions.table, {:busy, id}) do
      [{_, n}] -> n > 0
      [] -> false
    end
  end

  defp expired?(%{touched: {ms, _}}, limits, now), do: ms + limits.session_idle_ms <= now

  defp stamp(now), do: {now, System.unique_integer([:monotonic])}

  defp touch(sessions, id, entry, now) do
    touched = stamp(now)
    unindex(sessions, id, entry)
    :ets.insert(sessions.table, {id, %{entry | touched: touched}})
    index(sessions, id, entry.principal, touched)
    :ok
  end

  defp remove(sessions, id, entry) do
    :ets.delete(sessions.table, id)
    unindex(sessions, id, entry)
    :ok
  end

  defp index(sessions, id, principal, touched) do
    :ets.insert(sessions.lru, [{{:all, touched, id}}, {{:by, principal, touched, id}}])
  end

  defp unindex(sessions, id, %{principal: principal, touched: touched}) do
    :ets.delete(sessions.lru, {:all, touched, id})
    :ets.delete(sessions.lru, {:by, principal, touched, id})
  end
end
