defmodule CMDC.Tool.Pending.Resolve do
  @moduledoc """
  The `resolve` tool: applies or discards a pending action of the session
  (`CMDC.Tool.Pending`). It exists only while the session has pending actions: `offer/2` adds
  it to the tools given to the provider (and the MCP server's list), and `CMDC.Tool.Runner`
  answers a `resolve` call then.

      iex> ctx = %CMDC.Context{session_id: "offer-doc"}
      iex> CMDC.Tool.Pending.Resolve.offer([CMDC.Tool.Examples.Echo], "offer-doc")
      [CMDC.Tool.Examples.Echo]
      iex> {:ok, _} = CMDC.Context.push_pending_action(ctx, label: "x", apply: fn _ -> :ok end)
      iex> CMDC.Tool.Pending.Resolve.offer([CMDC.Tool.Examples.Echo], "offer-doc")
      [CMDC.Tool.Examples.Echo, CMDC.Tool.Pending.Resolve]
  """
  @behaviour CMDC.Tool

  alias CMDC.Tool.Pending

  @doc """
  `tools` plus this tool while `session` has pending actions (a registry becomes its list of
  modules then).
  """
  @spec offer(term(), term()) :: term()
  def offer(tools, session) do
    cond do
      not Pending.any?(session) -> tools
      is_list(tools) -> tools ++ [__MODULE__]
      true -> CMDC.Tool.Registry.list(tools) ++ [__MODULE__]
    end
  end

  @impl true
  def name, do: "resolve"

  @impl true
  def description,
    do:
      "Apply or discard a pending action (a preview a tool registered). Call it with the " <>
        "action's id, \"apply\" or \"discard\", and a short reason."

  @impl true
  def parameters do
    %{
      "type" => "object",
      "properties" => %{
        "id" => %{"type" => "string", "description" => "The pending action's id"},
        "action" => %{"type" => "string", "enum" => ["apply", "discard"]},
        "reason" => %{"type" => "string", "description" => "Why"}
      },
      "required" => ["id", "action"],
      "additionalProperties" => false
    }
  end

  @impl true
  def execute(%{"id" => id, "action" => action} = args, ctx) do
    case Pending.take(ctx.session_id, id) do
      {:ok, pending} ->
        run(action, pending, args["reason"] || "", ctx)

      :error ->
        ids = Enum.map_join(Pending.list(ctx.session_id), ", ", &"#{&1.id} (#{&1.label})")
        {:error, "no pending action #{id}" <> if(ids == "", do: "", else: "; pending: " <> ids)}
    end
  end

  defp run("discard", pending, reason, _ctx) do
    Pending.discard(pending, reason)
    {:ok, "discarded #{pending.id}: #{pending.label}"}
  end

  defp run("apply", pending, _reason, ctx) do
    case pending.apply.(ctx) do
      {:ok, text} when is_binary(text) -> {:ok, text}
      {:error, text} when is_binary(text) -> {:error, text}
      :ok -> {:ok, "applied #{pending.id}: #{pending.label}"}
      other -> {:error, "applying #{pending.label} returned #{inspect(other, limit: 5)}"}
    end
  end
end
