defmodule CMDC.Tool.Hooks do
  @moduledoc """
  Hooks: code that stands between the model and every tool call. Two kinds share one model:

    * **Elixir hooks** — a module with `@behaviour CMDC.Tool.Hooks` (any of the callbacks), or
      functions given as a keyword list (`before_call:`, `after_call:`, `on_session:`, with
      `match:`, `timeout:` ms (default 5,000) and `name:`).
    * **Command hooks** in Claude Code's format, read from `.claude/settings.json` and the other
      settings files by `CMDC.Tool.Hooks.Config` (`load/1` here).

  ## Where hooks apply

  Hooks are found per call, in this order (the order of "last rewrite wins"): the command
  hooks of the settings files (the user's, and the project's once trusted: loaded once,
  reloaded when a file changes, see `CMDC.Tool.Hooks.Settings`; `config :cmdc_tool,
  settings_hooks: false` turns them off), hooks attached `:global`ly on the node, to the
  call's registry, to its session (`{:session, id}`), then the runner's `:hooks` option.
  `CMDC.Tool.Runner` applies them, so every path that runs calls through it does too: your
  agent's `Runner.run/4`, `mix cmdc.tools call`, the MCP server, and a cluster call (on the
  node that executes, with that node's hooks).

  ## Before a call (`PreToolUse`, `c:before_call/2`)

  After the arguments are validated: each matching hook may allow, deny (with a reason), ask,
  rewrite the arguments, or add context for the model. Decisions combine `deny > defer > ask >
  allow`: `deny` refuses the call (`reason: :denied`), `ask` goes to the approver of
  `CMDC.Tool.Runner` (headless: denied), `allow` skips an `:ask_once`/`:ask_always` prompt (a
  `:deny` policy still refuses), `defer` leaves it to the tool's policy. For rewritten arguments
  the last hook wins, and they are **validated again** against the tool's schema: invalid ones
  refuse the call with the validation error.

  ## After a call (`PostToolUse` / `PostToolUseFailure`, `c:after_call/3`)

  Each matching hook may rewrite the result (content, structured result, `is_error`: the last
  hook wins), add context, or block it with a reason (the first block wins: the model gets an
  error result, `reason: :blocked`, never the content).

  Context from any hook is appended to the result's content. Messages for the user
  (`systemMessage`) and non-blocking hook errors are in the result's `:notes`. A hook asking to
  stop (`continue: false`, or `stop:`) ends the call with `:abort` set, which stops
  `CMDC.Tool.Runner.run_many/4`.

  ## Failures

  An Elixir hook that raises, exits, answers something else or runs past its time-out fails
  safe: its call is denied (before) or its result blocked (after), with a message naming the
  hook; the runner never crashes. A command hook's failure (exit status other than 0 and 2, a
  signal, its time-out, output that is not JSON or over 1 MB, a matcher that cannot be run) is a
  non-blocking error in `:notes` and the log, as Claude Code treats it, unless the hook fails
  closed (`"cmdc": {"failClosed": true}`, or the runner's `hooks_fail_closed: true`): then it
  denies as an Elixir hook does. Output over 1 MB that begins with a decision denies in both
  modes. See `CMDC.Tool.Hooks.Failure` and the table in `docs/HOOKS.md`.

  ## Session events (`SessionStart`, `SessionEnd`, `c:on_session/2`)

  `CMDC.Tool.Runner.session_event/4` tells tools and hooks: `:start` runs `SessionStart`
  (source `"startup"`), `:shutdown` runs `SessionEnd` (reason `"other"`), the other events
  (`:switch`, `:branch`, `:tree`) reach Elixir hooks only.

      iex> hook = [name: "no_rm", match: "echo",
      ...>   before_call: fn %{args: args}, _ctx ->
      ...>     if args["text"] =~ "rm -rf", do: {:deny, "not on my watch"}, else: :ok end]
      iex> call = %{id: "c1", name: "echo", arguments: %{"text" => "rm -rf /"}}
      iex> result = CMDC.Tool.Runner.run([CMDC.Tool.Examples.Echo], call, %CMDC.Context{}, hooks: [hook])
      iex> {result.reason, result.content}
      {:denied, "echo was denied by hook no_rm: not on my watch"}

  ## Agent events (`UserPromptSubmit`, `Stop`, `SubagentStop`, `PreCompact`, `Notification`)

  An agent loop offers the events of its own life to command hooks with `event/3`, and acts on
  the outcome: a blocked `UserPromptSubmit` is a prompt not to send (the reason is for the
  user); a blocked `Stop` means the agent goes on (the reason is for the model); context goes
  to the model. Hooks marked `async`/`asyncRewake` run in the background
  (`CMDC.Tool.Hooks.Background`): their reports come with the next result or event of the
  session, or as messages to a subscriber.

  ## Errors

  `new/1` and `attach/2`: `{:error, message}` naming the bad hook. `load/1` never fails
  (see `CMDC.Tool.Hooks.Config`). `event/3`: `{:error, message}` for an event it does not offer
  or a missing field.
  """

  alias CMDC.Tool.Hooks.{Background, Config, Dispatch, Events, Hook, Settings, Store, Verdict}

  @typedoc "A call as Elixir hooks see it."
  @type call :: %{tool: String.t(), args: map(), call_id: term(), module: module()}

  @typedoc "Where hooks are attached."
  @type scope :: :global | CMDC.Tool.Registry.t() | {:session, term()}

  @doc "Before a call (after validation); see the moduledoc for the answers."
  @callback before_call(call(), CMDC.Context.t()) :: term()
  @doc "After a call; see the moduledoc for the answers."
  @callback after_call(call(), CMDC.Tool.Result.t(), CMDC.Context.t()) :: term()
  @doc "At a session event (`:start`, `:shutdown`, ...); the answer is ignored."
  @callback on_session(atom(), CMDC.Context.t()) :: term()
  @optional_callbacks before_call: 2, after_call: 3, on_session: 2

  @doc """
  Normalizes hooks (modules, `{module, opts}`, keyword lists, `CMDC.Tool.Hooks.Hook` structs):
  `{:ok, hooks}` or the first `{:error, message}`.

      iex> {:ok, [hook]} = CMDC.Tool.Hooks.new([[name: "x", after_call: fn _, _, _ -> :ok end]])
      iex> hook.events
      [:post_tool_use, :post_tool_use_failure]
      iex> CMDC.Tool.Hooks.new([[before_call: :nope]])
      {:error, "the hook's before_call must be a function of arity 2"}
  """
  @spec new([term()]) :: {:ok, [Hook.t()]} | {:error, String.t()}
  def new(specs) when is_list(specs) do
    Enum.reduce_while(specs, {:ok, []}, fn spec, {:ok, acc} ->
      case Hook.new(spec) do
        {:ok, hook} -> {:cont, {:ok, [hook | acc]}}
        {:error, _} = error -> {:halt, error}
      end
    end)
    |> case do
      {:ok, hooks} -> {:ok, Enum.reverse(hooks)}
      error -> error
    end
  end

  @doc """
  Adds hooks to a scope (`:global`, a registry, `{:session, id}`), after those already there.
  Session hooks are removed by `CMDC.Tool.Runner.session_event/4` at `:shutdown`.
  """
  @spec attach(scope(), [term()]) :: :ok | {:error, String.t()}
  def attach(scope, specs) do
    with {:ok, hooks} <- new(specs) do
      key = key(scope)
      Store.put(key, Store.get(key) ++ hooks)
    end
  end

  @doc "Removes every hook of a scope."
  @spec detach(scope()) :: :ok
  def detach(scope), do: Store.delete(key(scope))

  @doc "The hooks attached to a scope."
  @spec attached(scope()) :: [Hook.t()]
  def attached(scope), do: Store.get(key(scope))

  @doc "Reads command hooks from the settings files (`CMDC.Tool.Hooks.Config.load/1`)."
  @spec load(keyword()) :: Config.t()
  defdelegate load(opts \\ []), to: Config

  @typedoc "What the hooks of an agent event said (see `event/3`)."
  @type outcome :: %{
          blocked: String.t() | nil,
          blocked_by: String.t() | nil,
          stop: String.t() | nil,
          context: [String.t()],
          messages: [String.t()],
          errors: [String.t()],
          reports: [Background.report()]
        }

  @event_options [:hooks, :tools, :context, :settings_hooks]

  @doc """
  Offers an agent event to the command hooks that take it, and returns what they said.

  `event`: `:user_prompt_submit` (fields: `prompt`), `:stop` and `:subagent_stop`
  (`stop_hook_active`: `true` when the agent goes on because of a Stop hook), `:pre_compact`
  (`trigger`: `"manual"` or `"auto"`, `custom_instructions`), `:notification` (`message`,
  `notification_type`), `:session_start` (`source`) and `:session_end` (`reason`). The fields
  (atom or string keys) are sent to each hook on stdin beside `session_id`, `cwd`,
  `hook_event_name`, …; a matcher matches the field `CMDC.Tool.Hooks.Events.matcher_field/1`
  names (`trigger`, `notification_type`, `source`, `reason`; the others match every hook).

  The hooks are those a runner call would have: the settings files' and enabled plugins' (by
  default, as `CMDC.Tool.Hooks.Settings` reads them; `settings_hooks: false` for none, or the
  options of `CMDC.Tool.Hooks.Config.load/1`), hooks attached `:global`ly, to the registry and
  to the session, then `:hooks`. Options: `:hooks` (more hooks), `:tools` (a registry),
  `:context` (a `CMDC.Context`: its `session_id` and `working_dir`), `:settings_hooks`.

  The outcome: `blocked` (and `blocked_by`) when a hook exited with status 2 or answered
  `decision: "block"` (a `UserPromptSubmit`: do not send the prompt; a `Stop`: go on, the
  reason is for the model), `stop` (`continue: false`), `context` (for the model), `messages`
  (for the user), `errors` (hooks that failed: non-blocking), `reports` (what background hooks
  of the session reported since).

      iex> hook = %CMDC.Tool.Hooks.Hook{kind: :command, events: [:user_prompt_submit],
      ...>   command: "echo 'the user is on call this week'", dir: "/tmp", label: "oncall"}
      iex> opts = [hooks: [hook], settings_hooks: false]
      iex> {:ok, outcome} = CMDC.Tool.Hooks.event(:user_prompt_submit, %{prompt: "hi"}, opts)
      iex> {outcome.blocked, outcome.context}
      {nil, ["the user is on call this week"]}
      iex> CMDC.Tool.Hooks.event(:user_prompt_submit, %{}, opts)
      {:error, ~s(the user_prompt_submit event needs the field "prompt")}
  """
  @spec event(Events.event(), map(), keyword()) :: {:ok, outcome()} | {:error, String.t()}
  def event(event, fields \\ %{}, opts \\ []) when is_map(fields) and is_list(opts) do
    CMDC.Tool.Options.check!(opts, @event_options, "CMDC.Tool.Hooks.event/3")
    context = Keyword.get(opts, :context) || %CMDC.Context{}
    fields = Map.new(fields, fn {k, v} -> {to_string(k), v} end)

    with :ok <- offered(event),
         :ok <- required(event, fields),
         hooks when is_list(hooks) <-
           for_call(
             Keyword.get(opts, :tools),
             context,
             Keyword.take(opts, [:hooks, :settings_hooks])
           ) do
      # An event without a matcher field ignores matchers, as in Claude Code.
      {names, commands} =
        case Events.matcher_field(event) do
          nil -> {[], for(h <- hooks, h.kind == :command, do: %{h | matcher: :all})}
          field -> {[to_string(fields[field])], Enum.filter(hooks, &(&1.kind == :command))}
        end

      input = %{
        context: context,
        fields: fields,
        session_event: fields["source"] || fields["reason"]
      }

      case Dispatch.run(commands, event, names, input) do
        :cancelled -> {:error, "cancelled"}
        verdicts -> {:ok, outcome(Verdict.combine(verdicts), context)}
      end
    end
  end

  defp offered(event) do
    if event in Events.all() and Events.kind(event) != :tool,
      do: :ok,
      else:
        {:error,
         "#{inspect(event)} is not an event event/3 offers (it offers " <>
           Enum.map_join(Events.of_kind(:agent) ++ Events.of_kind(:session), ", ", &inspect/1) <>
           "; tool events run through CMDC.Tool.Runner)"}
  end

  defp required(event, fields) do
    case Enum.find(Events.required(event), &(not Map.has_key?(fields, &1))) do
      nil -> :ok
      field -> {:error, "the #{event} event needs the field #{inspect(field)}"}
    end
  end

  defp outcome(combined, context) do
    %{
      blocked: combined.block && elem(combined.block, 1),
      blocked_by: combined.block && elem(combined.block, 0),
      stop: combined.stop && elem(combined.stop, 1),
      context: combined.context,
      messages: combined.messages,
      errors: combined.errors,
      reports: Background.take(context.session_id)
    }
  end

  @doc false
  # The hooks of one call, in order: the settings files' (`CMDC.Tool.Hooks.Settings`), global,
  # registry, session, the runner's `:hooks`; `{:error, message}` when the `:hooks` option
  # holds a bad hook.
  def for_call(tools, context, opts) do
    registry =
      case tools do
        %CMDC.Tool.Registry{} -> Store.get(key(tools))
        _ -> []
      end

    session = if context.session_id, do: Store.get({:session, context.session_id}), else: []

    with {:ok, settings} <- Settings.for_run(Keyword.get(opts, :settings_hooks)) do
      case new(Keyword.get(opts, :hooks, [])) do
        {:ok, own} ->
          hooks = settings ++ Store.get(:global) ++ registry ++ session ++ own
          if opts[:hooks_fail_closed] == true, do: Config.close(hooks), else: hooks

        {:error, message} ->
          {:error, "invalid :hooks option: " <> message}
      end
    end
  end

  defp key(%CMDC.Tool.Registry{id: id}), do: {:registry, id}
  defp key(:global), do: :global
  defp key({:session, _} = scope), do: scope
end
