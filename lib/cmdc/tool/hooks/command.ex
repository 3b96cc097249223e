defmodule CMDC.Tool.Hooks.Command do
  @moduledoc """
  Runs one command hook (Claude Code's format) and reads its answer.

  The command runs through `sh -c` on the native exec layer (`CMDC.Tool.Exec`), in the project
  directory, with `CLAUDE_PROJECT_DIR` and `CMDC_PROJECT_DIR` set to it, the event as JSON on
  stdin (`session_id`, `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`,
  `tool_name`, `tool_input`, `tool_use_id`; `tool_response` after a call; `error` and
  `is_interrupt` after a failed call; `source` / `reason` for session events; `pending_action`
  (`id`, `label`, `details`, `tool`) for a `resolve` call). Past its `timeout` it is killed with
  its whole process group; whether it ends or is killed, every process it started and left
  running is killed too, even a daemon that left its group (`setsid daemon &`: the exec layer's
  `:kill_strays`).

    * exit 0: stdout, when not empty, must be a JSON object: `continue` (`false` stops the turn,
      with `stopReason`), `systemMessage` (for the user), `suppressOutput`, `decision` +
      `reason`, and `hookSpecificOutput` with `permissionDecision` (`allow`/`deny`/`ask`/`defer`),
      `permissionDecisionReason`, `updatedInput`, `additionalContext`, `updatedToolOutput`,
      `updatedMCPToolOutput`. Other text is a failure of the hook. More than 1 MB is a failure
      too, except that a JSON object at its start holding a decision (`permissionDecision`,
      `decision`) denies the call (blocks the result after it), whatever that decision was: an
      answer cut short never allows. The same holds for a JSON answer followed by other text.
    * exit 2: blocks; stderr is the reason the model reads (before a call: denied; after: the
      result is replaced; after a failure: added as context).
    * any other status, a signal or the time-out: a failure of the hook.

  A failure is a non-blocking error by default (Claude Code's rule: logged, in the result's
  `:notes`, the call goes on) and a deny with `"cmdc": {"failClosed": true}`
  (`CMDC.Tool.Hooks.Failure`).
  """

  alias CMDC.Tool.Hooks.{Failure, Verdict}
  alias CMDC.Tool.JSON

  @max_output 1_000_000
  @names %{
    pre_tool_use: "PreToolUse",
    post_tool_use: "PostToolUse",
    post_tool_use_failure: "PostToolUseFailure",
    session_start: "SessionStart",
    session_end: "SessionEnd"
  }

  @doc "The event's name in settings files (`:pre_tool_use` → `\"PreToolUse\"`)."
  @spec event_name(atom()) :: String.t()
  def event_name(event), do: Map.fetch!(@names, event)

  @doc "The events by their settings-file name."
  @spec events() :: %{String.t() => atom()}
  def events, do: Map.new(@names, fn {k, v} -> {v, k} end)

  @doc "Runs the hook for `event` (see `CMDC.Tool.Hooks.Dispatch` for `input`)."
  @spec run(CMDC.Tool.Hooks.Hook.t(), atom(), map()) :: Verdict.t()
  def run(hook, event, input) do
    opts = [
      stdin: JSON.encode!(stdin(hook, event, input)),
      cwd: hook.dir,
      env: %{"CLAUDE_PROJECT_DIR" => hook.dir, "CMDC_PROJECT_DIR" => hook.dir},
      timeout: hook.timeout_ms,
      kill_after: 1_000,
      max_output: @max_output,
      kill_strays: true
    ]

    case CMDC.Tool.Exec.run("sh", ["-c", hook.command], opts) do
      {:ok, result} -> read(hook, event, result)
      {:error, message} -> Failure.verdict(hook, event, "could not start: #{message}")
    end
  end

  defp stdin(hook, event, input) do
    ctx = input.context

    %{
      "session_id" => ctx.session_id,
      "transcript_path" => nil,
      "cwd" => ctx.working_dir || hook.dir,
      "permission_mode" => "default",
      "hook_event_name" => event_name(event)
    }
    |> Map.merge(event_fields(event, input))
  end

  defp event_fields(:session_start, input), do: %{"source" => input.session_event}
  defp event_fields(:session_end, input), do: %{"reason" => input.session_event}

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
    case String.trim(out) do
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

  defp blocking(hook, :pre_tool_use, why),
    do: %Verdict{hook: hook.label, decision: :deny, reason: why}

  defp blocking(hook, :post_tool_use, why), do: %Verdict{hook: hook.label, block: why}
  defp blocking(hook, :post_tool_use_failure, why), do: %Verdict{hook: hook.label, context: why}

  defp blocking(hook, event, why),
    do: Failure.verdict(hook, event, "exited with status 2: #{why}")

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
        case leading_decision(event, text) do
          nil ->
            Failure.verdict(
              hook,
              event,
              "printed text that is not a JSON object (ignored): " <> String.slice(text, 0, 200)
            )

          said ->
            oversize_decision(hook, event, said, "printed more text after its JSON answer")
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
