defmodule CMDC.Tool.Hooks.Dispatch do
  @moduledoc """
  Runs the hooks of one event that match (their matcher, and for tool events their `if`
  condition), concurrently, each in a process of its own under its time-out, and returns their
  `CMDC.Tool.Hooks.Verdict`s in hook order (not finishing order). `async`/`asyncRewake` command
  hooks are started in the background instead (`CMDC.Tool.Hooks.Background`): no verdict.

  A hook that fails (raises, exits, runs past its time-out, or has a matcher that cannot be run)
  answers as `CMDC.Tool.Hooks.Failure` says: an Elixir hook or a fail-closed command hook denies
  the call before it and blocks the result after it; a command hook by default is a
  non-blocking error, as in Claude Code. The caller never crashes. A command hook's time-out is
  enforced by the exec layer (the hook and what it started are killed,
  `CMDC.Tool.Hooks.Command`). A `:cancel` message to the calling process stops the hooks.

      iex> {:ok, hooks} = CMDC.Tool.Hooks.new([
      ...>   [name: "slow", timeout: 50, before_call: fn _, _ -> Process.sleep(1_000) end],
      ...>   [name: "fine", match: "echo", before_call: fn _, _ -> {:allow, "ok"} end]])
      iex> call = %{tool: "echo", args: %{}, call_id: "1", module: CMDC.Tool.Examples.Echo}
      iex> [slow, fine] = CMDC.Tool.Hooks.Dispatch.run(hooks, :pre_tool_use, ["echo"], %{call: call, context: %CMDC.Context{}})
      iex> {slow.decision, slow.reason, fine.decision}
      {:deny, "hook slow did not answer within 50 ms (stopped) (fail-safe: not run)", :allow}
  """

  require Logger

  alias CMDC.Tool.Hooks.{Background, Command, Failure, Hook, Verdict}

  # A command hook's own time-out is enforced natively; this only covers a stuck VM process.
  @command_margin 5_000

  @doc """
  Runs the hooks of `hooks` matching `event` and `names`. `input` carries what the hooks read:
  `:call` (`%{tool, args, call_id, module}`), `:result` after a call, `:context`,
  `:session_event` and `:json` (the stdin object of command hooks).
  """
  @spec run([Hook.t()], Hook.event(), [String.t()], map()) :: [Verdict.t()] | :cancelled
  def run(hooks, event, names, input) do
    args = with %{call: %{args: args}} <- input, do: args, else: (_ -> nil)

    # A matcher that cannot be run is the hook's failure, in its place among the others; a
    # matching hook whose `if` does not hold does not run.
    asked =
      Enum.flat_map(hooks, fn hook ->
        case Hook.match(hook, event, names) do
          false -> []
          true -> if Hook.condition?(hook, event, names, args), do: [{hook, true}], else: []
          error -> [{hook, error}]
        end
      end)

    # `async`/`asyncRewake` command hooks never hold the event up (`Background`).
    {background, asked} =
      Enum.split_with(asked, fn {hook, answer} ->
        answer == true and hook.kind == :command and hook.async != nil
      end)

    Enum.each(background, fn {hook, _} -> Background.start(hook, event, input) end)

    case asked do
      [] ->
        []

      asked ->
        indexed = Enum.with_index(asked)

        failed =
          for {{hook, {:error, why}}, i} <- indexed,
              into: %{},
              do: {i, Failure.verdict(hook, event, "has a matcher that cannot be run: " <> why)}

        runnable = for {{hook, true}, i} <- indexed, do: {hook, i}
        runnable |> start(event, input) |> collect(event, failed)
    end
  end

  defp start(hooks, event, input) do
    parent = self()
    ref = make_ref()

    running =
      hooks
      |> Enum.map(fn {hook, i} ->
        # Linked: a hook dies with its caller (and a command hook's program with it). Nothing
        # inside can exit abnormally, so the link never takes the caller down.
        # A command hook that goes to the background on its own (`{"async": true}` first)
        # answers at once and unlinks: it no longer dies with its caller.
        detach = fn ->
          Background.used()
          send(parent, {ref, i, %Verdict{hook: hook.label}})
          Process.unlink(parent)
        end

        pid =
          spawn_link(fn ->
            case safely(hook, event, input, detach) do
              {:detached, verdict} ->
                Background.finish(input, Background.report(hook, event, verdict))

              verdict ->
                send(parent, {ref, i, verdict})
            end
          end)

        margin = if hook.kind == :command, do: @command_margin, else: 0
        {i, hook, pid, System.monotonic_time(:millisecond) + hook.timeout_ms + margin}
      end)

    {ref, running}
  end

  defp collect({_ref, []}, _event, done), do: done |> Enum.sort() |> Enum.map(&elem(&1, 1))

  defp collect({ref, running}, event, done) do
    {i, hook, pid, deadline} = Enum.min_by(running, &elem(&1, 3))
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {^ref, j, verdict} ->
        collect({ref, List.keydelete(running, j, 0)}, event, Map.put(done, j, verdict))

      :cancel ->
        Enum.each(running, fn {_, _, pid, _} -> stop(pid) end)
        :cancelled
    after
      left ->
        stop(pid)
        why = "did not answer within #{hook.timeout_ms} ms (stopped)"

        collect(
          {ref, List.keydelete(running, i, 0)},
          event,
          Map.put(done, i, failed(hook, event, why))
        )
    end
  end

  defp stop(pid) do
    Process.unlink(pid)
    Process.exit(pid, :kill)
  end

  defp safely(%Hook{kind: :command} = hook, event, input, detach) do
    Command.run(hook, event, input, detach)
  rescue
    e -> failed(hook, event, "failed: " <> Exception.message(e))
  end

  defp safely(hook, event, input, _detach) do
    CMDC.Tool.Hooks.Elixir.run(hook, event, input)
  rescue
    e -> failed(hook, event, "raised " <> Exception.format_banner(:error, e, __STACKTRACE__))
  catch
    kind, reason -> failed(hook, event, "#{kind}: #{inspect(reason, limit: 10)}")
  end

  defp failed(hook, event, why), do: Failure.verdict(hook, event, why)
end
