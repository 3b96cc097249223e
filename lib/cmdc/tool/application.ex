defmodule CMDC.Tool.Application do
  @moduledoc false
  # Starts what must outlive any caller: the cluster's :pg scope (so every node's view is in
  # sync from boot, not from the first lookup), the owner of the approvals table and that of
  # the provider warnings already logged.
  use Application

  @impl true
  def start(_type, _args) do
    children = [
      %{id: :cmdc_tool_cluster_pg, start: {:pg, :start_link, [:cmdc_tool_cluster]}},
      CMDC.Tool.Approvals,
      CMDC.Tool.Hooks.Store,
      CMDC.Tool.Hooks.Background,
      CMDC.Tool.Pending,
      CMDC.Tool.Providers.Warnings
    ]

    Supervisor.start_link(children, strategy: :one_for_one, name: CMDC.Tool.Supervisor)
  end
end
