defmodule CMDC.Tool.Pending do
  @moduledoc """
  Pending actions: a tool shows the model a preview (a file edit, a deploy) instead of acting,
  and the model applies or discards it later with the `resolve` tool.

  During a call a tool registers an action with `CMDC.Context.push_pending_action/2`
  (`push/2`): `:label`, `:details` (text the model reads), `:apply` (`fn context -> {:ok, text}
  | {:error, text} end`) and optionally `:discard` (`fn reason -> any end`) and `:policy`
  (`:ask_always` etc.: how applying is approved). While a session has pending actions:

    * `CMDC.Tool.Pending.Resolve.offer/2` adds the `resolve` tool (`id`, `action` = `apply` |
      `discard`, `reason`) to the tool list given to the provider, and the MCP server lists it;
    * `CMDC.Tool.Runner` runs a `resolve` call like any call — hooks (they see
      `tool_name: "resolve"`, and the action in the call's `:pending` / the command hook's
      `pending_action` field: `id`, `label`, `details`, `tool`) and approvals (the action's
      `:policy`) apply before `apply` runs.

  Actions expire with their session (`CMDC.Tool.Runner.session_event/4` at `:shutdown`): their
  `discard` runs with reason `"expired"`.

      iex> ctx = %CMDC.Context{session_id: "pending-doc"}
      iex> {:ok, id} = CMDC.Context.push_pending_action(ctx, label: "greet", apply: fn _ -> {:ok, "hi"} end)
      iex> [%{id: ^id, label: "greet"}] = CMDC.Tool.Pending.list("pending-doc")
      iex> CMDC.Tool.Pending.any?("pending-doc")
      true
      iex> CMDC.Tool.Pending.expire("pending-doc")
      :ok
      iex> CMDC.Tool.Pending.any?("pending-doc")
      false

  ## Errors

  `push/2` answers `{:error, message}` for a context without a session or an action without a
  label or an `apply` function of arity 1. Applying or discarding an unknown id is the
  `resolve` tool's `{:error, text}` naming the pending ids.
  """
  use Agent

  require Logger

  @table :cmdc_tool_pending

  @type action :: %{
          id: String.t(),
          label: String.t(),
          details: String.t(),
          tool: String.t() | nil,
          policy: atom() | nil,
          apply: (map() -> term()),
          discard: (String.t() -> term()) | nil
        }

  @doc false
  def start_link(_opts), do: CMDC.Tool.Table.start_link(__MODULE__, @table, :ordered_set)

  @doc "Registers a pending action for the context's session: `{:ok, id}` or `{:error, message}`."
  @spec push(map(), keyword() | map()) :: {:ok, String.t()} | {:error, String.t()}
  def push(%{session_id: nil}, _action),
    do: {:error, "a pending action needs a session: the context has no session_id"}

  def push(%{session_id: session}, action)
      when is_list(action) or is_map(action) do
    action = Map.new(action)

    cond do
      not is_binary(action[:label]) or action[:label] == "" ->
        {:error, "a pending action needs a :label (text)"}

      not is_function(action[:apply], 1) ->
        {:error, "a pending action needs :apply, a function of the context"}

      action[:discard] != nil and not is_function(action[:discard], 1) ->
        {:error, ":discard must be a function of the reason"}

      true ->
        id = "pa_#{System.unique_integer([:positive, :monotonic])}"

        entry = %{
          id: id,
          label: action.label,
          details: to_string(action[:details] || ""),
          tool: action[:tool],
          policy: action[:policy],
          apply: action.apply,
          discard: action[:discard]
        }

        :ets.insert(@table, {{session, id}, entry})
        {:ok, id}
    end
  end

  @doc "The session's pending actions, oldest first."
  @spec list(term()) :: [action()]
  def list(session) do
    :ets.select(@table, [{{{session, :_}, :"$1"}, [], [:"$1"]}])
  rescue
    ArgumentError -> []
  end

  @doc "Whether the session has pending actions."
  @spec any?(term()) :: boolean()
  def any?(nil), do: false

  def any?(session) do
    :ets.select_count(@table, [{{{session, :_}, :_}, [], [true]}]) > 0
  rescue
    ArgumentError -> false
  end

  @doc "One pending action, left in place."
  @spec fetch(term(), String.t()) :: {:ok, action()} | :error
  def fetch(session, id) do
    case :ets.lookup(@table, {session, id}) do
      [{_, action}] -> {:ok, action}
      [] -> :error
    end
  rescue
    ArgumentError -> :error
  end

  @doc "Removes and returns one pending action (only one caller gets it)."
  @spec take(term(), String.t()) :: {:ok, action()} | :error
  def take(session, id) do
    case :ets.take(@table, {session, id}) do
      [{_, action}] -> {:ok, action}
      [] -> :error
    end
  end

  @doc "Drops the session's pending actions, running each `discard` with `\"expired\"`."
  @spec expire(term()) :: :ok
  def expire(session) do
    for action <- list(session), {:ok, _} <- [take(session, action.id)], action.discard do
      discard(action, "expired")
    end

    :ok
  end

  @doc false
  # Runs an action's discard; a crash is logged, never raised.
  def discard(%{discard: nil}, _reason), do: :ok

  def discard(action, reason) do
    action.discard.(reason)
    :ok
  rescue
    e ->
      Logger.warning("cmdc_tool: discarding #{action.label}: #{Exception.message(e)}")
      :ok
  end
end
