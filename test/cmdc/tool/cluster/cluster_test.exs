defmodule CMDC.Tool.ClusterTest do
  # Not async: peer nodes joining and leaving this node are seen by every cluster view here
  # (the `:down` checks below), so the cluster modules run one at a time.
  use ExUnit.Case, async: false

  import CMDC.Tool.Eventually

  alias CMDC.Tool.{Cluster, Peers}
  alias CMDC.Tool.Examples.{Echo, ReadFile}
  alias CMDC.Tool.TestTools, as: T

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

  describe "remote calls" do
    setup do
      name = :"cluster_test_#{System.unique_integer([:positive])}"
      Process.register(self(), name)
      {peer, node} = Peers.start!(:remote)
      scope = :"remote_#{System.unique_integer([:positive])}"
      publish_on(node, [T.Report, T.Stream, T.Sleep], scope: scope)
      eventually(fn -> match?({:ok, _}, Cluster.find("report", scope: scope)) end)
      on_exit(fn -> Peers.stop(peer) end)

      %{
        peer: peer,
        node: node,
        scope: scope,
        args: %{"to" => Atom.to_string(name), "at" => Atom.to_string(node())}
      }
    end

    test "run on the owner's node, streaming partial results in order", %{
      node: node,
      scope: scope
    } do
      me = self()
      call = %{id: "r1", name: "stream", arguments: %{"n" => 20}}

      result =
        Cluster.run(call, CMDC.Context.new(), scope: scope, on_update: &send(me, {:part, &1}))

      assert %{content: "done 20", is_error: false, id: "r1"} = result

      parts =
        for _ <- 1..20,
            do:
              (receive do
                 {:part, p} -> p
               after
                 30_000 -> nil
               end)

      assert parts == Enum.map(1..20, &"step #{&1}")
      assert node != node()
    end

    test "Runner.await/2 and Runner.cancel/1 take a cluster handle (no wait forever)", %{
      scope: scope,
      args: args,
      node: node
    } do
      me = self()
      call = %{id: "r1b", name: "stream", arguments: %{"n" => 3}}
      handle = Cluster.async(call, CMDC.Context.new(), scope: scope)

      assert %{content: "done 3", is_error: false, id: "r1b"} =
               CMDC.Tool.Runner.await(handle,
                 on_update: &send(me, {:part, &1}),
                 await_timeout: 10_000
               )

      assert_received {:part, "step 1"}

      call = %{id: "r1c", name: "report", arguments: Map.put(args, "ms", 30_000)}
      handle = Cluster.async(call, CMDC.Context.new(), scope: scope)
      assert_receive {:remote_started, ^node, tool, _child}
      :ok = CMDC.Tool.Runner.cancel(handle)
      assert %{reason: :cancelled} = CMDC.Tool.Runner.await(handle, await_timeout: 10_000)
      eventually(fn -> not :erpc.call(node, Process, :alive?, [tool]) end)
    end

    test "arguments are validated once, on the owner: bad ones never reach the tool", %{
      scope: scope
    } do
      call = %{id: "r2", name: "report", arguments: ~s({"to": 5})}

      assert %{is_error: true, reason: :invalid, content: text} =
               Cluster.run(call, CMDC.Context.new(), scope: scope)

      assert text =~ "at /to"
      refute_receive {:remote_started, _, _, _}, 200
    end

    test "a call runs through the owner's registry: its validator and settings apply there", %{
      node: node,
      args: args
    } do
      scope = :"registry_#{System.unique_integer([:positive])}"
      settings = %{"report" => %{policy: :deny}}

      {:ok, _} =
        :erpc.call(node, Peers, :publish_registry, [[T.Report, Echo], settings, [scope: scope]])

      eventually(fn -> match?({:ok, _}, Cluster.find("report", scope: scope)) end)

      # The owner's registry settings: denied there, never started.
      call = %{id: "g1", name: "report", arguments: args}

      assert %{is_error: true, reason: :denied} =
               Cluster.run(call, CMDC.Context.new(), scope: scope)

      refute_receive {:remote_started, _, _, _}, 200

      # The owner's validator (strict mode's null dropped there) and the owner runs it.
      call = %{id: "g2", name: "echo", arguments: ~s({"text": "hi"})}

      assert %{is_error: false, content: "hi"} =
               Cluster.run(call, CMDC.Context.new(), scope: scope)

      call = %{id: "g3", name: "echo", arguments: %{"text" => 5}}

      assert %{is_error: true, reason: :invalid, content: text} =
               Cluster.run(call, CMDC.Context.new(), scope: scope)

      assert text =~ "at /text"
    end

    test "a remote time-out kills the remote tool and its children", %{
      scope: scope,
      args: args,
      node: node
    } do
      call = %{id: "r3", name: "report", arguments: Map.put(args, "ms", 30_000)}

      assert %{reason: :timeout} =
               Cluster.run(call, CMDC.Context.new(), scope: scope, timeout: 300)

      assert_receive {:remote_started, ^node, tool, child}
      eventually(fn -> not :erpc.call(node, Process, :alive?, [tool]) end)
      eventually(fn -> not :erpc.call(node, Process, :alive?, [child]) end)
    end

    test "cancel stops the remote execution", %{scope: scope, args: args, node: node} do
      call = %{id: "r4", name: "report", arguments: Map.put(args, "ms", 30_000)}
      handle = Cluster.async(call, CMDC.Context.new(), scope: scope)
      assert_receive {:remote_started, ^node, tool, child}
      Cluster.cancel(handle)
      assert %{reason: :cancelled} = Cluster.await(handle)
      eventually(fn -> not :erpc.call(node, Process, :alive?, [tool]) end)
      eventually(fn -> not :erpc.call(node, Process, :alive?, [child]) end)
    end

    test "a node killed mid-call ends the call with an error naming it", %{
      scope: scope,
      args: args,
      node: node,
      peer: peer
    } do
      call = %{id: "r5", name: "report", arguments: Map.put(args, "ms", 30_000)}
      handle = Cluster.async(call, CMDC.Context.new(), scope: scope)
      assert_receive {:remote_started, ^node, _, _}
      :peer.stop(peer)
      assert %{is_error: true, reason: :node_down, content: text} = Cluster.await(handle)
      assert text =~ "#{node} went down"
      eventually(fn -> Cluster.list(scope) == [] end)
    end

    test "unknown names answer with the nearest published ones", %{scope: scope} do
      assert %{reason: :unknown_tool, content: text} =
               Cluster.run(%{id: "r6", name: "reprot", arguments: %{}}, CMDC.Context.new(),
                 scope: scope
               )

      assert text =~ "report"
    end
  end

  describe "namespaced calls (OpenAI Responses function_call items)" do
    setup do
      {peer, node} = Peers.start!(:ns)
      scope = :"ns_#{System.unique_integer([:positive])}"
      names = ["github__create_issue", "fs.read", "echo_text", "admin__wipe", "create_issue"]

      # The tools are made on the peer: their modules exist only there.
      modules =
        for n <- names,
            do: :erpc.call(node, CMDC.Tool.Test.Factory, :tool, [n, "Does #{n}."])

      {:ok, _} = :erpc.call(node, Peers, :publish_registry, [modules, %{}, [scope: scope]])
      eventually(fn -> length(Cluster.list(scope)) == 5 end)
      on_exit(fn -> Peers.stop(peer) end)
      # The same names in a local registry: what CMDC.Tool.Runner answers for the same items.
      local = CMDC.Tool.Registry.new()
      :ok = CMDC.Tool.Registry.register(local, Enum.map(names, &CMDC.Tool.Test.Factory.tool/1))
      %{node: node, scope: scope, local: local}
    end

    defp item(id, name, ns) do
      {:ok, call} =
        CMDC.Tool.Deferred.Namespaces.call(%{
          "type" => "function_call",
          "call_id" => id,
          "name" => name,
          "namespace" => ns,
          "arguments" => "{}"
        })

      call
    end

    defp seen(result), do: Map.take(result, [:id, :name, :content, :is_error, :reason])

    test "run on the owner's node as through the runner", %{scope: scope, local: local} do
      for {name, ns, registered} <- [
            {"create_issue", "github", "github__create_issue"},
            {"read", "fs", "fs.read"}
          ] do
        call = item("c_" <> name, name, ns)
        result = Cluster.run(call, CMDC.Context.new(), scope: scope)
        assert %{is_error: false, content: ^registered, name: ^registered} = result
        assert seen(result) == seen(CMDC.Tool.Runner.run(local, call, CMDC.Context.new()))
      end

      # Asking for the owner's node resolves over that node's tools the same way.
      node = Cluster.find("fs.read", scope: scope) |> elem(1) |> Map.fetch!(:node)

      assert %{content: "fs.read"} =
               Cluster.run(item("c_n", "read", "fs"), CMDC.Context.new(), scope: scope, node: node)
    end

    test "a function the namespace lacks is the runner's unknown-tool error", %{
      scope: scope,
      local: local
    } do
      call = item("c_x", "close_issue", "github")
      result = Cluster.run(call, CMDC.Context.new(), scope: scope)
      assert %{is_error: true, reason: :unknown_tool, name: "close_issue"} = result
      assert result.content =~ "in namespace github"
      assert seen(result) == seen(CMDC.Tool.Runner.run(local, call, CMDC.Context.new()))
    end

    # Issue 37 item 3: a namespace that does not hold the name never reaches a tool of another
    # namespace or of none; the answer is the runner's, word for word.
    test "a namespace that does not hold the name is an unknown tool, never that tool", %{
      scope: scope,
      local: local
    } do
      for {name, ns, says} <- [
            {"admin__wipe", "crm", "Unknown tool: admin__wipe in namespace crm"},
            {"create_issue", "nonexistent", "no tool is in nonexistent"},
            {"echo_text", "util", "no tool is in util"}
          ] do
        call = item("c_" <> ns, name, ns)
        result = Cluster.run(call, CMDC.Context.new(), scope: scope)
        assert %{is_error: true, reason: :unknown_tool, name: ^name} = result
        assert result.content =~ says
        refute result.content == name
        assert seen(result) == seen(CMDC.Tool.Runner.run(local, call, CMDC.Context.new()))
      end
    end
  end
end
