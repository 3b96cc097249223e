defmodule CMDC.Tool.Runner do
  @moduledoc """
  Runs a model's tool call and always ends in a `CMDC.Tool.Result` the model can read: never an
  exception in the agent, never a hung turn.

  Steps: resolve the tool (unknown → error result with "did you mean"), decode and validate the
  arguments natively (invalid → error result naming path, expected and got), run the hooks
  before the call (`CMDC.Tool.Hooks`), check the permission policy, execute in a process of its
  own under a time limit, normalize, run the hooks after the call, result approval.

  ## Errors

  `run/4`, `await/2` and `run_many/4` never fail: a failed call is a
  `%CMDC.Tool.Result{is_error: true}` whose `content` the model reads and whose `reason` says
  how it failed (`:unknown_tool`, `:invalid`, `:denied`, `:timeout`, `:cancelled`, `:crashed`,
  `:invalid_output`, `:withheld`, `:aborted`, `:blocked` when a hook blocked the result, or
  `:tool_error` when the tool returned `{:error, text}`).

  ## Calls

  A call is a map with `:id` (or `"id"`), `:name` and `:arguments` — a map, or the JSON text
  the model sent. A tool's `execute/2` always gets string keys, as JSON decoding gives them:
  atom keys in an arguments map (`%{path: "a"}`, nested too) become strings before validation,
  so a tool written for a model's calls works unchanged when Elixir code calls it. An OpenAI
  Responses call of a function inside a namespace also has `:namespace`: `name` is then the
  function's name in that namespace (`create_issue` in `github` runs `github__create_issue`;
  see `CMDC.Tool.Deferred.Namespaces`, whose `call/1` reads a `function_call` item). The
  namespace must hold the tool: a call naming a tool of another namespace, or of none, is an
  unknown tool (`:unknown_tool`, with the namespace's closest names), never that tool.

  ## Options

    * `:timeout` - ms for this call (default: the tool's `timeout_ms` setting, else 60,000).
    * `:max_output` - bytes of text kept; longer text is cut with a visible marker (100,000).
      Invalid UTF-8 is replaced, with a note (`CMDC.Tool.Result.fit_text/2`).
    * `:on_update` - `fn payload -> ... end` called with each partial result, in order.
    * `:approver` - `fn %{tool: name, args: args, call_id: id} -> :allow | :deny | {:deny, why} end`
      consulted for `:ask_once`/`:ask_always` tools (also read from `ctx.private.approver`),
      and with a `:result` key for results of tools whose `result_approval` is `:on_error` /
      `:always` (see `CMDC.Tool.Approval`: without an approver such results are withheld).
    * `:policies` - `%{tool_name => policy}` overrides (registries carry their own settings).
    * `:subscriber` - a pid receiving `{:cmdc_tool_event, :start | :update | :end, info}`.
    * `:hooks` - hooks for this run (`CMDC.Tool.Hooks`), after those attached globally, to
      the registry and to the session. A `resolve` call applies a pending action of the
      session (`CMDC.Tool.Pending`).
    * `:settings_hooks` - the command hooks of the settings files (`.claude/settings.json`,
      …; `CMDC.Tool.Hooks.Settings`), applied first. By default those of the current
      directory's project (its own files once it is trusted) and the user's, read once and
      again when a file changes; `config :cmdc_tool, settings_hooks: false` turns that
      default off (`true` applies them all the same). `false`: none; a keyword list: the
      options of `CMDC.Tool.Hooks.Config.load/1` (`cwd:`, `trust_project:`, `home:`).
    * `:hooks_fail_closed` - `true`: every command hook of the call fails closed (a time-out,
      kill, bad exit, invalid or oversize answer, or a matcher that cannot be run denies the
      call), as `"cmdc": {"failClosed": true}` does for one hook (`CMDC.Tool.Hooks.Failure`).
    * `:namespaces` - the `namespaces:` map given to `CMDC.Tool.to_schema/3`, when it puts a
      tool in a namespace its name and settings do not say: a call in that namespace then
      reaches it (see `CMDC.Tool.Deferred.Namespaces.resolve/4`).

  ## Tool settings

  A tool may export an optional `tool_options/0` returning any of `policy:`
  (`:auto | :ask_once | :ask_always | :deny`, default `:auto`), `timeout_ms:` and
  `exclusive: true` (never runs beside another call in `run_many/4`). A registry's per-tool
  settings override them.

  ## Cancellation

  `async/4` returns a handle for `await/2` and `cancel/1`. Cancelling, a time-out, or the
  caller's death kills the tool's process, and with it every process linked to it, the OS
  processes of their ports (`System.cmd/3`, `Port.open/2`, `:os.cmd/1`) with their descendants
  (`CMDC.Tool.Runner.Reaper`), and every OS process it started through `CMDC.Tool.Exec`.

  When the `:telemetry` application is loaded, `[:cmdc_tool, :call, :start | :stop]` events are
  emitted too (telemetry is not a dependency).
  """

  require Logger

  alias CMDC.Tool.{Pending, Result}
  alias CMDC.Tool.Deferred.Namespaces
  alias CMDC.Tool.Runner.{Intercept, Reaper, Settings}

  @default_timeout 60_000

  # The options of run/4, async/4 and await/2 (run/4 passes its options to both).
  @options [
    :timeout,
    :max_output,
    :on_update,
    :approver,
    :policies,
    :subscriber,
    :await_timeout,
    :hooks,
    :settings_hooks,
    :hooks_fail_closed,
    :namespaces
  ]

  @doc false
  # What CMDC.Tool.Cluster passes through to the owner's runner.
  def options, do: @options
  @default_max_output 100_000

  defmodule Handle do
    @moduledoc """
    A running call: `CMDC.Tool.Runner.await/2` it or `CMDC.Tool.Runner.cancel/1` it. `tag` is
    the first element of the messages its worker sends (`CMDC.Tool.Runner`, or
    `CMDC.Tool.Cluster` for a call run on the cluster), so one `await/2` serves both.
    """
    defstruct [:ref, :pid, :id, :name, tag: CMDC.Tool.Runner]
    @type t :: %__MODULE__{}
  end

  @doc """
  Runs one call and returns its result.

      iex> call = %{id: "c1", name: "echo", arguments: ~s({"text": "hi"})}
      iex> result = CMDC.Tool.Runner.run([CMDC.Tool.Examples.Echo], call, %CMDC.Context{})
      iex> {result.content, result.is_error}
      {"hi", false}
  """
  @spec run(term(), map(), CMDC.Context.t(), keyword()) :: Result.t()
  def run(tools, call, context, opts \\ []) do
    check!(opts, "run/4")
    tools |> async(call, context, opts) |> await(opts)
  end

  @doc "Starts a call; updates and the result come to the calling process."
  @spec async(term(), map(), CMDC.Context.t(), keyword()) :: Handle.t()
  def async(tools, call, context, opts \\ []) do
    check!(opts, "async/4")
    caller = self()
    ref = make_ref()
    named = named(tools, call, opts)
    {id, name, arguments} = call_parts(named)
    opts = Keyword.drop(opts, [:on_update])

    pid =
      spawn(fn ->
        # The worker dies with its caller (and so does the tool: see supervise/6).
        Process.monitor(caller)

        result =
          case named do
            %{unknown: message} -> %{Result.error(message, :unknown_tool) | id: id, name: name}
            _ -> execute(tools, {id, name, arguments}, context, opts, caller, ref)
          end

        send(caller, {__MODULE__, ref, {:done, result}})
      end)

    %Handle{ref: ref, pid: pid, id: id, name: name}
  end

  @doc """
  Waits for a call's result, passing partial results to `:on_update` (option) on the way.
  `:await_timeout` (default `:infinity`) bounds the wait; the call's own time-out applies anyway.
  """
  @spec await(Handle.t(), keyword()) :: Result.t()
  def await(%Handle{ref: ref} = handle, opts \\ []) do
    check!(opts, "await/2")
    on_update = Keyword.get(opts, :on_update)
    mon = Process.monitor(handle.pid)
    await_loop(handle, ref, mon, on_update, Keyword.get(opts, :await_timeout, :infinity))
  end

  defp await_loop(%Handle{tag: tag} = handle, ref, mon, on_update, timeout) do
    receive do
      {^tag, ^ref, {:update, payload}} ->
        if on_update, do: on_update.(payload)
        await_loop(handle, ref, mon, on_update, timeout)

      {^tag, ^ref, {:done, result}} ->
        Process.demonitor(mon, [:flush])
        result

      {:DOWN, ^mon, :process, _, reason} ->
        # The worker only dies abnormally when killed (cancel/1) or on a bug: still answer.
        drain(tag, ref, on_update)

        %{
          Result.error("the tool call was stopped (#{inspect(reason)})", :cancelled)
          | id: handle.id,
            name: handle.name
        }
    after
      timeout ->
        cancel(handle)

        %{
          Result.error("timed out waiting for the tool", :timeout)
          | id: handle.id,
            name: handle.name
        }
    end
  end

  defp drain(tag, ref, on_update) do
    receive do
      {^tag, ^ref, {:update, payload}} ->
        if on_update, do: on_update.(payload)
        drain(tag, ref, on_update)
    after
      0 -> :ok
    end
  end

  @doc "Cancels a running call: the tool and everything it started are stopped."
  @spec cancel(Handle.t()) :: :ok
  def cancel(%Handle{pid: pid}) do
    send(pid, :cancel)
    :ok
  end

  @doc """
  Runs a batch of calls concurrently (at most `:max_concurrency`, default 8), returns the
  results in the calls' order, and isolates failures. A tool with `exclusive: true` runs alone.
  A result with `:abort` set cancels the calls still running; calls not started then end as
  "aborted" error results.
  """
  @spec run_many(term(), [map()], CMDC.Context.t(), keyword()) :: [Result.t()]
  def run_many(tools, calls, context, opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:max_concurrency | @options], "CMDC.Tool.Runner.run_many/4")
    {max, opts} = Keyword.pop(opts, :max_concurrency, 8)
    indexed = Enum.with_index(calls)

    {results, _} =
      Enum.reduce(segments(tools, indexed), {%{}, false}, fn
        segment, {acc, true} ->
          {Enum.reduce(segment, acc, fn {call, i}, acc -> Map.put(acc, i, aborted(call)) end),
           true}

        segment, {acc, false} ->
          run_segment(tools, segment, context, opts, max, acc)
      end)

    Enum.map(0..(length(calls) - 1)//1, &Map.fetch!(results, &1))
  end

  # Consecutive ordinary calls share a segment; an exclusive call is a segment of its own.
  defp segments(tools, indexed) do
    close = fn
      segs, [] -> segs
      segs, cur -> [Enum.reverse(cur) | segs]
    end

    {segs, current} =
      Enum.reduce(indexed, {[], []}, fn {call, _} = item, {segs, cur} ->
        if exclusive?(tools, call),
          do: {[[item] | close.(segs, cur)], []},
          else: {segs, [item | cur]}
      end)

    segs |> close.(current) |> Enum.reverse()
  end

  defp run_segment(tools, segment, context, opts, max, acc) do
    segment
    |> Enum.chunk_every(max)
    |> Enum.reduce({acc, false}, fn
      chunk, {acc, true} ->
        {Enum.reduce(chunk, acc, fn {call, i}, acc -> Map.put(acc, i, aborted(call)) end), true}

      chunk, {acc, false} ->
        handles = Enum.map(chunk, fn {call, i} -> {async(tools, call, context, opts), i} end)
        collect(handles, acc, opts)
    end)
  end

  defp collect(handles, acc, opts) do
    Enum.reduce(handles, {acc, false}, fn {handle, i}, {acc, aborting} ->
      if aborting, do: cancel(handle)
      result = await(handle, Keyword.take(opts, [:on_update]))
      aborting = aborting or result.abort != nil

      if aborting and result.abort == nil and result.reason == :cancelled,
        do: {Map.put(acc, i, aborted_result(handle)), aborting},
        else: {Map.put(acc, i, result), aborting}
    end)
  end

  defp aborted(call) do
    {id, name, _} = call_parts(call)
    %{Result.error("not run: the turn was aborted", :aborted) | id: id, name: name}
  end

  defp aborted_result(%Handle{id: id, name: name}),
    do: %{Result.error("cancelled: the turn was aborted", :aborted) | id: id, name: name}

  defp exclusive?(tools, call) do
    {_, name, _} = call_parts(named(tools, call, []))

    case CMDC.Tool.find(tools, name) do
      {:ok, module} -> Map.get(Settings.for_tool(tools, module, name), :exclusive, false) == true
      _ -> false
    end
  end

  ## One call

  @doc false
  # `{id, name, arguments}` of a call map with atom or string keys (shared with the cluster).
  def call_parts(call) when is_map(call) do
    get = fn key -> Map.get(call, key, Map.get(call, Atom.to_string(key))) end
    {get.(:id), get.(:name), string_keys(get.(:arguments) || %{})}
  end

  # An OpenAI Responses call of a function inside a namespace (`name` + `namespace`, see
  # `CMDC.Tool.Deferred.Namespaces`) names the registered tool it resolves to, when the
  # namespace holds it; otherwise it is an unknown tool (`:unknown` holds the message), never
  # the tool of that name in another namespace or in none.
  defp named(tools, call, opts) do
    with ns when is_binary(ns) and ns != "" <- Map.get(call, :namespace, call["namespace"]),
         {id, name, args} when is_binary(name) <- call_parts(call) do
      case Namespaces.resolve(tools, ns, name, opts[:namespaces]) do
        {:ok, registered} ->
          %{id: id, name: registered, arguments: args}

        :error ->
          %{id: id, name: name, arguments: args, unknown: Namespaces.unknown(tools, ns, name)}
      end
    else
      _ -> call
    end
  end

  # Atom keys become strings (nested maps and lists too); a map already keyed by strings is
  # returned as it is, without rebuilding.
  defp check!(opts, function),
    do: CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Runner." <> function)

  defp string_keys(%{} = map) when not is_struct(map) do
    if Enum.all?(map, fn {k, v} -> is_binary(k) and string_keyed?(v) end),
      do: map,
      else: Map.new(map, fn {k, v} -> {key(k), string_keys(v)} end)
  end

  defp string_keys(list) when is_list(list), do: Enum.map(list, &string_keys/1)
  defp string_keys(other), do: other

  defp string_keyed?(%{} = map) when not is_struct(map),
    do: Enum.all?(map, fn {k, v} -> is_binary(k) and string_keyed?(v) end)

  defp string_keyed?(list) when is_list(list), do: Enum.all?(list, &string_keyed?/1)
  defp string_keyed?(_), do: true

  defp key(k) when is_atom(k) and k not in [nil, true, false], do: Atom.to_string(k)
  defp key(k), do: k

  defp execute(tools, {id, name, arguments}, context, opts, caller, ref) do
    started = System.monotonic_time(:microsecond)
    emit(opts, :start, %{id: id, name: name})

    result =
      with {:ok, hooks} <- hooks(tools, context, opts),
           {:ok, module, args, settings} <- prepare_call(tools, name, arguments, context),
           call = hook_call(name, args, id, module, context),
           {:ok, args, pre} <- Intercept.before(hooks, call, settings, context),
           :ok <-
             Intercept.permit(pre, name, args, id, settings, context, [{:module, module} | opts]) do
        call = %{call | args: args}
        # The tools called against, for tools that search them (CMDC.Tool.Search.Tool).
        context = %{context | private: Map.put(context.private, :tools, tools)}

        supervise(module, args, context, opts, settings, {caller, ref, id})
        |> Intercept.after_call(hooks, call, {pre, settings, context})
        |> CMDC.Tool.Approval.review(name, args, id, settings, context, opts)
      else
        {:error, %Result{} = result} -> result
      end

    duration = System.monotonic_time(:microsecond) - started
    result = %{result | id: id, name: name, duration_us: duration}
    emit(opts, :end, %{id: id, name: name, duration_us: duration, is_error: result.is_error})
    result
  end

  defp hooks(tools, context, opts) do
    case CMDC.Tool.Hooks.for_call(tools, context, opts) do
      {:error, message} -> {:error, Result.error(message, :denied)}
      hooks -> {:ok, hooks}
    end
  end

  # The `resolve` tool of pending actions (`CMDC.Tool.Pending`) answers when the tools do not
  # have one and the session has pending actions; applying takes the action's own policy.
  defp prepare_call(tools, "resolve", arguments, context) do
    with {:error, %Result{reason: :unknown_tool}} = miss <- prepare(tools, "resolve", arguments) do
      if Pending.any?(context.session_id),
        do: [Pending.Resolve] |> prepare("resolve", arguments) |> pending_policy(context),
        else: miss
    end
  end

  defp prepare_call(tools, name, arguments, _context), do: prepare(tools, name, arguments)

  defp pending_policy({:ok, module, %{"action" => "apply", "id" => id} = args, settings}, ctx) do
    case Pending.fetch(ctx.session_id, id) do
      {:ok, %{policy: policy}} when policy != nil ->
        {:ok, module, args, Map.put(settings, :policy, policy)}

      _ ->
        {:ok, module, args, settings}
    end
  end

  defp pending_policy(prepared, _ctx), do: prepared

  # A call as hooks see it; a `resolve` call also carries the pending action it resolves.
  defp hook_call(name, args, id, Pending.Resolve = module, context) do
    pending =
      case Pending.fetch(context.session_id, args["id"]) do
        {:ok, action} -> Map.take(action, [:id, :label, :details, :tool])
        :error -> nil
      end

    %{tool: name, args: args, call_id: id, module: module, pending: pending}
  end

  defp hook_call(name, args, id, module, _context),
    do: %{tool: name, args: args, call_id: id, module: module}

  # Resolve, validate, settings: `{:ok, module, args, settings}` or `{:error, %Result{}}`. On a
  # registry one native call does the three (`CMDC.Tool.Registry.call/3`); on a list of
  # modules, the module's one compiled validator (`CMDC.Tool.validate/2`).
  defp prepare(%CMDC.Tool.Registry{} = registry, name, arguments) when is_binary(name) do
    case registry_call(registry, name, arguments) do
      {:error, {:not_found, _, _}} ->
        case original_name(registry, name) do
          {:ok, original} ->
            registry |> registry_call(original, arguments) |> prepared(registry, original, name)

          :error ->
            unknown(registry, name)
        end

      result ->
        prepared(result, registry, name, name)
    end
  end

  defp prepare(tools, name, arguments) when is_binary(name) do
    resolved =
      case CMDC.Tool.find(tools, name) do
        {:ok, module} ->
          {:ok, module}

        {:error, _} ->
          with {:ok, original} <- original_name(tools, name), do: CMDC.Tool.find(tools, original)
      end

    case resolved do
      {:ok, module} ->
        result =
          if is_binary(arguments),
            do: CMDC.Tool.validate_json(module, arguments),
            else: CMDC.Tool.validate(module, arguments)

        with {:ok, args} <- result,
             do: {:ok, module, args, Settings.for_tool(tools, module, name)},
             else: ({:error, errors} -> invalid(errors, module))

      _ ->
        unknown(tools, name)
    end
  end

  defp prepare(_tools, name, _arguments),
    do: {:error, Result.error("the call names no tool (got #{inspect(name)})", :unknown_tool)}

  defp registry_call(registry, name, arguments) when is_binary(arguments),
    do: CMDC.Tool.Registry.call_json(registry, name, arguments)

  defp registry_call(registry, name, arguments),
    do: CMDC.Tool.Registry.call(registry, name, arguments)

  # `name`: the registered name; `called`: the name the model used.
  defp prepared({:ok, {module, args, registry_settings}}, _registry, name, _called),
    do: {:ok, module, args, Settings.merge(module, name, registry_settings)}

  defp prepared({:error, errors}, registry, name, _called) when is_list(errors) do
    case CMDC.Tool.Registry.find(registry, name) do
      {:ok, module} -> invalid(errors, module)
      :error -> invalid(errors, nil)
    end
  end

  defp prepared({:error, _not_found}, registry, _name, called), do: unknown(registry, called)

  defp invalid(errors, module),
    do: {:error, Result.error(CMDC.Tool.format_errors(errors, module), :invalid)}

  defp unknown(tools, name),
    do: {:error, Result.error(CMDC.Tool.unknown_tool_message(tools, name), :unknown_tool)}

  # A provider with a narrower name rule was given a mapped name (`fs.read` → `fs_read`).
  defp original_name(tools, name) do
    names =
      case tools do
        %CMDC.Tool.Registry{} -> Enum.map(CMDC.Tool.Registry.list(tools), & &1.name())
        modules when is_list(modules) -> Enum.map(modules, & &1.name())
        _ -> []
      end

    CMDC.Tool.RoundTrip.original_name(names, name)
  end

  @doc false
  # A tool's settings (see `CMDC.Tool.Runner.Settings`); kept for callers of the old name.
  def settings(tools, module, name), do: Settings.for_tool(tools, module, name)

  @doc "Forgets the `:ask_once` approvals of a session (e.g. when it ends)."
  def forget_approvals(session_id), do: CMDC.Tool.Approvals.forget(session_id)

  ## Execution under supervision

  defp supervise(module, args, context, opts, settings, {caller, ref, _id}) do
    worker = self()
    timeout = Keyword.get(opts, :timeout) || Map.get(settings, :timeout_ms, @default_timeout)
    max_output = Keyword.get(opts, :max_output, @default_max_output)
    subscriber = opts[:subscriber]

    update = fn payload ->
      send(worker, {:update, ref, payload})
      :ok
    end

    context = %{context | private: Map.put(context.private, :update, update)}

    {tool, mon} =
      spawn_monitor(fn ->
        outcome = module |> invoke(args, context) |> CMDC.Tool.Structured.check(module)
        send(worker, {:result, ref, outcome})
      end)

    deadline = System.monotonic_time(:millisecond) + timeout
    wait(tool, mon, ref, caller, deadline, timeout, max_output, subscriber)
  end

  defp wait(tool, mon, ref, caller, deadline, timeout, max_output, subscriber) do
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {:update, ^ref, payload} ->
        send(caller, {__MODULE__, ref, {:update, payload}})
        if subscriber, do: send(subscriber, {:cmdc_tool_event, :update, payload})
        wait(tool, mon, ref, caller, deadline, timeout, max_output, subscriber)

      {:result, ^ref, outcome} ->
        Process.demonitor(mon, [:flush])
        outcome |> normalize() |> Result.fit(max_output)

      {:DOWN, ^mon, :process, _, reason} ->
        Logger.error("cmdc_tool: the tool process died: #{inspect(reason)}")
        Result.error("the tool crashed", :crashed)

      :cancel ->
        kill(tool, mon)
        Result.error("cancelled", :cancelled)

      {:DOWN, _, :process, ^caller, _} ->
        kill(tool, mon)
        Result.error("cancelled: the caller went away", :cancelled)
    after
      left ->
        kill(tool, mon)
        Result.error("timed out after #{timeout} ms", :timeout)
    end
  end

  defp kill(tool, mon) do
    # :kill cannot be trapped; processes linked to the tool die too, and the OS processes of
    # their ports with their descendants (Reaper). Waiting for the tool to be gone means its
    # Exec programs are already being killed (their handles watch it) when the caller hears
    # "cancelled", e.g. just before the VM halts.
    Reaper.kill(tool)

    receive do
      {:DOWN, ^mon, :process, _, _} -> :ok
    after
      1_000 -> Process.demonitor(mon, [:flush])
    end
  end

  defp invoke(module, args, context) do
    {:returned, module.execute(args, context)}
  rescue
    e -> {:raised, e, __STACKTRACE__}
  catch
    :throw, {:cmdc_tool_abort, reason} -> {:abort, reason}
    kind, reason -> {:caught, kind, reason, __STACKTRACE__}
  end

  defp normalize({:returned, {:ok, text}}) when is_binary(text),
    do: %Result{content: text}

  defp normalize({:returned, {:error, text}}) when is_binary(text),
    do: %Result{content: text, is_error: true, reason: :tool_error}

  defp normalize({:returned, {:effect, term}}), do: %Result{effect: term}

  defp normalize({:structured, text, value}),
    do: %Result{content: text, structured: value}

  defp normalize({:invalid_output, text}), do: Result.error(text, :invalid_output)

  defp normalize({:returned, other}) do
    Logger.error("cmdc_tool: execute/2 returned #{inspect(other, limit: 20)}")

    Result.error(
      "the tool returned an invalid result (expected {:ok, text}, {:error, text} or {:effect, term})",
      :crashed
    )
  end

  defp normalize({:abort, reason}) do
    %{
      Result.error("the tool aborted the turn: #{format_reason(reason)}", :aborted)
      | abort: reason
    }
  end

  defp normalize({:raised, exception, stack}) do
    Logger.error(Exception.format(:error, exception, stack))
    Result.error("the tool failed: " <> short(Exception.message(exception)), :crashed)
  end

  defp normalize({:caught, kind, reason, stack}) do
    Logger.error(Exception.format(kind, reason, stack))
    Result.error("the tool failed (#{kind}): " <> short(inspect(reason, limit: 10)), :crashed)
  end

  defp format_reason(reason) when is_binary(reason), do: reason
  defp format_reason(reason), do: inspect(reason)

  # The first line only, without source paths: the model needs what failed, not where.
  defp short(message) do
    message
    |> String.split("\n", parts: 2)
    |> hd()
    |> String.replace(~r{(/[\w.\-]+)+\.exs?(:\d+)?}, "<source>")
    |> String.slice(0, 500)
  end

  ## Lifecycle

  @doc """
  Tells every tool that exports `on_session/2` about a session event (`:start`, `:switch`,
  `:branch`, `:tree`, `:shutdown`), then the session's hooks (`CMDC.Tool.Hooks`: Elixir hooks'
  `on_session/2`; command hooks' `SessionStart` at `:start`, `SessionEnd` at `:shutdown`). A
  crash in a tool's handler or a hook is logged as a warning and never stops the others or the
  session. At `:shutdown` the session's pending actions expire (`CMDC.Tool.Pending`), its
  `:ask_once` approvals are forgotten and its attached hooks removed. Option `:hooks` as for
  `run/4`.
  """
  @spec session_event(term(), atom(), CMDC.Context.t(), keyword()) :: :ok
  def session_event(tools, event, context, opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:hooks, :settings_hooks], "CMDC.Tool.Runner.session_event/4")

    for module <- modules(tools),
        Code.ensure_loaded?(module) and function_exported?(module, :on_session, 2) do
      try do
        module.on_session(event, context)
      rescue
        e ->
          Logger.warning(
            "cmdc_tool: #{inspect(module)}.on_session(#{inspect(event)}) raised: #{Exception.message(e)}"
          )
      catch
        kind, reason ->
          Logger.warning(
            "cmdc_tool: #{inspect(module)}.on_session(#{inspect(event)}) #{kind}: #{inspect(reason)}"
          )
      end
    end

    Intercept.session(tools, event, context, opts)

    if event == :shutdown and context.session_id != nil do
      CMDC.Tool.Pending.expire(context.session_id)
      CMDC.Tool.Approvals.forget(context.session_id)
      CMDC.Tool.Hooks.detach({:session, context.session_id})
    end

    :ok
  end

  defp modules(list) when is_list(list), do: list
  defp modules(%CMDC.Tool.Registry{} = registry), do: CMDC.Tool.Registry.list(registry)

  ## Observers

  # Looked up once: Code.ensure_loaded?/1 of a missing module searches the code path each time.
  defp telemetry? do
    case :persistent_term.get({__MODULE__, :telemetry}, nil) do
      nil ->
        loaded = Code.ensure_loaded?(:telemetry)
        :persistent_term.put({__MODULE__, :telemetry}, loaded)
        loaded

      loaded ->
        loaded
    end
  end

  defp emit(opts, event, info) do
    if pid = opts[:subscriber], do: send(pid, {:cmdc_tool_event, event, info})

    if telemetry?() do
      name = [:cmdc_tool, :call, if(event == :end, do: :stop, else: event)]

      measurements =
        if event == :end,
          do: %{duration: info.duration_us},
          else: %{system_time: System.system_time()}

      apply(:telemetry, :execute, [name, measurements, info])
    end

    :ok
  end
end
