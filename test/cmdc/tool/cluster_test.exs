defmodule CMDC.Tool.ClusterTest do
  use ExUnit.Case, async: false

  alias CMDC.Tool.{Cluster, Peers}
  alias CMDC.Tool.Examples.{Echo, ReadFile}

  @moduletag timeout: 120_000

  setup_all do
    Peers.distribute!()
    :ok
  end

  defp publish_on(node, tools, opts \\ []) do
    # The publisher must live on `node`: start it there, unlinked from the erpc process.
    {:ok, pid} = :erpc.call(node, Cluster, :publish, [tools, opts])
    pid
  end

  defp eventually(fun, tries \\ 50) do
    if fun.() do
      :ok
    else
      if tries == 0, do: flunk("condition never became true")
      Process.sleep(50)
      eventually(fun, tries - 1)
    end
  end

  test "tools published on a peer are listed, found and described here" do
    {peer, node} = Peers.start!(:pub)
    publish_on(node, [ReadFile])
    scope_tools = fn -> Cluster.list() |> Enum.map(&{&1.name, &1.node}) end
    eventually(fn -> {"read_file", node} in scope_tools.() end)

    assert {:ok, %{node: ^node, module: ReadFile}} = Cluster.find("read_file")
    [schema] = Cluster.to_schema() |> Enum.filter(&(&1["function"]["name"] == "read_file"))
    assert schema["function"]["parameters"] == ReadFile.parameters()
    :peer.stop(peer)
  end

  test "a local tool wins over a remote one unless a node is asked for" do
    {peer, node} = Peers.start!(:shadow)
    publish_on(node, [Echo], scope: :shadow)
    {:ok, local} = Cluster.publish([Echo], scope: :shadow)

    eventually(fn ->
      length(Cluster.conflicts(:shadow)) == 0 and
        match?({:ok, _}, Cluster.find("echo", scope: :shadow, node: node))
    end)

    assert {:ok, %{node: here}} = Cluster.find("echo", scope: :shadow)
    assert here == node()
    assert {:ok, %{node: ^node}} = Cluster.find("echo", scope: :shadow, node: node)
    Cluster.unpublish(local)
    :peer.stop(peer)
  end

  test "two remote nodes publishing one name is a reported conflict" do
    {p1, n1} = Peers.start!(:c1)
    {p2, n2} = Peers.start!(:c2)
    publish_on(n1, [Echo], scope: :clash)
    publish_on(n2, [Echo], scope: :clash)
    eventually(fn -> Cluster.conflicts(:clash) != [] end)

    assert [{"echo", nodes}] = Cluster.conflicts(:clash)
    assert Enum.sort(nodes) == Enum.sort([n1, n2])
    # Every node agrees on which one the view keeps.
    assert [%{node: kept}] = Cluster.list(:clash)
    assert kept == Enum.min([n1, n2])
    :peer.stop(p1)
    :peer.stop(p2)
  end

  test "a node going down leaves the view; publishing again brings its tools back" do
    {peer, node} = Peers.start!(:down)
    publish_on(node, [ReadFile], scope: :down)
    eventually(fn -> Enum.any?(Cluster.list(:down), &(&1.node == node)) end)

    :peer.stop(peer)
    eventually(fn -> Cluster.list(:down) == [] end)
    assert Cluster.find("read_file", scope: :down) == {:error, :not_found}

    {peer2, node2} = Peers.start!(:down)
    publish_on(node2, [ReadFile], scope: :down)
    eventually(fn -> match?({:ok, _}, Cluster.find("read_file", scope: :down)) end)
    :peer.stop(peer2)
  end
end
