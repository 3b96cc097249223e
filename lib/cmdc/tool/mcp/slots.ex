defmodule CMDC.Tool.MCP.Slots do
  @moduledoc """
  The tool modules remote MCP tools live in: a pool of *slots*, each a copy of the script-tool
  template (`CMDC.Tool.Script.Gen`) whose data sits in one ETS table, not in the module.

  Why a pool: a module per remote tool, named after the tool, costs an atom and eleven exports
  that are never freed (40,000 tools overflowed the VM's export table) and a code purge per
  module to remove (2,000 tools took 11 s to stop). A slot holds a tool while its server lists
  it and goes back to the pool when the tool goes away: stopping a client deletes ETS rows and
  the slots' stored validators and returns, purging nothing.

  Leaving nothing behind: the pool keeps a few free slots loaded (the *warm* pool, 64 by
  default, `config :cmdc_tool, :mcp_warm_slots`); the pool's own process deletes and purges
  the others once they have been free for 30 s (`:mcp_slot_linger_ms`: a server relisting
  within that time, even one relisting as fast as `max_relists_per_minute` lets it, reuses
  loaded slots and costs no purge), four per message, so a stop or a request for slots
  arriving meanwhile waits for four purges at most. A purged slot's name is reused (lowest
  first) before a new one is made: the names, the only atoms slots cost, never outnumber the most remote tools held at
  once, which `max_total_tools` bounds (`CMDC.Tool.MCP.Client.Limits`), and a second start
  and stop of the same servers adds none.

  Slots are held by the process that asked for them (a client): when it ends, however it
  ends (even killed, when its `terminate/2` never runs), its slots are freed.

  A freed slot keeps no data (calling it says the tool is gone, or raises
  `UndefinedFunctionError` once purged); loaded slots are reused oldest-freed first, so a
  module kept past its tool's removal is unlikely to name another tool soon. Look tools up by
  name (`CMDC.Tool.Registry`, `CMDC.Tool.MCP.Client.tools/1`) rather than keeping modules of
  remote tools.
  """

  use GenServer

  alias CMDC.Tool.Native
  alias CMDC.Tool.Script.Gen

  @table __MODULE__
  # Slot modules made per code-loading commit: one commit waits for every scheduler, so a
  # batch keeps the number of commits low without one long stop of the world.
  @batch 500
  # Slot modules deleted and purged per message: each delete and purge waits for a code
  # barrier (2-4 ms quiet, 25 ms seen under load), so a stop or a request for slots arriving
  # during a trim waits for 4 of them at most.
  @trim_batch 4
  # A slot whose old code some process still runs is purged again this much later.
  @retry_ms 1_000
  @prefix "Elixir.CMDC.Tool.MCP.Tools.Slot"

  @doc false
  def start_link(_opts \\ []), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @doc false
  def child_spec(opts),
    do: %{id: __MODULE__, start: {__MODULE__, :start_link, [opts]}}

  @doc """
  Puts each `data` in a slot: the given one (a slot the caller holds already) or a free one.
  `{:ok, modules}` in the order given, or `{:error, message}` when more than `max_total` slots
  would be in use.
  """
  @spec assign([{module() | nil, map()}], pos_integer(), owner :: module()) ::
          {:ok, [module()]} | {:error, String.t()}
  def assign(pairs, max_total, owner) do
    GenServer.call(ensure_started(), {:assign, pairs, max_total, owner}, :infinity)
  end

  @doc "Frees slots: their data is deleted and they go back to the pool."
  @spec release([module()]) :: :ok
  def release([]), do: :ok
  def release(modules), do: GenServer.call(ensure_started(), {:release, modules}, :infinity)

  @doc "The data in a slot, or `nil` (a free slot or not a slot)."
  @spec lookup(module()) :: map() | nil
  def lookup(module) do
    case :ets.lookup(@table, module) do
      [{_, data}] -> data
      [] -> nil
    end
  rescue
    ArgumentError -> nil
  end

  @doc """
  `%{in_use, loaded, made, warm}`: slots holding a tool, slot modules loaded now (in use, free
  and not yet purged), slot names ever made (atoms), and how many free slots stay loaded.
  """
  @spec stats() :: %{
          in_use: non_neg_integer(),
          loaded: non_neg_integer(),
          made: non_neg_integer(),
          warm: non_neg_integer()
        }
  def stats, do: GenServer.call(ensure_started(), :stats)

  @doc """
  Waits until the free slots beyond the warm pool are purged (tests, benchmarks). A slot whose
  old code a process still runs (a call hung in it) is retried every second, not waited for.
  """
  @spec settle(timeout()) :: :ok | :timeout
  def settle(timeout \\ 60_000) do
    deadline = System.monotonic_time(:millisecond) + timeout
    settle_until(deadline)
  end

  defp settle_until(deadline) do
    cond do
      GenServer.call(ensure_started(), :settled?) -> :ok
      System.monotonic_time(:millisecond) > deadline -> :timeout
      true -> Process.sleep(20) && settle_until(deadline)
    end
  end

  # The pool outlives every client: under the library's supervisor, started on first use.
  defp ensure_started do
    case Process.whereis(__MODULE__) do
      nil ->
        case Supervisor.start_child(CMDC.Tool.Supervisor, child_spec([])) do
          {:ok, pid} -> pid
          {:error, {:already_started, pid}} -> pid
          {:error, :already_present} -> restart()
        end

      pid ->
        pid
    end
  end

  defp restart do
    case Supervisor.restart_child(CMDC.Tool.Supervisor, __MODULE__) do
      {:ok, pid} -> pid
      {:error, :running} -> Process.whereis(__MODULE__)
    end
  end

  @impl true
  def init(_) do
    :ets.new(@table, [:named_table, :protected, :set, read_concurrency: true])
    # After a restart the slots loaded by the previous process hold no data (the table went
    # with it): free, to be reused or purged, and new names start above them.
    left = for {module, _} <- :code.all_loaded(), slot?(module), do: module
    made = Enum.reduce(left, 0, &max(index(&1) + 1, &2))
    if left != [], do: send(self(), :trim)

    {:ok,
     %{
       # loaded free slots, oldest-freed first
       free: :queue.from_list(Enum.map(left, &{&1, now() - linger()})),
       # names whose modules are purged: reused lowest first
       unloaded: :gb_sets.new(),
       # deleted, but some process still ran their old code: purged again later
       purging: [],
       made: made,
       in_use: 0,
       holders: %{},
       trimming: left != []
     }}
  end

  @impl true
  def handle_call({:assign, pairs, max_total, owner}, {pid, _}, state) do
    fresh = Enum.count(pairs, fn {slot, _} -> slot == nil or not held?(slot) end)

    if state.in_use + fresh > max_total do
      {:reply,
       {:error,
        "#{state.in_use + fresh} remote tools would be held, over max_total_tools " <>
          "(#{max_total}); #{state.in_use} are held by running servers"}, state}
    else
      {modules, state} = take(pairs, owner, state)
      :ets.insert(@table, Enum.zip(modules, Enum.map(pairs, &elem(&1, 1))))
      state = hold(%{state | in_use: state.in_use + fresh}, pid, modules)
      {:reply, {:ok, modules}, state}
    end
  end

  def handle_call({:release, modules}, {pid, _}, state),
    do: {:reply, :ok, free(state, pid, modules)}

  def handle_call(:stats, _from, state) do
    loaded = state.made - :gb_sets.size(state.unloaded)
    {:reply, %{in_use: state.in_use, loaded: loaded, made: state.made, warm: warm()}, state}
  end

  def handle_call(:settled?, _from, state),
    do: {:reply, :queue.len(state.free) <= warm(), state}

  @impl true
  def handle_info({:DOWN, _, :process, pid, _}, state) do
    case state.holders do
      %{^pid => {_mon, modules}} -> {:noreply, free(state, pid, MapSet.to_list(modules))}
      _ -> {:noreply, state}
    end
  end

  def handle_info(:trim, state), do: {:noreply, trim(%{state | trimming: false})}
  def handle_info(:retry, state), do: {:noreply, retry_purges(state)}
  def handle_info(_msg, state), do: {:noreply, state}

  defp hold(state, pid, modules) do
    {mon, held} = Map.get_lazy(state.holders, pid, fn -> {Process.monitor(pid), MapSet.new()} end)

    %{
      state
      | holders: Map.put(state.holders, pid, {mon, MapSet.union(held, MapSet.new(modules))})
    }
  end

  defp free(state, pid, modules) do
    held = Enum.filter(Enum.uniq(modules), &held?/1)
    Enum.each(held, &:ets.delete(@table, &1))
    if held != [], do: Native.module_schema_drop(held)
    now = now()
    free = Enum.reduce(held, state.free, &:queue.in({&1, now}, &2))
    state = schedule_trim(%{state | free: free, in_use: state.in_use - length(held)})

    case state.holders do
      %{^pid => {mon, mine}} ->
        left = MapSet.difference(mine, MapSet.new(held))

        if MapSet.size(left) == 0 do
          Process.demonitor(mon, [:flush])
          %{state | holders: Map.delete(state.holders, pid)}
        else
          %{state | holders: Map.put(state.holders, pid, {mon, left})}
        end

      _ ->
        state
    end
  end

  defp held?(slot), do: :ets.member(@table, slot)

  # --- leaving nothing behind: free slots beyond the warm pool are deleted and purged ------

  # A message to this process, so the trim runs after the caller's reply (a stop never waits
  # for it) and requests for slots queued meanwhile are served between batches. A slot is
  # purged once free for `linger` ms: a server that relists in a burst reuses loaded slots.
  defp schedule_trim(%{trimming: true} = state), do: state

  defp schedule_trim(state) do
    if :queue.len(state.free) > warm() do
      {:value, {_slot, freed}} = :queue.peek(state.free)
      Process.send_after(self(), :trim, max(freed + linger() - now(), 0))
      %{state | trimming: true}
    else
      state
    end
  end

  defp trim(state) do
    {doomed, state} = doomed(state, @trim_batch, now() - linger())
    state = Enum.reduce(doomed, state, &unload/2)
    schedule_trim(state)
  end

  # Up to `n` free slots beyond the warm pool, oldest-freed first, freed before `cutoff`.
  defp doomed(state, n, cutoff) do
    with true <- n > 0 and :queue.len(state.free) > warm(),
         {{:value, {slot, freed}}, rest} when freed <= cutoff <- :queue.out(state.free) do
      {more, state} = doomed(%{state | free: rest}, n - 1, cutoff)
      {[slot | more], state}
    else
      _ -> {[], state}
    end
  end

  defp now, do: System.monotonic_time(:millisecond)

  # Read at each use, so a change (tests, benchmarks) applies at once.
  defp warm, do: Application.get_env(:cmdc_tool, :mcp_warm_slots, 64)
  defp linger, do: Application.get_env(:cmdc_tool, :mcp_slot_linger_ms, 30_000)

  # Old code (none is expected) would make the delete fail: purged first. The name is free for
  # reuse only once nothing of the module is left.
  defp unload(slot, state) do
    if :erlang.check_old_code(slot), do: :code.soft_purge(slot)
    :code.delete(slot)
    purged(slot, :code.soft_purge(slot) and not :erlang.module_loaded(slot), state)
  end

  # Slots whose old code a process still ran are tried again on their own timer: one that
  # stays in use (a call hung in it) must not hold up the purge of every other slot.
  defp retry_purges(state), do: Enum.reduce(state.purging, %{state | purging: []}, &unload/2)

  defp purged(slot, true, state),
    do: %{state | unloaded: :gb_sets.add(index(slot), state.unloaded)}

  defp purged(slot, false, state) do
    if state.purging == [], do: Process.send_after(self(), :retry, @retry_ms)
    %{state | purging: [slot | state.purging]}
  end

  defp slot?(module), do: String.starts_with?(Atom.to_string(module), @prefix)

  defp index(slot),
    do: slot |> Atom.to_string() |> String.replace_prefix(@prefix, "") |> String.to_integer()

  defp name(index), do: String.to_atom(@prefix <> Integer.to_string(index))

  # --- taking slots: a held one, a loaded free one, a purged name, else a new name ----------

  defp take(pairs, owner, state) do
    {modules, state, new} =
      Enum.reduce(pairs, {[], state, []}, fn
        {slot, _}, {acc, state, new} when slot != nil ->
          {[slot | acc], state, new}

        {nil, _}, {acc, state, new} ->
          {slot, state, load?} = next_slot(state)
          {[slot | acc], state, if(load?, do: [slot | new], else: new)}
      end)

    new
    |> Enum.reverse()
    |> Enum.chunk_every(@batch)
    |> Enum.each(&Gen.load_bare(&1, owner))

    {Enum.reverse(modules), state}
  end

  defp next_slot(state) do
    case :queue.out(state.free) do
      {{:value, {slot, _freed}}, free} ->
        {slot, %{state | free: free}, false}

      {:empty, _} ->
        if :gb_sets.is_empty(state.unloaded) do
          {name(state.made), %{state | made: state.made + 1}, true}
        else
          {index, unloaded} = :gb_sets.take_smallest(state.unloaded)
          {name(index), %{state | unloaded: unloaded}, true}
        end
    end
  end
end
