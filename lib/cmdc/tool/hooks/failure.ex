defmodule CMDC.Tool.Hooks.Failure do
  @moduledoc """
  What a hook's own failure means, in one place (the table of `docs/HOOKS.md`). Failures: a
  time-out, a kill (a signal, or stopped by the VM), an exit status other than 0 and 2, output
  that is not a JSON object, output over the 1 MB limit, a matcher that cannot be run; for
  Elixir hooks also a raise, an exit or an answer of another shape.

    * **fail-closed** (every Elixir hook; a command hook with `"cmdc": {"failClosed": true}`, or
      all of them with the runner's `hooks_fail_closed: true` / `Hooks.load(fail_closed: true)`):
      before a call the call is denied, after a call its result is withheld (`:blocked`), after
      a failed call the failure is added as context; at a session event it is logged.
    * **non-blocking** (command hooks by default: Claude Code's rule, so files written for Claude
      Code behave as they do there): the call goes on; the failure is logged and in the result's
      `:notes`.

  Output past the limit, or followed by text that is not JSON, whose first part holds a
  decision (`"permissionDecision"`, `"decision": "block"`) is a deny (a block after the call)
  in both modes, whatever the decision: a decision is never lost to what follows it, and an
  answer cut short never allows (`CMDC.Tool.Hooks.Command`).

      iex> hook = %CMDC.Tool.Hooks.Hook{kind: :command, label: "check.sh", fail_closed: true}
      iex> v = CMDC.Tool.Hooks.Failure.verdict(hook, :pre_tool_use, "timed out")
      iex> {v.decision, v.reason}
      {:deny, "check.sh timed out (fail-closed: not run)"}
  """

  require Logger

  alias CMDC.Tool.Hooks.{Hook, Verdict}

  @doc "Whether a failure of `hook` stops what it guards (see the module doc)."
  @spec closed?(Hook.t()) :: boolean()
  def closed?(%Hook{kind: :elixir}), do: true
  def closed?(%Hook{fail_closed: closed}), do: closed == true

  @doc "The verdict of `hook` failing at `event`, `why` saying how (`\"timed out after …\"`)."
  @spec verdict(Hook.t(), Hook.event(), String.t()) :: Verdict.t()
  def verdict(%Hook{label: label} = hook, event, why) do
    mode = if hook.kind == :elixir, do: "fail-safe", else: "fail-closed"

    case {closed?(hook), event} do
      {true, :pre_tool_use} ->
        %Verdict{hook: label, decision: :deny, reason: "#{label} #{why} (#{mode}: not run)"}

      {true, :post_tool_use} ->
        %Verdict{hook: label, block: "#{label} #{why} (#{mode}: result withheld)"}

      {true, :post_tool_use_failure} ->
        %Verdict{hook: label, block: "#{label} #{why} (#{mode}: result withheld)"}

      _ ->
        # A command hook's are tagged: the CLI shows them as the result's notes, not twice.
        Logger.warning("cmdc_tool: #{label} #{why}", cmdc_hook_error: hook.kind == :command)
        %Verdict{hook: label, error: why}
    end
  end
end
