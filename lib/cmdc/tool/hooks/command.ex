defmodule CMDC.Tool.Hooks.Command do
  @moduledoc """
  Runs one command hook (Claude Code's format) and reads its answer.

  The command runs through `sh -c` on the native exec layer (`CMDC.Tool.Exec`), in the project
  directory, with `CLAUDE_PROJECT_DIR` and `CMDC_PROJECT_DIR` set to it, the event as JSON on
  stdin (`session_id`, `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`,
  `tool_name`, `tool_input`, `tool_use_id`; `tool_response` after a call; `error` and
  `is_interrupt` after a failed call; `source` / `reason` for session events; `pending_action`
  (`id`, `label`, `details`, `tool`) for a `resolve` call). Past its
  `timeout` it is killed with its whole process group.

    * exit 0: stdout, when not empty, must be a JSON object: `continue` (`false` stops the turn,
      with `stopReason`), `systemMessage` (for the user), `suppressOutput`, `decision` +
      `reason`, and `hookSpecificOutput` with `permissionDecision` (`allow`/`deny`/`ask`/`defer`),
      `permissionDecisionReason`, `updatedInput`, `additionalContext`, `updatedToolOutput`,
      `updatedMCPToolOutput`. Other text, or more than 1 MB, is a non-blocking error.
    * exit 2: blocks; stderr is the reason the model reads (before a call: denied; after: the
      result is replaced; after a failure: added as context).
    * any other status, a signal or the time-out: a non-blocking error, logged with the hook's
      file and command; the call goes on.
  """

  require Logger

  alias CMDC.Tool.Hooks.Verdict
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
      max_output: @max_output
    ]

    case CMDC.Tool.Exec.run("sh", ["-c", hook.command], opts) do
      {:ok, result} -> read(hook, event, result)
      {:error, message} -> error(hook, "could not start: #{message}")
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

  defp read(hook, _event, %{status: :timeout}),
    do: error(hook, "timed out after #{hook.timeout_ms} ms: killed with its process group")

  defp read(hook, _event, %{status: :cancelled}), do: error(hook, "was cancelled")

  defp read(hook, _event, %{stdout_truncated: n}) when n > 0,
    do: error(hook, "printed more than #{@max_output} bytes on stdout; its answer is ignored")

  defp read(hook, event, %{code: 0, stdout: out}) do
    case String.trim(out) do
      "" -> %Verdict{hook: hook.label}
      text -> answer(hook, event, text)
    end
  end

  defp read(hook, event, %{code: 2, stderr: err}), do: blocking(hook, event, reason(err))

  defp read(hook, _event, %{code: code, stderr: err}) when is_integer(code),
    do: error(hook, "exited with status #{code}: #{reason(err)}")

  defp read(hook, _event, %{signal: signal}), do: error(hook, "was killed by signal #{signal}")

  defp blocking(hook, :pre_tool_use, why),
    do: %Verdict{hook: hook.label, decision: :deny, reason: why}

  defp blocking(hook, :post_tool_use, why), do: %Verdict{hook: hook.label, block: why}
  defp blocking(hook, :post_tool_use_failure, why), do: %Verdict{hook: hook.label, context: why}
  defp blocking(hook, _session, why), do: error(hook, "exited with status 2: #{why}")

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
        error(
          hook,
          "printed text that is not a JSON object (ignored): " <> String.slice(text, 0, 200)
        )
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

  defp error(hook, why) do
    Logger.warning("cmdc_tool: #{hook.label} #{why}", cmdc_hook_error: true)
    %Verdict{hook: hook.label, error: why}
  end
end
