defmodule CMDC.Tool.Cluster do
  @moduledoc """
  One view of the tools published on every connected BEAM node, over Erlang distribution.

  A node publishes tools (a list of modules, or a registry) under a scope with `publish/2`: a
  small publisher process joins the `:pg` group of that scope and answers for its node. Every
  node can then `list/1`, `find/2`, describe and `to_schema/2` the published tools, and `run/4`
  a call on the node that owns the tool.

  Rules:
    * a tool published on the local node wins over a remote one of the same name, unless the
      caller names a node (`node: n`);
    * two *remote* nodes publishing the same name is a conflict: `list/1` keeps the first (by
      node name, so every node agrees) and `conflicts/1` reports it; nothing is resolved
      silently;
    * a node that goes down leaves every view at once (`:pg` drops its members), and a call in
      flight to it ends in an error result naming the node, never a hang; when the node comes
      back and publishes again, its tools reappear.

  A call runs on the owner's node through `CMDC.Tool.Runner` there, over the tools the owner
  published (its registry, with the registry's validator and settings), streaming partial
  results straight to the caller. Its arguments are validated once, there: the owner's
  validator is the tool's, and invalid arguments never reach the tool.

  ## Errors

    * `run/3` and `await/2` (also `CMDC.Tool.Runner.await/2` on its handle) never fail: as
      `CMDC.Tool.Runner`, a failed call is a `%CMDC.Tool.Result{is_error: true, reason: atom}`,
      with `:node_down` when the owner's node went down during the call;
    * `find/2`: `{:error, :not_found}`;
    * `publish/2`: `{:error, reason}` only when its publisher process cannot start (as
      `GenServer.start/2`);
    * `list/2`, `conflicts/2`, `to_schema/2` do not fail: a node that does not answer in time
      is left out of the view; `to_schema/2` raises `ArgumentError` for a bad option, with
      `CMDC.Tool.to_schema/3`'s message (the caller's bug).
  """

  use GenServer

  alias CMDC.Tool.Deferred.Namespaces
  alias CMDC.Tool.Providers.Described

  @pg :cmdc_tool_cluster

  # Every view takes the same options; a call takes the runner's too.
  @view [:scope, :timeout]
  @call [:scope, :node | CMDC.Tool.Runner.options()]

  @typedoc "A published tool as every node sees it."
  @type entry :: %{
          name: String.t(),
          description: String.t(),
          parameters: map(),
          module: module(),
          node: node(),
          publisher: pid()
        }

  ## Publishing

  @doc """
  Publishes `tools` (modules or a `CMDC.Tool.Registry`) under `scope` (default `:default`).
  Returns the publisher's pid; stopping it (or its node going down) unpublishes.
  Options: `:scope`, `:only` (keeps the named tools only), `:hooks` (`CMDC.Tool.Hooks`: run on
  this node for every call of these tools, after this node's global, registry and session hooks;
  a caller's own `:hooks` option stays on the caller's node and is not used). `{:error, message}`
  for a bad hook.
  """
  @spec publish(term(), keyword()) :: {:ok, pid()} | {:error, term()}
  def publish(tools, opts \\ []) do
    check!(opts, [:scope, :only, :hooks], "publish/2")
    ensure_pg()

    with {:ok, hooks} <- CMDC.Tool.Hooks.new(Keyword.get(opts, :hooks, [])) do
      GenServer.start(__MODULE__, {tools, Keyword.put(opts, :hooks, hooks)})
    end
  end

  @doc "Stops a publisher: its tools leave every view."
  def unpublish(pid), do: GenServer.stop(pid)

  @doc false
  # The scope is started by the application; this covers callers that run without it.
  def ensure_pg do
    if Process.whereis(@pg), do: :ok, else: start_pg()
  end

  defp start_pg do
    case :pg.start(@pg) do
      {:ok, _} -> :ok
      {:error, {:already_started, _}} -> :ok
    end
  end

  @impl true
  def init({tools, opts}) do
    scope = Keyword.get(opts, :scope, :default)
    :ok = :pg.join(@pg, scope, self())
    {:ok, %{tools: tools, only: Keyword.get(opts, :only), scope: scope, hooks: opts[:hooks]}}
  end

  @impl true
  def handle_call(:describe, _from, state), do: {:reply, describe(state), state}
  def handle_call(:describe_schema, _from, state), do: {:reply, describe_schema(state), state}
  def handle_call(:tools, _from, state), do: {:reply, state.tools, state}
  def handle_call(:published, _from, state), do: {:reply, {state.tools, state.hooks}, state}

  defp describe(%{tools: tools, only: only}) do
    tools
    |> modules()
    |> Enum.filter(&(only == nil or &1.name() in only))
    |> Enum.map(fn module ->
      name = module.name()

      %{
        name: name,
        description: CMDC.Tool.description(module),
        parameters: module.parameters(),
        # The tool's own namespace, read here where the module lives (a namespaced call's
        # rule, `Namespaces.resolve_name/4`).
        namespace: Namespaces.own_namespace(tools, module, name),
        module: module,
        node: node(),
        publisher: self()
      }
    end)
  end

  # The entries with what a provider's tools list needs of each (`:tool`), read here where the
  # modules live: the registry's settings and the modules' callbacks. (The entry's own
  # description and parameters are in `:tool`: not sent twice.)
  defp describe_schema(state) do
    entries = describe(state)
    described = Described.new(Enum.map(entries, & &1.module))

    Enum.zip_with(entries, described.tools, fn entry, tool ->
      entry
      |> Map.drop([:description, :parameters])
      |> Map.put(:tool, %{tool | namespace: entry.namespace})
    end)
  end

  @doc false
  def modules(list) when is_list(list), do: list

  def modules(%CMDC.Tool.Registry{} = registry), do: CMDC.Tool.Registry.list(registry)

  ## Views

  @doc """
  Every published tool of a scope visible from this node, local first, then remote by node
  name; a name published by two remote nodes appears once (see `conflicts/1`).

  Every function of the cluster takes the scope the same way, as an option: `scope:` (default
  `:default`), and `:timeout` bounds the wait for each node's answer (default 5,000 ms).
  (`list(:my_scope)` and `list(:my_scope, opts)`, the older form, still work.)
  """
  @spec list(keyword() | atom(), keyword()) :: [entry()]
  def list(opts \\ [], more \\ []) do
    opts = view_opts(opts, more, "list/1")
    {entries, _conflicts} = view(opts[:scope] || :default, opts)
    entries
  end

  @doc "Names published by more than one remote node: `[{name, [node, ...]}]` (options as `list/1`)."
  @spec conflicts(keyword() | atom(), keyword()) :: [{String.t(), [node()]}]
  def conflicts(opts \\ [], more \\ []) do
    opts = view_opts(opts, more, "conflicts/1")
    {_entries, conflicts} = view(opts[:scope] || :default, opts)
    conflicts
  end

  defp view_opts(scope, more, function, allowed \\ @view)

  defp view_opts(scope, more, function, allowed) when is_atom(scope),
    do: view_opts([{:scope, scope} | more], [], function, allowed)

  defp view_opts(opts, more, function, allowed), do: check!(opts ++ more, allowed, function)

  defp check!(opts, allowed, function),
    do: CMDC.Tool.Options.check!(opts, allowed, "CMDC.Tool.Cluster." <> function)

  @doc """
  Finds a published tool: `{:ok, entry}` or `{:error, :not_found}`. The local node's tool wins
  unless `node:` names one.
  """
  @spec find(String.t(), keyword()) :: {:ok, entry()} | {:error, :not_found}
  def find(name, opts \\ []) do
    check!(opts, [:node | @view], "find/2")

    case Enum.find(candidates(opts), &(&1.name == name)) do
      nil -> {:error, :not_found}
      entry -> {:ok, entry}
    end
  end

  @doc """
  The tools list a model request carries, for every tool of the view: `CMDC.Tool.to_schema/3`
  over the view's tools, with its options (`format:`, `strict:`, `warnings:`, `defer:`,
  `always_loaded:`, `search:`, `loaded:`, `namespaces:`) besides the view's (`scope:`,
  `:timeout`). Without them it is cmdc's shape. Each node describes its own tools (names,
  descriptions, parameters, MCP fields, examples, namespaces from its registry settings and
  modules), so a tool whose module exists only on its node converts as it would there, and
  the output is what `CMDC.Tool.to_schema/3` gives for the same tools in a list. A bad option
  raises `ArgumentError` as `to_schema/3` does; `search: :client` needs a registry and is
  refused (use the providers' hosted search).

      iex> CMDC.Tool.Cluster.to_schema(scope: :nothing_published_here, format: :openai_responses)
      []
  """
  @spec to_schema(keyword() | atom(), keyword()) :: [map()]
  def to_schema(opts \\ [], more \\ []) do
    allowed = @view ++ CMDC.Tool.Providers.schema_options()
    {view, schema} = opts |> view_opts(more, "to_schema/1", allowed) |> Keyword.split(@view)
    {entries, _conflicts} = view(view[:scope] || :default, view, :describe_schema)
    CMDC.Tool.to_schema(%Described{tools: Enum.map(entries, & &1.tool)}, %{}, schema)
  end

  defp view(scope, opts, ask \\ :describe) do
    {local, remote} = Enum.split_with(all(scope, opts, ask), &(&1.node == node()))
    local_names = MapSet.new(local, & &1.name)

    by_name =
      remote
      |> Enum.reject(&MapSet.member?(local_names, &1.name))
      |> Enum.sort_by(&{&1.name, &1.node})
      |> Enum.group_by(& &1.name)

    conflicts =
      for {name, [_, _ | _] = entries} <- by_name,
          do: {name, entries |> Enum.map(& &1.node) |> Enum.uniq()}

    remote_kept = by_name |> Map.values() |> Enum.map(&hd/1) |> Enum.sort_by(&{&1.node, &1.name})
    {local ++ remote_kept, Enum.filter(conflicts, fn {_, nodes} -> length(nodes) > 1 end)}
  end

  # Every publisher's entries, asked node by node with :erpc; a node that does not answer in
  # time (or goes down meanwhile) is left out.
  defp all(scope, opts, ask \\ :describe) do
    ensure_pg()
    timeout = Keyword.get(opts, :timeout, 5_000)

    nodes = @pg |> :pg.get_members(scope) |> Enum.map(&node/1) |> Enum.uniq()

    nodes
    |> :erpc.multicall(__MODULE__, :local_entries, [scope, ask], timeout)
    |> Enum.flat_map(fn
      {:ok, entries} -> entries
      _ -> []
    end)
  end

  @doc false
  # Runs on each node: the entries of the publishers living there (`:describe_schema`: with
  # what a provider's tools list needs of each).
  def local_entries(scope, ask \\ :describe) when ask in [:describe, :describe_schema] do
    @pg
    |> :pg.get_local_members(scope)
    |> Enum.flat_map(fn pid ->
      try do
        GenServer.call(pid, ask, 5_000)
      catch
        :exit, _ -> []
      end
    end)
  end

  ## Running

  @doc """
  Runs a call on the node that owns the tool and returns a `CMDC.Tool.Result`.

  The arguments (a map or JSON text) are validated once, on the owner's node, by its runner
  over the tools the owner published. Options are those of
  `CMDC.Tool.Runner.run/4` (`:timeout`, `:on_update`, ...) plus `:scope` and `:node`.
  Partial results stream from the remote tool to `:on_update` in order; a time-out or
  `cancel/1` kills the remote execution; a node that goes down mid-call ends it with an error
  result naming the node.
  """
  @spec run(map(), CMDC.Context.t(), keyword()) :: CMDC.Tool.Result.t()
  def run(call, context, opts \\ []) do
    call |> async(context, opts) |> await(Keyword.take(opts, [:on_update, :await_timeout]))
  end

  @doc """
  Starts a call (see `run/3`); `await/2` or `cancel/1` the returned handle. A call with a
  `:namespace` (an OpenAI Responses `function_call` of a function inside a namespace, as
  `CMDC.Tool.Deferred.Namespaces.call/1` gives it) names the published tool it resolves to by
  the runner's rule (`CMDC.Tool.Deferred.Namespaces.resolve_name/4` over the view), so it runs
  as it would through `CMDC.Tool.Runner`, and its result carries the published name. A
  namespace that does not hold the tool makes the call an unknown tool, as on the runner.
  """
  def async(call, context, opts \\ []) do
    check!(opts, @call, "run/3")
    {id, name, arguments} = CMDC.Tool.Runner.call_parts(call)
    namespace = Map.get(call, :namespace, call["namespace"])
    caller = self()
    ref = make_ref()

    pid =
      spawn(fn ->
        Process.monitor(caller)
        {name, result} = start({id, name, namespace, arguments}, context, opts, caller, ref)
        send(caller, {__MODULE__, ref, {:done, %{result | id: id, name: name}}})
      end)

    %CMDC.Tool.Runner.Handle{ref: ref, pid: pid, id: id, name: name, tag: __MODULE__}
  end

  @doc """
  Waits for a cluster call's result, passing partial results to `:on_update`. The same as
  `CMDC.Tool.Runner.await/2`, which accepts cluster handles too.
  """
  defdelegate await(handle, opts \\ []), to: CMDC.Tool.Runner

  @doc "Cancels a cluster call: the remote execution is killed."
  defdelegate cancel(handle), to: CMDC.Tool.Runner

  # `{name the call ran under, result}`: the view is asked once, for the namespace and the tool.
  defp start({id, name, namespace, arguments}, context, opts, caller, ref) do
    entries = candidates(opts)

    case resolved(entries, namespace, name, opts[:namespaces]) do
      {:unknown, message} ->
        {name, CMDC.Tool.Result.error(message, :unknown_tool)}

      name ->
        run_entry(entries, {id, name, arguments}, context, opts, {caller, ref})
    end
  end

  defp run_entry(entries, {id, name, arguments}, context, opts, {caller, ref}) do
    case Enum.find(entries, &(is_binary(name) and &1.name == name)) do
      %{} = entry ->
        call = %{id: id, name: name, arguments: arguments}
        runner_opts = Keyword.drop(opts, [:scope, :node, :on_update])
        {name, remote(entry, call, context, runner_opts, caller, ref)}

      nil ->
        names = opts |> Keyword.take(@view) |> list() |> Enum.map(& &1.name)
        message = CMDC.Tool.unknown_tool_message(names, name)
        {name, CMDC.Tool.Result.error(message, :unknown_tool)}
    end
  end

  # The entries a call may run on: the view, or the named node's own.
  defp candidates(opts) do
    case Keyword.fetch(opts, :node) do
      {:ok, wanted} ->
        opts |> Keyword.get(:scope, :default) |> all(opts) |> Enum.filter(&(&1.node == wanted))

      :error ->
        list(Keyword.take(opts, @view))
    end
  end

  defp resolved(entries, ns, name, explicit)
       when is_binary(ns) and ns != "" and is_binary(name) do
    names = Enum.map(entries, & &1.name)
    own = Map.new(entries, &{&1.name, Map.get(&1, :namespace)})

    case Namespaces.resolve_name(names, own, ns, name, explicit) do
      {:ok, registered} -> registered
      :error -> {:unknown, Namespaces.unknown_message(names, &own[&1], ns, name)}
    end
  end

  defp resolved(_entries, _ns, name, _explicit), do: name

  defp remote(entry, call, context, opts, caller, ref) do
    {pid, mon} =
      Node.spawn_monitor(entry.node, __MODULE__, :remote_call, [
        self(),
        ref,
        entry.publisher,
        entry.module,
        call,
        context,
        opts
      ])

    relay(pid, mon, entry.node, caller, ref, Keyword.get(opts, :timeout))
  end

  defp relay(pid, mon, node, caller, ref, timeout) do
    receive do
      {__MODULE__, ^ref, {:update, payload}} ->
        send(caller, {__MODULE__, ref, {:update, payload}})
        relay(pid, mon, node, caller, ref, timeout)

      {__MODULE__, ^ref, {:done, result}} ->
        Process.demonitor(mon, [:flush])
        result

      {:DOWN, ^mon, :process, _, :noconnection} ->
        CMDC.Tool.Result.error("node #{node} went down during the call", :node_down)

      {:DOWN, ^mon, :process, _, reason} ->
        CMDC.Tool.Result.error(
          "the remote call on #{node} stopped (#{inspect(reason)})",
          :crashed
        )

      :cancel ->
        Process.exit(pid, :kill)
        CMDC.Tool.Result.error("cancelled", :cancelled)

      {:DOWN, _, :process, ^caller, _} ->
        Process.exit(pid, :kill)
        CMDC.Tool.Result.error("cancelled: the caller went away", :cancelled)
    after
      # The remote runner enforces the time-out; this bound only covers a silent network.
      (timeout || 60_000) + 5_000 ->
        Process.exit(pid, :kill)
        CMDC.Tool.Result.error("timed out after #{timeout || 60_000} ms", :timeout)
    end
  end

  @doc false
  # Runs on the tool's node: the local runner does the work over the tools the publisher holds
  # (validation, settings, execution); this process relays and dies with the caller (which
  # kills the tool through the runner).
  def remote_call(relay, ref, publisher, module, call, context, opts) do
    Process.monitor(relay)
    {tools, hooks} = published(publisher, module)
    handle = CMDC.Tool.Runner.async(tools, call, context, Keyword.put(opts, :hooks, hooks))
    remote_loop(relay, ref, handle)
  end

  # The publisher's tools and hooks; only the module when the publisher has stopped meanwhile
  # (its hooks then cannot be known: the call is refused rather than run without them).
  defp published(publisher, module) do
    GenServer.call(publisher, :published, 5_000)
  catch
    :exit, _ -> {[module], [[name: "publisher", before_call: &publisher_gone/2]]}
  end

  @doc false
  def publisher_gone(_call, _ctx), do: {:deny, "the tool was unpublished during the call"}

  defp remote_loop(relay, ref, %{ref: hr} = handle) do
    receive do
      {CMDC.Tool.Runner, ^hr, {:update, payload}} ->
        send(relay, {__MODULE__, ref, {:update, payload}})
        remote_loop(relay, ref, handle)

      {CMDC.Tool.Runner, ^hr, {:done, result}} ->
        send(relay, {__MODULE__, ref, {:done, result}})

      {:DOWN, _, :process, ^relay, _} ->
        CMDC.Tool.Runner.cancel(handle)
    end
  end
end
