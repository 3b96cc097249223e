defmodule CMDC.Tool.Hooks.Hook do
  @moduledoc """
  One hook, normalized: an Elixir hook (a module or functions) or a command hook (from a
  settings file, `CMDC.Tool.Hooks.Config`).

    * `:kind` - `:elixir` or `:command`.
    * `:label` - names the hook (and its file) in every error and note.
    * `:events` - the events it takes (`CMDC.Tool.Hooks.Events`: `:pre_tool_use`,
      `:post_tool_use`, `:post_tool_use_failure`, `:session_start`, `:session_end`, and for
      command hooks the agent events such as `:user_prompt_submit` and `:stop`).
    * `:matcher` - `CMDC.Tool.Hooks.Matcher` (tool names; source or reason for session events).
    * `:timeout_ms` - how long it may take (Elixir default 5,000; command default 60,000).
    * Elixir: `:funs` (`%{before_call: fun/2, after_call: fun/3, on_session: fun/2}`).
    * Command: `:command` (run by `sh -c`), `:dir` (the project directory), `:source` (the file),
      `:event_name` (as written), `:active` (`false` for an untrusted project's file),
      `:fail_closed` (its failures deny rather than let the call go on: `"cmdc": {"failClosed":
      true}` in the settings file, see `CMDC.Tool.Hooks.Failure`), `:condition` (its `if`,
      `CMDC.Tool.Hooks.Condition`), `:async` (`nil`, `:async` or `:rewake`: run in the
      background, `CMDC.Tool.Hooks.Background`), `:rewake` (its `rewakeMessage` and
      `rewakeSummary`), `:plugin` (the Claude Code plugin it came from, `name@marketplace`) and
      `:env` (more environment, `CLAUDE_PLUGIN_ROOT` for a plugin's).

  An Elixir hook is given as a module exporting any of `before_call/2`, `after_call/3`,
  `on_session/2` (and optionally `hook_options/0` with `:match`, `:timeout`, `:name`), as
  `{module, options}`, or as a keyword list or map of those functions and options.

      iex> {:ok, hook} = CMDC.Tool.Hooks.Hook.new(before_call: fn _call, _ctx -> :ok end, match: "echo")
      iex> {hook.kind, hook.events, CMDC.Tool.Hooks.Hook.match(hook, :pre_tool_use, ["echo"])}
      {:elixir, [:pre_tool_use], true}
  """

  alias CMDC.Tool.Hooks.{Condition, Matcher}

  @elixir_timeout 5_000

  defstruct kind: :elixir,
            label: nil,
            events: [],
            matcher: :all,
            timeout_ms: @elixir_timeout,
            funs: %{},
            command: nil,
            dir: nil,
            source: nil,
            event_name: nil,
            active: true,
            fail_closed: false,
            condition: nil,
            async: nil,
            rewake: %{},
            plugin: nil,
            env: %{}

  @type event :: CMDC.Tool.Hooks.Events.event()
  @type t :: %__MODULE__{}

  @callbacks [before_call: 2, after_call: 3, on_session: 2]
  @options [:before_call, :after_call, :on_session, :match, :timeout, :name]

  @doc "Normalizes a hook given in any of the accepted forms: `{:ok, hook}` or `{:error, message}`."
  @spec new(term()) :: {:ok, t()} | {:error, String.t()}
  def new(%__MODULE__{} = hook), do: {:ok, hook}

  def new({module, opts}) when is_atom(module) and is_list(opts) do
    if Code.ensure_loaded?(module) do
      funs =
        for {name, arity} <- @callbacks, function_exported?(module, name, arity), into: %{} do
          {name, Function.capture(module, name, arity)}
        end

      own = if function_exported?(module, :hook_options, 0), do: module.hook_options(), else: []
      build(funs, Keyword.merge([name: inspect(module)], Keyword.merge(own, opts)))
    else
      {:error, "the hook module #{inspect(module)} does not exist"}
    end
  end

  def new(module) when is_atom(module), do: new({module, []})

  def new(spec) when is_list(spec) or is_map(spec) do
    spec = Enum.to_list(spec)

    cond do
      not Enum.all?(spec, &match?({k, _} when is_atom(k), &1)) ->
        {:error, "a hook given as a list or map needs atom keys (got #{inspect(spec, limit: 5)})"}

      (unknown = Keyword.keys(spec) -- @options) != [] ->
        {:error,
         "unknown hook option #{inspect(hd(unknown))}; the options are #{inspect(@options)}"}

      true ->
        functions(spec)
    end
  end

  def new(other), do: {:error, "not a hook: #{inspect(other, limit: 5)}"}

  defp functions(spec) do
    funs = for {name, arity} <- @callbacks, fun = spec[name], into: %{}, do: {name, {fun, arity}}

    case Enum.find(funs, fn {_, {fun, arity}} -> not is_function(fun, arity) end) do
      {name, {_, arity}} -> {:error, "the hook's #{name} must be a function of arity #{arity}"}
      nil -> build(Map.new(funs, fn {k, {f, _}} -> {k, f} end), spec)
    end
  end

  defp build(funs, opts) when funs == %{} do
    {:error,
     "the hook #{opts[:name] || "(unnamed)"} has none of before_call/2, after_call/3, on_session/2"}
  end

  defp build(funs, opts) do
    timeout = Keyword.get(opts, :timeout, @elixir_timeout)

    with {:ok, matcher} <- Matcher.parse(opts[:match]),
         true <-
           (is_integer(timeout) and timeout > 0) ||
             {:error, "timeout must be a positive integer (ms)"} do
      {:ok,
       %__MODULE__{
         kind: :elixir,
         label: "hook #{opts[:name] || "(elixir)"}",
         events: events(funs),
         matcher: matcher,
         timeout_ms: timeout,
         funs: funs
       }}
    end
  end

  defp events(funs) do
    Enum.flat_map(funs, fn
      {:before_call, _} -> [:pre_tool_use]
      {:after_call, _} -> [:post_tool_use, :post_tool_use_failure]
      {:on_session, _} -> [:session_start, :session_end]
    end)
  end

  @doc """
  Whether the hook runs for `event` given the tool's names (or a session event's source):
  `true`, `false`, or `{:error, message}` when its matcher cannot be run (a failure of the hook,
  see `CMDC.Tool.Hooks.Failure`: never taken for "no match").
  """
  @spec match(t(), event(), [String.t()]) :: boolean() | {:error, String.t()}
  def match(%__MODULE__{active: active, events: events, matcher: matcher}, event, names) do
    if active and event in events do
      case Matcher.match(matcher, names) do
        {:ok, matched} -> matched
        {:error, message} -> {:error, message}
      end
    else
      false
    end
  end

  @doc """
  Whether the hook's `if` condition holds for a call (`args` its arguments). Only tool events
  read it (`CMDC.Tool.Hooks.Condition`); other events ignore it, as Claude Code does.
  """
  @spec condition?(t(), event(), [String.t()], map() | nil) :: boolean()
  def condition?(%__MODULE__{condition: nil}, _event, _names, _args), do: true

  def condition?(%__MODULE__{condition: condition}, event, names, args) do
    CMDC.Tool.Hooks.Events.kind(event) != :tool or Condition.match?(condition, names, args || %{})
  end
end
