defmodule CMDC.Tool.MCP.Slots do
  @moduledoc """
  The tool modules remote MCP tools live in: a pool of *slots*, each a copy of the script-tool
  template (`CMDC.Tool.Script.Gen`) whose data sits in one ETS table, not in the module.

  Why a pool: a module per remote tool, named after the tool, costs an atom and eleven exports
  that are never freed (40,000 tools overflowed the VM's export table) and a code purge per
  module to remove (2,000 tools took 11 s to stop). A slot is made once, holds a tool while its
  server lists it, and goes back to the pool when the tool goes away: stopping a client deletes
  ETS rows, nothing is purged, and the modules ever made never outnumber the most remote tools
  held at once, which `max_total_tools` bounds (`CMDC.Tool.MCP.Client.Limits`).

  Slots are held by the process that asked for them (a client): when it ends, however it
  ends (even killed, when its `terminate/2` never runs), its slots are freed.

  A freed slot keeps no data (calling it says the tool is gone); slots are reused oldest-freed
  first, so a module kept past its tool's removal is unlikely to name another tool soon. Look
  tools up by name (`CMDC.Tool.Registry`, `CMDC.Tool.MCP.Client.tools/1`) rather than keeping
  modules of remote tools.
  """

  use GenServer

  alias CMDC.Tool.Script.Gen

  @table __MODULE__
  # Slot modules made per code-loading commit: one commit waits for every scheduler, so a
  # batch keeps the number of commits low without one long stop of the world.
  @batch 500

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

  @doc "`%{in_use, made}`: slots holding a tool, slot modules made so far."
  @spec stats() :: %{in_use: non_neg_integer(), made: non_neg_integer()}
  def stats, do: GenServer.call(ensure_started(), :stats)

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
    {:ok, %{free: :queue.new(), made: 0, in_use: 0, holders: %{}}}
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

  def handle_call(:stats, _from, state),
    do: {:reply, %{in_use: state.in_use, made: state.made}, state}

  @impl true
  def handle_info({:DOWN, _, :process, pid, _}, state) do
    case state.holders do
      %{^pid => {_mon, modules}} -> {:noreply, free(state, pid, MapSet.to_list(modules))}
      _ -> {:noreply, state}
    end
  end

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
    free = Enum.reduce(held, state.free, &:queue.in/2)
    state = %{state | free: free, in_use: state.in_use - length(held)}

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

  defp take(pairs, owner, state) do
    {modules, state, new} =
      Enum.reduce(pairs, {[], state, []}, fn
        {slot, _}, {acc, state, new} when slot != nil ->
          {[slot | acc], state, new}

        {nil, _}, {acc, state, new} ->
          case :queue.out(state.free) do
            {{:value, slot}, free} ->
              {[slot | acc], %{state | free: free}, new}

            {:empty, _} ->
              slot = Module.concat(CMDC.Tool.MCP.Tools, "Slot#{state.made}")
              {[slot | acc], %{state | made: state.made + 1}, [slot | new]}
          end
      end)

    new
    |> Enum.reverse()
    |> Enum.chunk_every(@batch)
    |> Enum.each(&Gen.load_bare(&1, owner))

    {Enum.reverse(modules), state}
  end
end
