defmodule CMDC.Tool.Runner.Intercept do
  @moduledoc """
  The runner's hook steps (`CMDC.Tool.Hooks`): `before/4` between validation and the
  permission check, `after_call/4` between the tool's result and result approval.

  `before/4` answers `{:ok, args, pre}` (`args` possibly rewritten and validated again; `pre`
  the combined verdict, which `permit/7` and `after_call/4` read) or `{:error, %Result{}}`.
  """

  require Logger

  alias CMDC.Tool.Hooks.{Background, Dispatch, Verdict}
  alias CMDC.Tool.Result
  alias CMDC.Tool.Runner.Permit

  @none %{decision: nil, context: [], messages: [], errors: []}

  @doc """
  The names a tool's hooks match: the name called (a provider may have been given a mapped
  one), the tool's own, and `mcp__server__tool` for an MCP tool.
  """
  @spec names(map(), map()) :: [String.t()]
  def names(%{tool: called, module: module}, settings) do
    own = if called == module.name(), do: [called], else: [called, module.name()]

    case settings do
      %{server: server, remote_name: remote} when is_binary(server) ->
        Enum.uniq(own ++ ["mcp__#{server}__#{remote}", "mcp__" <> module.name()])

      _ ->
        own
    end
  end

  @doc "Runs the `PreToolUse` hooks of a call."
  @spec before([CMDC.Tool.Hooks.Hook.t()], map(), map(), CMDC.Context.t()) ::
          {:ok, map(), map()} | {:error, Result.t()}
  def before([], call, _settings, _context), do: {:ok, call.args, @none}

  def before(hooks, call, settings, context) do
    input = %{call: call, context: context}

    case Dispatch.run(hooks, :pre_tool_use, names(call, settings), input) do
      :cancelled -> {:error, Result.error("cancelled", :cancelled)}
      verdicts -> verdicts |> Verdict.combine() |> decide(call)
    end
  end

  defp decide(%{stop: {hook, why}} = pre, call) do
    text = "#{call.tool} was not run: #{hook} stopped the turn: #{why}"
    {:error, %{Result.error(text, :aborted) | abort: why, notes: notes(pre)}}
  end

  defp decide(%{decision: :deny} = pre, call) do
    text = "#{call.tool} was denied by #{pre.decided_by}: #{pre.reason || "no reason given"}"
    {:error, with_context(%{Result.error(text, :denied) | notes: notes(pre)}, pre.context)}
  end

  defp decide(%{args: nil} = pre, call), do: {:ok, call.args, pre}

  defp decide(%{args: args} = pre, call) do
    case CMDC.Tool.validate(call.module, args) do
      {:ok, args} ->
        {:ok, args, pre}

      {:error, errors} ->
        text =
          "#{pre.args_by} rewrote the arguments of #{call.tool}, and they are invalid: " <>
            CMDC.Tool.format_errors(errors, call.module)

        {:error, %{Result.error(text, :invalid) | notes: notes(pre)}}
    end
  end

  @doc """
  The permission check after the hooks: `ask` asks the approver (headless: denied), `allow`
  skips an asking policy, otherwise the tool's policy decides (`CMDC.Tool.Runner.Permit`). A
  `:deny` policy refuses whatever the hooks said.
  """
  @spec permit(map(), String.t(), map(), term(), map(), CMDC.Context.t(), keyword()) ::
          :ok | {:error, Result.t()}
  def permit(pre, name, args, id, settings, context, opts) do
    policy = get_in(opts, [:policies, name]) || Map.get(settings, :policy, :auto)

    case pre.decision do
      _ when policy == :deny -> Permit.check(name, args, id, settings, context, opts)
      :ask -> Permit.ask(name, args, id, context, opts, false, asked(pre))
      :allow -> :ok
      _ -> Permit.check(name, args, id, settings, context, opts)
    end
    |> case do
      :ok -> :ok
      {:error, result} -> {:error, %{result | notes: notes(pre)}}
    end
  end

  defp asked(%{decided_by: hook, reason: nil}), do: "asked by #{hook}"
  defp asked(%{decided_by: hook, reason: why}), do: "#{hook}: #{why}"

  @doc "Runs the `PostToolUse` (or `PostToolUseFailure`) hooks and applies their answers."
  @spec after_call(
          Result.t(),
          [CMDC.Tool.Hooks.Hook.t()],
          map(),
          {map(), map(), CMDC.Context.t()}
        ) ::
          Result.t()
  def after_call(result, [], call, {pre, _settings, context}),
    do: finish(result, call, pre, @none, context)

  def after_call(result, hooks, call, {pre, settings, context}) do
    event = if result.is_error, do: :post_tool_use_failure, else: :post_tool_use
    input = %{call: call, result: result, context: context}

    case Dispatch.run(hooks, event, names(call, settings), input) do
      :cancelled -> Result.error("cancelled", :cancelled)
      verdicts -> finish(result, call, pre, Verdict.combine(verdicts), context)
    end
  end

  defp finish(result, call, pre, post, context) do
    result =
      case post do
        %{block: {hook, why}} ->
          Result.error("the result of #{call.tool} was blocked by #{hook}: #{why}", :blocked)

        %{rewrite: %{} = changes} ->
          rewrite(result, changes)

        _ ->
          result
      end

    # What background hooks of the session reported since its last result.
    reports = Background.take(context.session_id)
    later = for r <- reports, r.context, do: r.context
    later_notes = for r <- reports, note <- [r.message, r.error], note, do: "#{r.hook}: #{note}"

    result = with_context(result, pre.context ++ post.context ++ later)
    result = %{result | notes: result.notes ++ notes(pre) ++ notes(post) ++ later_notes}

    case post[:stop] do
      {_hook, why} -> %{result | abort: why}
      nil -> result
    end
  end

  defp rewrite(result, changes) do
    result = Map.merge(result, Map.take(changes, [:content, :structured, :is_error]))
    result = if is_binary(result.content), do: Result.fit(result, 100_000), else: result

    cond do
      result.is_error and result.reason == nil -> %{result | reason: :tool_error}
      not result.is_error -> %{result | reason: nil}
      true -> result
    end
  end

  defp with_context(result, []), do: result

  defp with_context(result, texts) do
    extra = Enum.join(texts, "\n")

    %{
      result
      | content:
          if(result.content in [nil, ""], do: extra, else: result.content <> "\n\n" <> extra)
    }
  end

  defp notes(%{messages: m, errors: e}), do: m ++ e

  @session_events %{start: {:session_start, "startup"}, shutdown: {:session_end, "other"}}

  @doc """
  Runs the hooks of a session event: Elixir hooks' `on_session/2` for every event, command
  hooks' `SessionStart` (source `"startup"`) and `SessionEnd` (reason `"other"`). Failures are
  logged; nothing is returned.
  """
  @spec session(term(), atom(), CMDC.Context.t(), keyword()) :: :ok
  def session(tools, event, context, opts) do
    case CMDC.Tool.Hooks.for_call(tools, context, opts) do
      {:error, message} ->
        Logger.warning("cmdc_tool: session #{inspect(event)}: #{message}")

      hooks ->
        # Background reports nobody took die with their session.
        if event == :shutdown, do: Background.take(context.session_id)
        {hook_event, source} = Map.get(@session_events, event, {:session_start, nil})
        # Events without a command-hook name reach Elixir hooks only.
        hooks = if source, do: hooks, else: Enum.filter(hooks, &(&1.kind == :elixir))
        input = %{context: context, session_event: source || event}
        elixir_input = %{input | session_event: event}

        # An Elixir hook's matcher is about tools: every session event reaches it.
        elixir = for h <- hooks, h.kind == :elixir, do: %{h | matcher: :all}
        commands = Enum.reject(hooks, &(&1.kind == :elixir))

        for {hooks, input} <- [{elixir, elixir_input}, {commands, input}],
            %Verdict{error: error, hook: hook} <-
              Dispatch.run(hooks, hook_event, [to_string(input.session_event)], input),
            error != nil do
          Logger.warning("cmdc_tool: #{hook} at session #{inspect(event)}: #{error}")
        end
    end

    :ok
  end
end
