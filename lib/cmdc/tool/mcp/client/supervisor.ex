defmodule CMDC.Tool.MCP.Client.Supervisor do
  @moduledoc """
  One MCP client's own supervisor (`CMDC.Tool.MCP.Servers` starts one per server).

  A client whose process crashes in a loop uses up this supervisor's restart budget (3 in 5 s)
  and this supervisor then ends alone: the shared supervisor above it starts it `:temporary`
  and never counts it, so the other servers' clients never see it. It also ends with its client
  when the client is stopped on purpose (the client is its one *significant* child).
  """

  @behaviour :supervisor

  alias CMDC.Tool.MCP.Client

  @doc "Starts the supervisor and its client (`Client.start_link/1`'s options)."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(client_opts), do: :supervisor.start_link(__MODULE__, client_opts)

  @doc false
  def child_spec(client_opts) do
    %{
      id: {__MODULE__, client_opts[:name]},
      start: {__MODULE__, :start_link, [client_opts]},
      type: :supervisor,
      restart: :temporary
    }
  end

  @doc "The client process, or `nil` when it is not running."
  @spec client(pid()) :: pid() | nil
  def client(sup) do
    case :supervisor.which_children(sup) do
      [{_, pid, _, _}] when is_pid(pid) -> pid
      _ -> nil
    end
  end

  @impl true
  def init(client_opts) do
    flags = %{strategy: :one_for_one, intensity: 3, period: 5, auto_shutdown: :any_significant}
    {:ok, {flags, [Map.put(Client.child_spec(client_opts), :significant, true)]}}
  end
end
