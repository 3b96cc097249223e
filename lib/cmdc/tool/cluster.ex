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

  Arguments are validated where the call starts, against the schema the owner published, so
  bad arguments never cross the network; the call then runs on the owner's node (through
  `CMDC.Tool.Runner` there), streaming partial results straight to the caller.
  """

  use GenServer

  @pg :cmdc_tool_cluster

  @typedoc "A published tool as every node sees it."
  @type entry :: %{
          name: String.t(),
          description: String.t(),
          parameters: map(),
          module: module(),
          node: node()
        }

  ## Publishing

  @doc """
  Publishes `tools` (modules or a `CMDC.Tool.Registry`) under `scope` (default `:default`).
  Returns the publisher's pid; stopping it (or its node going down) unpublishes.
  Option `:only` keeps the named tools only.
  """
  @spec publish(term(), keyword()) :: {:ok, pid()} | {:error, term()}
  def publish(tools, opts \\ []) do
    ensure_pg()
    GenServer.start(__MODULE__, {tools, opts})
  end

  @doc "Stops a publisher: its tools leave every view."
  def unpublish(pid), do: GenServer.stop(pid)

  @doc "Starts the cluster's `:pg` scope when it is not running (idempotent)."
  def ensure_pg do
    case :pg.start(@pg) do
      {:ok, _} -> :ok
      {:error, {:already_started, _}} -> :ok
    end
  end

  @impl true
  def init({tools, opts}) do
    scope = Keyword.get(opts, :scope, :default)
    :ok = :pg.join(@pg, scope, self())
    {:ok, %{tools: tools, only: Keyword.get(opts, :only), scope: scope}}
  end

  @impl true
  def handle_call(:describe, _from, state), do: {:reply, describe(state), state}

  defp describe(%{tools: tools, only: only}) do
    tools
    |> modules()
    |> Enum.filter(&(only == nil or &1.name() in only))
    |> Enum.map(fn module ->
      %{
        name: module.name(),
        description: CMDC.Tool.description(module),
        parameters: module.parameters(),
        module: module,
        node: node()
      }
    end)
  end

  @doc false
  def modules(list) when is_list(list), do: list

  def modules(%CMDC.Tool.Registry{} = registry), do: CMDC.Tool.Registry.list(registry)

  ## Views

  @doc """
  Every published tool of `scope` visible from this node, local first, then remote by node
  name; a name published by two remote nodes appears once (see `conflicts/1`).
  Option `:timeout` bounds the wait for each node's answer (default 5,000 ms).
  """
  @spec list(atom(), keyword()) :: [entry()]
  def list(scope \\ :default, opts \\ []) do
    {entries, _conflicts} = view(scope, opts)
    entries
  end

  @doc "Names published by more than one remote node: `[{name, [node, ...]}]`."
  @spec conflicts(atom(), keyword()) :: [{String.t(), [node()]}]
  def conflicts(scope \\ :default, opts \\ []) do
    {_entries, conflicts} = view(scope, opts)
    conflicts
  end

  @doc """
  Finds a published tool: `{:ok, entry}` or `{:error, :not_found}`. The local node's tool wins
  unless `node:` names one.
  """
  @spec find(String.t(), keyword()) :: {:ok, entry()} | {:error, :not_found}
  def find(name, opts \\ []) do
    scope = Keyword.get(opts, :scope, :default)

    candidates =
      case Keyword.fetch(opts, :node) do
        {:ok, wanted} -> Enum.filter(all(scope, opts), &(&1.node == wanted))
        :error -> list(scope, opts)
      end

    case Enum.find(candidates, &(&1.name == name)) do
      nil -> {:error, :not_found}
      entry -> {:ok, entry}
    end
  end

  @doc """
  The tools list a model request carries, for every tool of the view (cmdc's shape).
  """
  @spec to_schema(atom(), keyword()) :: [map()]
  def to_schema(scope \\ :default, opts \\ []) do
    for entry <- list(scope, opts) do
      %{
        "type" => "function",
        "function" => %{
          "name" => entry.name,
          "description" => entry.description,
          "parameters" => entry.parameters
        }
      }
    end
  end

  defp view(scope, opts) do
    {local, remote} = Enum.split_with(all(scope, opts), &(&1.node == node()))
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

  # Every publisher's entries; a publisher that does not answer in time is left out.
  defp all(scope, opts) do
    ensure_pg()
    timeout = Keyword.get(opts, :timeout, 5_000)

    @pg
    |> :pg.get_members(scope)
    |> Enum.map(fn pid -> {pid, :gen_server.send_request(pid, :describe)} end)
    |> Enum.flat_map(fn {_pid, request} ->
      case :gen_server.receive_response(request, timeout) do
        {:reply, entries} -> entries
        _ -> []
      end
    end)
  end
end
