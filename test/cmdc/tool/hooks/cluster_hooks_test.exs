defmodule CMDC.Tool.Hooks.ClusterHooksTest do
  use ExUnit.Case, async: false

  import CMDC.Tool.Eventually

  @moduletag timeout: 120_000

  alias CMDC.Tool.{Cluster, Hooks, Peers}
  alias CMDC.Tool.Examples.Echo

  test "a cluster call runs the hooks published with the tool, on the node that executes" do
    dir = Path.join(System.tmp_dir!(), "cmdc_cluster_hooks_#{System.unique_integer([:positive])}")
    File.mkdir_p!(Path.join(dir, ".claude"))
    on_exit(fn -> File.rm_rf!(dir) end)
    seen = Path.join(dir, "ppid")

    # The hook records its parent (the VM that ran it) and rewrites the text.
    File.write!(
      Path.join(dir, ".claude/settings.json"),
      ~s({"hooks": {"PreToolUse": [{"matcher": "echo", "hooks": [
      {"type": "command", "command": "echo $PPID > #{seen}; printf '{\\"hookSpecificOutput\\": {\\"updatedInput\\": {\\"text\\": \\"hooked\\"}}}'"}]}]}})
    )

    hooks = Hooks.Config.active(Hooks.load(cwd: dir, home: dir, trust_project: true))
    assert [_] = hooks

    {peer, node} = Peers.start!(:hooks)
    {:ok, _} = :erpc.call(node, Cluster, :publish, [[Echo], [scope: :hooks, hooks: hooks]])

    eventually(fn -> match?({:ok, _}, Cluster.find("echo", scope: :hooks, node: node)) end)

    # The caller's own :hooks stay here: they are not the executing node's.
    mine = [before_call: fn _, _ -> {:deny, "caller-side hook ran remotely"} end]

    result =
      Cluster.run(%{id: "1", name: "echo", arguments: %{"text" => "plain"}}, %CMDC.Context{},
        scope: :hooks,
        node: node,
        hooks: mine
      )

    assert {result.is_error, result.content} == {false, "hooked"}
    peer_os_pid = :erpc.call(node, :os, :getpid, []) |> List.to_integer()
    assert seen |> File.read!() |> String.trim() |> String.to_integer() == peer_os_pid
    refute peer_os_pid == List.to_integer(:os.getpid())

    assert {:error, "the hook's before_call" <> _} =
             Cluster.publish([Echo], hooks: [[before_call: 1]])

    :peer.stop(peer)
  end
end
