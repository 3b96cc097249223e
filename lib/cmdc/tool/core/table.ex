defmodule CMDC.Tool.Table do
  @moduledoc false
  # One public named ETS table, owned by an Agent under `CMDC.Tool.Application` so that it
  # outlives every call and exists before the first one; reads and writes go to ETS directly.
  # The owners: `CMDC.Tool.Approvals`, `CMDC.Tool.Hooks.Store`, `CMDC.Tool.Pending`.

  @doc "Starts the Agent `name` owning `table` (an ETS table of `type`)."
  def start_link(name, table, type) do
    Agent.start_link(
      fn -> :ets.new(table, [:named_table, :public, type, read_concurrency: true]) end,
      name: name
    )
  end
end
