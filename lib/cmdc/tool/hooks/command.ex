defmodule CMDC.Tool.Hooks.Command do
  @moduledoc """
  Runs one command hook (Claude Code's format) and reads its answer.

  The command runs through `sh -c` on the native exec layer (`CMDC.Tool.Exec`), in the project
  directory, with `CLAUDE_PROJECT_DIR` and `CMDC_PROJECT_DIR` set to it, the event as JSON on
  stdin (`session_id`, `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`,
  `tool_name`, `tool_input`, `tool_use_id`; `tool_response` after a call; `error` and
  `is_interrupt` after a failed call; `source` / `reason` for session events; `pending_action`
  (`id`, `label`, `details`, `tool`) for a `resolve` call; the caller's fields for the agent
  events of `CMDC.Tool.Hooks.event/3`), and the hook's own environment (`CLAUDE_PLUGIN_ROOT`
  for a plugin's, `HOME` when the settings came from a given home). Past its `timeout` it is
  killed with its whole process group; whether it ends or is killed, every process it started
  and left running is killed too, even a daemon that left its group (`setsid daemon &`: the
  exec layer's `:kill_strays`).

    * exit 0: stdout, when not empty, must be a JSON object: `continue` (`false` stops the turn,
      with `stopReason`), `systemMessage` (for the user), `suppressOutput`, `decision` +
      `reason`, and `hookSpecificOutput` with `permissionDecision` (`allow`/`deny`/`ask`/`defer`),
      `permissionDecisionReason`, `updatedInput`, `additionalContext`, `updatedToolOutput`,
      `updatedMCPToolOutput`. Other text is a failure of the hook (context for `SessionStart`
      and `UserPromptSubmit`). More than 1 MB is a failure too, except that a JSON object at its
      start holding a decision (`permissionDecision`, `decision`) denies the call (blocks the
      result after it), whatever that decision was: an answer cut short never allows. The same
      holds for a JSON answer followed by other text. A first line `{"async": true, …}` sends
      the hook to the background (see `run/4`).
    * exit 2: what it means is the event's (`CMDC.Tool.Hooks.Events.on_exit_2/1`): before a
      call denied (stderr is the reason the model reads); after: the result is replaced; after
      a failure: added as context; a prompt refused; a stop refused; a message for the user.
    * any other status, a signal or the time-out: a failure of the hook.

  A failure is a non-blocking error by default (Claude Code's rule: logged, in the result's
  `:notes`, the call goes on) and a deny with `"cmdc": {"failClosed": true}`
  (`CMDC.Tool.Hooks.Failure`).
  """

  alias CMDC.Tool.Hooks.{Events, Failure, Verdict}
  alias CMDC.Tool.JSON

  @max_output 1_000_000

  @doc """
  Runs the hook for `event` (see `CMDC.Tool.Hooks.Dispatch` for `input`). `detach`, when given,
  is called (once, in this process) if the hook says on its first stdout line that it goes on
  in the background (`{"async": true}`, as Claude Code's hooks may): the caller takes that as
  the hook's (empty) answer, and what the hook says when it ends becomes a background report
  (`CMDC.Tool.Hooks.Background`, which the caller hands it to); `run/4` then returns
  `{:detached, verdict}`.
  """
  @spec run(CMDC.Tool.Hooks.Hook.t(), atom(), map(), (() -> any()) | nil) ::
          Verdict.t() | {:detached, Verdict.t()}
  def run(hook, event, input, detach \\ nil) do
    opts = [
      stdin: JSON.encode!(stdin(hook, event, input)),
      cwd: hook.dir,
      env:
        Map.merge(hook.env, %{"CLAUDE_PROJECT_DIR" => hook.dir, "CMDC_PROJECT_DIR" => hook.dir}),
      timeout: hook.timeout_ms,
      kill_after: 1_000,
      max_output: @max_output,
      kill_strays: true,
      on_line: &first_line(&1, detach)
    ]

    verdict =
      case CMDC.Tool.Exec.run("sh", ["-c", hook.command], opts) do
        {:ok, result} -> read(hook, event, result)
        {:error, message} -> Failure.verdict(hook, event, "could not start: #{message}")
      end

    Process.delete({__MODULE__, :lines})

    if Process.delete({__MODULE__, :detached}), do: {:detached, verdict}, else: verdict
  end

  # The first stdout line may say the hook goes on in the background.
  defp first_line(line, detach) do
    if detach && Process.get({__MODULE__, :lines}, 0) == 0 && async_line?(line) do
      Process.put({__MODULE__, :detached}, true)
      detach.()
    end

    Process.put({__MODULE__, :lines}, Process.get({__MODULE__, :lines}, 0) + 1)
  end

  defp async_line?(line) do
    match?({:ok, %{"async" => true}}, JSON.decode(String.trim(line)))
  end

  defp stdin(hook, event, input) do
    ctx = input.context

    %{
      "session_id" => ctx.session_id,
      "transcript_path" => nil,
      "cwd" => ctx.working_dir || hook.dir,
      "permission_mode" => "default",
      "hook_event_name" => Events.name(event)
    }
    |> Map.merge(event_fields(event, input))
  end

  defp event_fields(:session_start, input), do: %{"source" => input.session_event}
  defp event_fields(:session_end, input), do: %{"reason" => input.session_event}
  # Agent events (`CMDC.Tool.Hooks.event/3`): the caller's fields, as given.
  defp event_fields(_event, %{fields: fields}), do: fields

  defp event_fields(event, %{call: call} = input) do
    tool = %{
      "tool_name" => call.tool,
      "tool_input" => call.args,
      "tool_use_id" => call.call_id
    }

    tool =
      case call do
        %{pending: %{} = pending} ->
          Map.put(tool, "pending_action", Map.new(pending, fn {k, v} -> {to_string(k), v} end))

        _ ->
          tool
      end

    case event do
      :pre_tool_use ->
        tool

      :post_tool_use ->
        Map.put(tool, "tool_response", response(input.result))

      :post_tool_use_failure ->
        Map.merge(tool, %{
          "tool_response" => response(input.result),
          "error" => input.result.content,
          "is_interrupt" => input.result.reason in [:cancelled, :timeout, :aborted]
        })
    end
  end

  defp response(result) do
    %{
      "content" => result.content,
      "structured" => result.structured,
      "is_error" => result.is_error
    }
  end

  ## Reading the answer

  defp read(hook, event, %{status: :timeout}),
    do:
      Failure.verdict(
        hook,
        event,
        "timed out after #{hook.timeout_ms} ms: killed with its process group"
      )

  defp read(hook, event, %{status: :cancelled}), do: Failure.verdict(hook, event, "was cancelled")

  defp read(hook, event, %{stdout_truncated: n, stdout: out}) when n > 0 do
    why = "printed more than #{@max_output} bytes on stdout"

    case leading_decision(event, out) do
      nil -> Failure.verdict(hook, event, why <> "; its answer is ignored")
      said -> oversize_decision(hook, event, said, why)
    end
  end

  defp read(hook, event, %{code: 0, stdout: out}) do
    case out |> without_async_line() |> String.trim() do
      "" -> %Verdict{hook: hook.label}
      text -> answer(hook, event, text)
    end
  end

  defp read(hook, event, %{code: 2, stderr: err}), do: blocking(hook, event, reason(err))

  defp read(hook, event, %{code: code, stderr: err}) when is_integer(code),
    do: Failure.verdict(hook, event, "exited with status #{code}: #{reason(err)}")

  defp read(hook, event, %{signal: signal}),
    do: Failure.verdict(hook, event, "was killed by signal #{signal}")

  # The decision a JSON object at the start of cut-short output holds (`nil`: none found).
  defp leading_decision(event, out) do
    with {:ok, text} <- first_object(out),
         {:ok, %{} = json} <- JSON.decode(text) do
      specific = if is_map(json["hookSpecificOutput"]), do: json["hookSpecificOutput"], else: %{}
      decision = specific["permissionDecision"] || json["decision"]

      if is_binary(decision) and (event == :pre_tool_use or decision == "block"),
        do: {decision, str(specific["permissionDecisionReason"]) || str(json["reason"])}
    else
      _ -> nil
    end
  end

  defp oversize_decision(hook, :pre_tool_use, {decision, said}, why) do
    reason =
      "#{hook.label} #{why}; the answer it began with (#{decision}" <>
        if(said, do: ": #{said}", else: "") <> ") is taken as a deny"

    %Verdict{hook: hook.label, decision: :deny, reason: reason}
  end

  defp oversize_decision(hook, _event, {_block, said}, why),
    do: %Verdict{
      hook: hook.label,
      block: said || "#{hook.label} #{why} after blocking the result"
    }

  # The first JSON object of `out` (leading whitespace skipped): its text up to the brace that
  # closes it, strings and escapes taken into account.
  defp first_object(out) do
    case String.trim_leading(out) do
      "{" <> _ = text -> scan(text, 0, 0, false)
      _ -> :error
    end
  end

  defp scan(text, at, depth, in_string) when at < byte_size(text) do
    case {:binary.at(text, at), in_string} do
      {?\\, true} -> scan(text, at + 2, depth, true)
      {?", _} -> scan(text, at + 1, depth, not in_string)
      {_, true} -> scan(text, at + 1, depth, true)
      {?{, false} -> scan(text, at + 1, depth + 1, false)
      {?}, false} when depth == 1 -> {:ok, binary_part(text, 0, at + 1)}
      {?}, false} -> scan(text, at + 1, depth - 1, false)
      _ -> scan(text, at + 1, depth, false)
    end
  end

  defp scan(_text, _at, _depth, _in_string), do: :error

  # A hook that said `{"async": true}` first answers with the first JSON line after it.
  defp without_async_line(out) do
    case String.split(out, "\n", parts: 2) do
      [first, rest] ->
        if async_line?(first),
          do: rest |> String.split("\n") |> Enum.find("", &json_object?/1),
          else: out

      _ ->
        out
    end
  end

  defp json_object?(line), do: match?({:ok, %{}}, JSON.decode(String.trim(line)))

  # What exit status 2 means is the event's (`CMDC.Tool.Hooks.Events`).
  defp blocking(hook, event, why) do
    case Events.on_exit_2(event) do
      :deny -> %Verdict{hook: hook.label, decision: :deny, reason: why}
      :block -> %Verdict{hook: hook.label, block: why}
      :context -> %Verdict{hook: hook.label, context: why}
      :message -> %Verdict{hook: hook.label, message: why}
      :error -> Failure.verdict(hook, event, "exited with status 2: #{why}")
    end
  end

  defp reason(stderr) do
    case stderr |> CMDC.Tool.Result.fit_text(10_000) |> String.trim() do
      "" -> "(no reason given on stderr)"
      text -> text
    end
  end

  defp answer(hook, event, text) do
    case JSON.decode(text) do
      {:ok, %{} = json} ->
        fields(hook, event, json)

      _ ->
        # Some events take plain text as context (`SessionStart`, `UserPromptSubmit`).
        cond do
          Events.plain_stdout(event) == :context ->
            %Verdict{hook: hook.label, context: CMDC.Tool.Result.fit_text(text, 100_000)}

          said = leading_decision(event, text) ->
            oversize_decision(hook, event, said, "printed more text after its JSON answer")

          true ->
            Failure.verdict(
              hook,
              event,
              "printed text that is not a JSON object (ignored): " <> String.slice(text, 0, 200)
            )
        end
    end
  end

  defp fields(hook, event, json) do
    specific = if is_map(json["hookSpecificOutput"]), do: json["hookSpecificOutput"], else: %{}

    {verdict, problems} =
      {%Verdict{hook: hook.label}, []}
      |> common(json)
      |> specific(event, json, specific)

    if problems == [],
      do: verdict,
      else: %{
        verdict
        | error: "ignored invalid fields: " <> Enum.join(Enum.reverse(problems), "; ")
      }
  end

  defp common({v, problems}, json) do
    {v, problems}
    |> take(json, "continue", &is_boolean/1, fn v, c ->
      if c, do: v, else: %{v | stop: str(json["stopReason"]) || "a hook stopped the turn"}
    end)
    |> take(json, "systemMessage", &is_binary/1, &%{&1 | message: &2})
    |> take(json, "suppressOutput", &is_boolean/1, fn v, _ -> v end)
  end

  @decisions %{"allow" => :allow, "deny" => :deny, "ask" => :ask, "defer" => :defer}

  defp specific(acc, :pre_tool_use, json, s) do
    acc
    # The older top-level form: "approve" / "block".
    |> take(json, "decision", &(&1 in ["approve", "block"]), fn v, d ->
      %{v | decision: if(d == "approve", do: :allow, else: :deny), reason: str(json["reason"])}
    end)
    |> take(s, "permissionDecision", &Map.has_key?(@decisions, &1), fn v, d ->
      %{v | decision: @decisions[d], reason: str(s["permissionDecisionReason"])}
    end)
    |> take(s, "updatedInput", &is_map/1, &%{&1 | args: &2})
    |> take(s, "additionalContext", &is_binary/1, &%{&1 | context: &2})
  end

  defp specific(acc, :post_tool_use, json, s) do
    acc
    |> take(json, "decision", &(&1 == "block"), fn v, _ ->
      %{v | block: str(json["reason"]) || "blocked by a hook"}
    end)
    |> take(s, "additionalContext", &is_binary/1, &%{&1 | context: &2})
    |> take(s, "updatedToolOutput", &(is_binary(&1) or is_map(&1)), &%{&1 | rewrite: output(&2)})
    |> take(s, "updatedMCPToolOutput", &mcp_output?/1, &%{&1 | rewrite: output(&2)})
  end

  # Agent events whose `decision: "block"` refuses the prompt or keeps the agent going.
  defp specific(acc, event, json, s) when event in [:user_prompt_submit, :stop, :subagent_stop] do
    acc
    |> take(json, "decision", &(&1 in ["block", "approve"]), fn v, d ->
      if d == "block", do: %{v | block: str(json["reason"]) || "blocked by a hook"}, else: v
    end)
    |> take(s, "additionalContext", &is_binary/1, &%{&1 | context: &2})
  end

  defp specific(acc, _event, _json, s),
    do: take(acc, s, "additionalContext", &is_binary/1, &%{&1 | context: &2})

  # A field that is absent is skipped; present with a wrong type, named in the problems.
  defp take({v, problems}, map, key, valid?, apply) do
    case Map.fetch(map, key) do
      :error ->
        {v, problems}

      {:ok, value} ->
        if valid?.(value),
          do: {apply.(v, value), problems},
          else: {v, ["#{key}: #{inspect(value, limit: 5)}" | problems]}
    end
  end

  defp str(value) when is_binary(value), do: value
  defp str(_), do: nil

  defp mcp_output?(%{"content" => content}) when is_list(content), do: true
  defp mcp_output?(_), do: false

  # A text, an MCP CallToolResult (`content` items, `structuredContent`, `isError`), or another
  # object (the structured result).
  defp output(text) when is_binary(text), do: %{content: text}

  defp output(%{"content" => items} = mcp) when is_list(items) do
    text = Enum.map_join(items, "\n", &item_text/1)
    base = %{content: text}

    base =
      if is_map(mcp["structuredContent"]),
        do: Map.put(base, :structured, mcp["structuredContent"]),
        else: base

    if is_boolean(mcp["isError"]), do: Map.put(base, :is_error, mcp["isError"]), else: base
  end

  defp output(map), do: %{content: JSON.encode!(map), structured: map}

  defp item_text(%{"type" => "text", "text" => text}) when is_binary(text), do: text
  defp item_text(item), do: JSON.encode!(item)
end
