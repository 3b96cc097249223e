defmodule CMDC.Tool.Runner.Permit do
  @moduledoc """
  The permission check before a call: the tool's policy (`:auto`, `:deny`, `:ask_once`,
  `:ask_always`; a runner's `:policies` option overrides it) and, for the asking policies, the
  approver (`:approver` option or `context.private.approver`; none = headless = denied).
  `:ask_once` approvals are remembered per session in `CMDC.Tool.Approvals`.

  Answers `:ok` or `{:error, %CMDC.Tool.Result{reason: :denied}}`.

      iex> CMDC.Tool.Runner.Permit.check("rm", %{}, "c1", %{policy: :deny}, %CMDC.Context{}, [])
      {:error, CMDC.Tool.Result.error("rm is not allowed here (policy: deny).", :denied)}
  """

  alias CMDC.Tool.Result

  @doc "Checks the policy of tool `name` for one call."
  @spec check(String.t(), map(), term(), map(), CMDC.Context.t(), keyword()) ::
          :ok | {:error, Result.t()}
  def check(name, args, id, settings, context, opts) do
    policy = get_in(opts, [:policies, name]) || Map.get(settings, :policy, :auto)

    case policy do
      :auto -> :ok
      :deny -> {:error, Result.error("#{name} is not allowed here (policy: deny).", :denied)}
      :ask_once -> ask(name, args, id, context, opts, true)
      :ask_always -> ask(name, args, id, context, opts, false)
      other -> {:error, Result.error("#{name} has an unknown policy #{inspect(other)}.", :denied)}
    end
  end

  @doc """
  Asks the approver about one call (`remember?`: an approval holds for the rest of the session).
  `why` (optional) says who asked, e.g. a hook's reason, and reaches the approver as `:reason`.
  """
  @spec ask(String.t(), map(), term(), CMDC.Context.t(), keyword(), boolean(), String.t() | nil) ::
          :ok | {:error, Result.t()}
  def ask(name, args, id, context, opts, remember?, why \\ nil) do
    key = {context.session_id, name}

    if remember? and CMDC.Tool.Approvals.approved?(key) do
      :ok
    else
      approver = Keyword.get(opts, :approver) || Map.get(context.private, :approver)
      request = %{tool: name, args: args, call_id: id}
      request = if why, do: Map.put(request, :reason, why), else: request

      case approver && approver.(request) do
        nil ->
          asked = if why, do: " (#{why})", else: ""

          {:error,
           Result.error(
             "#{name} needs approval#{asked}, and no one can approve here (headless): not run. " <>
               CMDC.Tool.Approval.how_to_allow(opts[:module], name),
             :denied
           )}

        :allow ->
          if remember?, do: CMDC.Tool.Approvals.remember(key)
          :ok

        {:deny, why} ->
          {:error, Result.error("#{name} was not approved: #{why}", :denied)}

        _ ->
          {:error, Result.error("#{name} was not approved.", :denied)}
      end
    end
  end
end
