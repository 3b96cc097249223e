defmodule CMDC.Tool.Approvals do
  @moduledoc """
  The `:ask_once` approvals the runner remembers per session: `{session_id, tool_name}` keys in
  one public ETS table, owned by a process under `CMDC.Tool.Application` so the table outlives
  every call and exists before the first one.

      iex> CMDC.Tool.Approvals.approved?({"doc-session", "echo"})
      false
      iex> CMDC.Tool.Approvals.remember({"doc-session", "echo"})
      :ok
      iex> CMDC.Tool.Approvals.approved?({"doc-session", "echo"})
      true
      iex> CMDC.Tool.Approvals.forget("doc-session")
      :ok
      iex> CMDC.Tool.Approvals.approved?({"doc-session", "echo"})
      false
  """
  use Agent

  @table :cmdc_tool_approvals

  @typedoc "`{session_id, tool_name}`."
  @type key :: {term(), String.t()}

  @doc false
  def start_link(_opts), do: CMDC.Tool.Table.start_link(__MODULE__, @table, :set)

  @doc "Whether `key` was approved once in its session."
  @spec approved?(key()) :: boolean()
  def approved?(key), do: :ets.member(@table, key)

  @doc "Remembers an `:ask_once` approval."
  @spec remember(key()) :: :ok
  def remember(key) do
    :ets.insert(@table, {key, true})
    :ok
  end

  @doc "Forgets the approvals of a session (e.g. when it ends)."
  @spec forget(term()) :: :ok
  def forget(session_id) do
    :ets.match_delete(@table, {{session_id, :_}, :_})
    :ok
  end
end
