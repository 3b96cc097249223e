defmodule CMDC.Tool.Hooks.Store do
  @moduledoc """
  The hooks attached to a scope (`:global`, `{:registry, id}`, `{:session, id}`), in one public
  ETS table owned by a process under `CMDC.Tool.Application`: a runner reads it on every call
  without a message.

      iex> CMDC.Tool.Hooks.Store.put({:session, "store-doc"}, [:a_hook])
      :ok
      iex> CMDC.Tool.Hooks.Store.get({:session, "store-doc"})
      [:a_hook]
      iex> CMDC.Tool.Hooks.Store.delete({:session, "store-doc"})
      :ok
      iex> CMDC.Tool.Hooks.Store.get({:session, "store-doc"})
      []
  """
  use Agent

  @table :cmdc_tool_hooks

  @doc false
  def start_link(_opts), do: CMDC.Tool.Table.start_link(__MODULE__, @table, :set)

  @doc "The hooks of `scope` (`[]` when none)."
  @spec get(term()) :: list()
  def get(scope) do
    # Until the first attach no call reads the table (one flag read instead of an ETS lookup).
    if :persistent_term.get({__MODULE__, :used}, false), do: lookup(scope), else: []
  end

  defp lookup(scope) do
    case :ets.lookup(@table, scope) do
      [{_, hooks}] -> hooks
      [] -> []
    end
  rescue
    # The application is not started (e.g. a script using the runner bare): no attached hooks.
    ArgumentError -> []
  end

  @doc "Replaces the hooks of `scope`."
  @spec put(term(), list()) :: :ok
  def put(scope, hooks) do
    :ets.insert(@table, {scope, hooks})
    # Set once per VM: a persistent_term write is costly, a read is not.
    unless :persistent_term.get({__MODULE__, :used}, false),
      do: :persistent_term.put({__MODULE__, :used}, true)

    :ok
  end

  @doc "Removes the hooks of `scope`."
  @spec delete(term()) :: :ok
  def delete(scope) do
    :ets.delete(@table, scope)
    :ok
  end
end
