defmodule CMDC.Tool.Hooks.Verdict do
  @moduledoc """
  What one hook said about one event, whatever its kind (Elixir or command), and how the answers
  of several hooks combine.

  Fields: `:hook` (the hook's label, naming its file), `:decision` (`:allow`, `:deny`, `:ask`,
  `:defer` or `nil`), `:reason`, `:args` (rewritten arguments), `:context` (text for the model),
  `:block` (an after-call block reason), `:rewrite` (a map of `:content`, `:structured`,
  `:is_error`), `:stop` (the turn stops, with a reason), `:message` (for the user, not the
  model), `:error` (a non-blocking failure of the hook itself).

  Precedence (`combine/1`): any `:stop` stops; decisions `deny > defer > ask > allow` (the first
  hook of the winning kind gives the reason); the first block wins; for rewrites (arguments or
  results) the last hook in order wins; contexts, messages and errors are all kept, in order.

      iex> alias CMDC.Tool.Hooks.Verdict
      iex> c = Verdict.combine([%Verdict{hook: "a", decision: :allow, args: %{"x" => 1}},
      ...>   %Verdict{hook: "b", decision: :deny, reason: "no"}, %Verdict{hook: "c", args: %{"x" => 2}}])
      iex> {c.decision, c.reason, c.args}
      {:deny, "no", %{"x" => 2}}
  """

  defstruct hook: nil,
            decision: nil,
            reason: nil,
            args: nil,
            context: nil,
            block: nil,
            rewrite: nil,
            stop: nil,
            message: nil,
            error: nil

  @type t :: %__MODULE__{}

  @typedoc "The combination of several verdicts: lists where every hook's part is kept."
  @type combined :: %{
          decision: :allow | :deny | :ask | :defer | nil,
          reason: String.t() | nil,
          decided_by: String.t() | nil,
          args: map() | nil,
          args_by: String.t() | nil,
          block: {String.t(), String.t()} | nil,
          rewrite: map() | nil,
          stop: {String.t(), String.t()} | nil,
          context: [String.t()],
          messages: [String.t()],
          errors: [String.t()]
        }

  @rank %{deny: 4, defer: 3, ask: 2, allow: 1}

  @doc "Combines verdicts given in hook order (see the precedence above)."
  @spec combine([t()]) :: combined()
  def combine(verdicts) do
    winner =
      verdicts
      |> Enum.filter(& &1.decision)
      |> Enum.reduce(nil, fn v, best ->
        if best == nil or @rank[v.decision] > @rank[best.decision], do: v, else: best
      end)

    last_args = verdicts |> Enum.filter(& &1.args) |> List.last()

    %{
      decision: winner && winner.decision,
      reason: winner && winner.reason,
      decided_by: winner && winner.hook,
      args: last_args && last_args.args,
      args_by: last_args && last_args.hook,
      block: Enum.find_value(verdicts, &(&1.block && {&1.hook, &1.block})),
      rewrite: verdicts |> Enum.filter(& &1.rewrite) |> List.last() |> then(&(&1 && &1.rewrite)),
      stop: Enum.find_value(verdicts, &(&1.stop && {&1.hook, &1.stop})),
      context: for(v <- verdicts, v.context not in [nil, ""], do: v.context),
      messages: for(v <- verdicts, v.message not in [nil, ""], do: v.message),
      errors: for(v <- verdicts, v.error, do: "#{v.hook}: #{v.error}")
    }
  end
end
