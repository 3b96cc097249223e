defmodule CMDC.Tool.Hooks.Elixir do
  @moduledoc """
  Runs one Elixir hook for one event and turns its answer into a `CMDC.Tool.Hooks.Verdict`.

  `before_call(call, context)` answers `:ok`/`nil` (no opinion), `:allow`, `:deny`, `:ask`
  (each also as `{decision, reason}`), `{:rewrite, args}`, `{:context, text}`, or a map/keyword
  of `:decision`, `:reason`, `:args`, `:context`, `:stop`, `:message`.
  `after_call(call, result, context)` answers `:ok`/`nil`, `{:block, reason}`,
  `{:rewrite, changes}` (`changes`: text, or a map of `:content`, `:structured`, `:is_error`),
  `{:context, text}`, or a map/keyword of `:block`, `:rewrite`, `:context`, `:stop`, `:message`.
  `on_session(event, context)`'s answer is ignored.

  An answer of another shape fails safe: the call is denied (before) or blocked (after) with a
  message naming the hook. Raising and timing out are handled by `CMDC.Tool.Hooks.Dispatch`.
  """

  alias CMDC.Tool.Hooks.Verdict

  @doc "Calls the hook's function for `event` with `input` (see `CMDC.Tool.Hooks.Dispatch`)."
  @spec run(CMDC.Tool.Hooks.Hook.t(), atom(), map()) :: Verdict.t()
  def run(hook, :pre_tool_use, input) do
    before(hook.label, hook.funs.before_call.(input.call, input.context))
  end

  def run(hook, event, input) when event in [:post_tool_use, :post_tool_use_failure] do
    later(hook.label, hook.funs.after_call.(input.call, input.result, input.context))
  end

  def run(hook, _session_event, input) do
    hook.funs.on_session.(input.session_event, input.context)
    %Verdict{hook: hook.label}
  end

  @decisions [:allow, :deny, :ask, :defer]

  defp before(label, answer) when answer in [:ok, nil], do: %Verdict{hook: label}
  defp before(label, d) when d in @decisions, do: %Verdict{hook: label, decision: d}

  defp before(label, {d, reason}) when d in @decisions and is_binary(reason),
    do: %Verdict{hook: label, decision: d, reason: reason}

  defp before(label, {:rewrite, args}) when is_map(args), do: %Verdict{hook: label, args: args}

  defp before(label, {:context, text}) when is_binary(text),
    do: %Verdict{hook: label, context: text}

  defp before(label, answer) when is_map(answer) or is_list(answer) do
    fields(label, answer, [:decision, :reason, :args, :context, :stop, :message], fn v ->
      (v.decision in [nil | @decisions] and (v.args == nil or is_map(v.args))) || "decision"
    end)
  end

  defp before(label, other), do: unexpected(label, other, :deny)

  defp later(label, answer) when answer in [:ok, nil], do: %Verdict{hook: label}

  defp later(label, {:block, reason}) when is_binary(reason),
    do: %Verdict{hook: label, block: reason}

  defp later(label, {:context, text}) when is_binary(text),
    do: %Verdict{hook: label, context: text}

  defp later(label, {:rewrite, changes}) do
    case rewrite(changes) do
      {:ok, rewrite} -> %Verdict{hook: label, rewrite: rewrite}
      :error -> unexpected(label, {:rewrite, changes}, :block)
    end
  end

  defp later(label, answer) when is_map(answer) or is_list(answer) do
    answer = Map.new(answer)

    with {:ok, rewrite} <- if(answer[:rewrite], do: rewrite(answer[:rewrite]), else: {:ok, nil}) do
      fields(
        label,
        Map.put(answer, :rewrite, rewrite),
        [:block, :rewrite, :context, :stop, :message],
        fn _ -> true end
      )
    else
      :error -> unexpected(label, answer, :block)
    end
  end

  defp later(label, other), do: unexpected(label, other, :block)

  defp rewrite(text) when is_binary(text), do: {:ok, %{content: text}}

  defp rewrite(changes) when is_map(changes) or is_list(changes) do
    changes = Map.new(changes)
    keys = Map.keys(changes)

    cond do
      keys == [] or Enum.any?(keys, &(&1 not in [:content, :structured, :is_error])) -> :error
      Map.has_key?(changes, :is_error) and not is_boolean(changes.is_error) -> :error
      Map.has_key?(changes, :content) and not is_binary(changes.content) -> :error
      true -> {:ok, changes}
    end
  end

  defp rewrite(_), do: :error

  defp fields(label, answer, allowed, check) do
    answer = Map.new(answer)
    extra = Map.keys(answer) -- allowed

    verdict = struct(Verdict, Map.put(Map.take(answer, allowed), :hook, label))

    cond do
      extra != [] -> unexpected(label, answer, if(:decision in allowed, do: :deny, else: :block))
      check.(verdict) != true -> unexpected(label, answer, :deny)
      true -> verdict
    end
  end

  defp unexpected(label, answer, how) do
    why = "#{label} answered #{inspect(answer, limit: 8)}, which is not a hook answer (fail-safe)"

    case how do
      :deny -> %Verdict{hook: label, decision: :deny, reason: why}
      :block -> %Verdict{hook: label, block: why}
    end
  end
end
