defmodule CMDC.Tool.Hooks.Events do
  @moduledoc """
  The one table of hook events: every pass (loading settings files, matching, running command
  hooks, reading their answers, listing them) reads it, so an event is added in one row.

  Each row: the event's atom, its name in settings files, its kind (`:tool` events run around
  a call by `CMDC.Tool.Runner`; `:session` events by `CMDC.Tool.Runner.session_event/4`;
  `:agent` events are offered to agent loops by `CMDC.Tool.Hooks.event/3`), what a matcher
  matches (the tool's names, or a field of the event), the fields the caller must give, what an
  exit status 2 means (Claude Code's rule), and whether plain text on stdout is context.

      iex> CMDC.Tool.Hooks.Events.fetch("UserPromptSubmit")
      {:ok, :user_prompt_submit}
      iex> CMDC.Tool.Hooks.Events.fetch("PermissionRequest")
      {:not_run, "PermissionRequest"}
      iex> CMDC.Tool.Hooks.Events.name(:pre_compact)
      "PreCompact"
  """

  @typedoc "An event this library runs."
  @type event ::
          :session_start
          | :user_prompt_submit
          | :pre_tool_use
          | :post_tool_use
          | :post_tool_use_failure
          | :notification
          | :pre_compact
          | :stop
          | :subagent_stop
          | :session_end

  # {event, settings name, kind, matcher reads, required fields, exit 2, plain stdout}
  # exit 2: :deny (the call is refused), :block (the result is withheld; for agent events:
  # the prompt is refused, or the agent must go on), :context (stderr goes to the model),
  # :message (stderr goes to the user), :error (a non-blocking error).
  @events [
    {:session_start, "SessionStart", :session, "source", [], :error, :context},
    {:user_prompt_submit, "UserPromptSubmit", :agent, nil, ["prompt"], :block, :context},
    {:pre_tool_use, "PreToolUse", :tool, :tool, [], :deny, :error},
    {:post_tool_use, "PostToolUse", :tool, :tool, [], :block, :error},
    {:post_tool_use_failure, "PostToolUseFailure", :tool, :tool, [], :context, :error},
    {:notification, "Notification", :agent, "notification_type", ["message"], :message, :error},
    {:pre_compact, "PreCompact", :agent, "trigger", ["trigger"], :message, :error},
    {:stop, "Stop", :agent, nil, [], :block, :error},
    {:subagent_stop, "SubagentStop", :agent, nil, [], :block, :error},
    {:session_end, "SessionEnd", :session, "reason", [], :error, :error}
  ]

  # Claude Code events this library knows and does not run: their hooks are listed as not
  # run, not as a mistake in the file.
  @not_run ~w(PermissionRequest PermissionDenied SubagentStart Setup StopFailure TaskCreated
              TaskCompleted FileChanged CwdChanged ConfigChange InstructionsLoaded WorktreeCreate
              WorktreeRemove TeammateIdle Elicitation ElicitationResult PostCompact)

  @by_atom Map.new(@events, fn {e, _, _, _, _, _, _} = row -> {e, row} end)
  @by_name Map.new(@events, fn {e, name, _, _, _, _, _} -> {name, e} end)

  @doc "Every event this library runs, in the order hooks of one file are listed."
  @spec all() :: [event()]
  def all, do: Enum.map(@events, &elem(&1, 0))

  @doc "The settings-file names of the events this library runs, in order."
  @spec names() :: [String.t()]
  def names, do: Enum.map(@events, &elem(&1, 1))

  @doc "The event's name in settings files."
  @spec name(event()) :: String.t()
  def name(event), do: elem(Map.fetch!(@by_atom, event), 1)

  @doc """
  The event a settings-file name stands for: `{:ok, event}`, `{:not_run, name}` for a Claude
  Code event this library does not run, `:error` for a name nobody defines.
  """
  @spec fetch(String.t()) :: {:ok, event()} | {:not_run, String.t()} | :error
  def fetch(name) do
    case Map.fetch(@by_name, name) do
      {:ok, event} -> {:ok, event}
      :error -> if name in @not_run, do: {:not_run, name}, else: :error
    end
  end

  @doc "`:tool`, `:session` or `:agent`."
  @spec kind(event()) :: :tool | :session | :agent
  def kind(event), do: elem(Map.fetch!(@by_atom, event), 2)

  @doc "The events of a kind."
  @spec of_kind(:tool | :session | :agent) :: [event()]
  def of_kind(kind), do: for({e, _, ^kind, _, _, _, _} <- @events, do: e)

  @doc "What the matcher of a non-tool event matches: a field of its input (`nil`: everything)."
  @spec matcher_field(event()) :: String.t() | nil
  def matcher_field(event) do
    case elem(Map.fetch!(@by_atom, event), 3) do
      :tool -> nil
      field -> field
    end
  end

  @doc "The fields a caller of `CMDC.Tool.Hooks.event/3` must give."
  @spec required(event()) :: [String.t()]
  def required(event), do: elem(Map.fetch!(@by_atom, event), 4)

  @doc "What exit status 2 means for the event (see the table in the source)."
  @spec on_exit_2(event()) :: :deny | :block | :context | :message | :error
  def on_exit_2(event), do: elem(Map.fetch!(@by_atom, event), 5)

  @doc "Whether plain text (not JSON) on stdout is context for the model (`:context`) or an error."
  @spec plain_stdout(event()) :: :context | :error
  def plain_stdout(event), do: elem(Map.fetch!(@by_atom, event), 6)

  @doc "The position of a settings-file event name in `names/0` (unknown names last)."
  @spec order(String.t()) :: non_neg_integer()
  def order(name), do: Enum.find_index(names(), &(&1 == name)) || length(@events)
end
