defmodule CMDC.Tool.Peers do
  @moduledoc false
  # Real peer nodes for the cluster tests (OTP's :peer), on this machine's loopback.

  @doc "Makes this node distributed (starting epmd when needed)."
  def distribute! do
    unless Node.alive?() do
      System.cmd("epmd", ["-daemon"])
      start_distribution()
    end

    :ok
  end

  # epmd -daemon returns before epmd listens: tried until it does.
  defp start_distribution do
    CMDC.Tool.Eventually.eventually(
      fn ->
        # The OS pid keeps names apart when several test runs share one epmd.
        name = :"cmdc_test_#{System.pid()}_#{System.unique_integer([:positive])}@127.0.0.1"
        match?({:ok, _}, :net_kernel.start([name, :longnames]))
      end,
      message: "could not start Erlang distribution (is epmd running?)"
    )
  end

  @doc """
  Run on a peer (`:erpc`): registers `modules` in a new registry, stores `settings`
  (`%{name => map}`), and publishes it (`CMDC.Tool.Cluster.publish/2` with `opts`).
  """
  def publish_registry(modules, settings, opts) do
    registry = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(registry, modules)
    for {name, map} <- settings, do: :ok = CMDC.Tool.Registry.put_settings(registry, name, map)
    CMDC.Tool.Cluster.publish(registry, opts)
  end

  @doc """
  Run on a peer (`:erpc`): starts an MCP client `name` over the stdio `spec` in a process that
  outlives the call (it stays until the node stops) and returns its tool modules, which exist
  on that node only.
  """
  def mcp_tools(name, spec) do
    caller = self()

    spawn(fn ->
      client = {CMDC.Tool.MCP.Client, name: name, transport: {:stdio, spec}, init_timeout: 60_000}
      {:ok, sup} = Supervisor.start_link([client], strategy: :one_for_one)
      [{_, pid, _, _}] = Supervisor.which_children(sup)
      :ok = CMDC.Tool.MCP.Client.await_ready(pid)
      send(caller, {:mcp_tools, CMDC.Tool.MCP.Client.tools(pid)})
      Process.sleep(:infinity)
    end)

    receive do
      {:mcp_tools, tools} -> tools
    after
      90_000 -> raise "the MCP client #{name} was not ready in 90 s"
    end
  end

  @doc "Starts a peer node with this node's code paths; returns `{peer, node}`."
  def start!(name) do
    distribute!()
    args = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
    name = :"#{name}_#{System.pid()}_#{System.unique_integer([:positive])}"

    {:ok, peer, node} =
      :peer.start_link(%{name: name, host: ~c"127.0.0.1", longnames: true, args: args})

    {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:cmdc_tool])
    {peer, node}
  end

  @doc """
  Stops a peer of `start!/1`, for an `on_exit` callback: the peer is linked to the test's
  process, which has exited by then, so it may be stopping or gone already (`:peer.stop/1` then
  exits), or, on a busy machine, still up.
  """
  def stop(peer) do
    :peer.stop(peer)
  catch
    :exit, _ -> :ok
  end
end
