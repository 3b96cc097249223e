defmodule CMDC.Tool.PendingTest do
  use ExUnit.Case, async: true

  @moduletag :capture_log

  alias CMDC.Test.MCPIO
  alias CMDC.Tool.{Pending, Runner}
  alias CMDC.Tool.Examples.{Echo, EditFile}

  doctest CMDC.Tool.Pending

  setup do
    dir = Path.join(System.tmp_dir!(), "cmdc_pending_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    File.write!(Path.join(dir, "notes.txt"), "alpha\nbeta\ngamma\n")
    on_exit(fn -> File.rm_rf!(dir) end)
    session = "pending-#{System.unique_integer([:positive])}"
    %{dir: dir, ctx: %CMDC.Context{session_id: session, working_dir: dir}}
  end

  defp call(id, name, args), do: %{id: id, name: name, arguments: args}
  defp edit, do: %{"path" => "notes.txt", "old_text" => "beta", "new_text" => "BETA"}
  defp names(tools), do: Enum.map(tools, & &1.name())

  test "preview, resolve offered, apply writes; the id is spent", %{dir: dir, ctx: ctx} do
    tools = [Echo, EditFile]
    assert names(Pending.Resolve.offer(tools, ctx.session_id)) == ["echo", "edit_file"]

    assert Runner.run(tools, call("0", "resolve", %{"id" => "x", "action" => "apply"}), ctx).reason ==
             :unknown_tool

    preview = Runner.run(tools, call("1", "edit_file", edit()), ctx)
    assert preview.content =~ "- beta\n+ BETA"
    assert File.read!(Path.join(dir, "notes.txt")) == "alpha\nbeta\ngamma\n"

    [%{id: id, label: "edit notes.txt", tool: "edit_file"}] = Pending.list(ctx.session_id)
    offered = Pending.Resolve.offer(tools, ctx.session_id)
    assert names(offered) == ["echo", "edit_file", "resolve"]
    schema = CMDC.Tool.to_schema(offered, %{}, format: :anthropic)
    assert Enum.any?(schema, &(&1["name"] == "resolve"))

    r = Runner.run(tools, call("2", "resolve", %{"id" => id, "action" => "apply"}), ctx)
    assert {r.is_error, r.content} == {false, "notes.txt: 1 replacement written"}
    assert File.read!(Path.join(dir, "notes.txt")) == "alpha\nBETA\ngamma\n"
    assert Pending.Resolve.offer(tools, ctx.session_id) == tools

    # With nothing pending `resolve` is not a tool at all.
    assert Runner.run(tools, call("3", "resolve", %{"id" => id, "action" => "apply"}), ctx).reason ==
             :unknown_tool
  end

  test "applying goes through hooks and the action's policy", %{dir: dir, ctx: ctx} do
    Runner.run([EditFile], call("1", "edit_file", edit()), ctx)
    [%{id: id}] = Pending.list(ctx.session_id)

    test = self()

    deny = [
      match: "resolve",
      before_call: fn call, _ -> send(test, {:pending, call.pending}) && {:deny, "frozen"} end
    ]

    r =
      Runner.run([EditFile], call("2", "resolve", %{"id" => id, "action" => "apply"}), ctx,
        hooks: [deny]
      )

    assert r.reason == :denied and r.content =~ "frozen"
    assert_received {:pending, %{id: ^id, label: "edit notes.txt", details: "- beta\n+ BETA"}}
    # Denied before it ran: still pending, file untouched.
    assert [%{id: ^id}] = Pending.list(ctx.session_id)
    assert File.read!(Path.join(dir, "notes.txt")) =~ "beta"

    {:ok, guarded} =
      CMDC.Context.push_pending_action(ctx,
        label: "deploy",
        policy: :ask_always,
        apply: fn _ -> {:ok, "deployed"} end
      )

    r = Runner.run([Echo], call("3", "resolve", %{"id" => guarded, "action" => "apply"}), ctx)
    assert r.reason == :denied and r.content =~ "headless"

    r =
      Runner.run([Echo], call("4", "resolve", %{"id" => guarded, "action" => "apply"}), ctx,
        approver: fn _ -> :allow end
      )

    assert r.content == "deployed"
  end

  test "pending actions expire with the session", %{ctx: ctx} do
    test = self()

    {:ok, _} =
      CMDC.Context.push_pending_action(ctx,
        label: "a",
        apply: fn _ -> :ok end,
        discard: &send(test, {:discarded, &1})
      )

    assert Pending.any?(ctx.session_id)
    :ok = Runner.session_event([Echo], :shutdown, ctx)
    assert_received {:discarded, "expired"}
    refute Pending.any?(ctx.session_id)
  end

  test "push refuses what it cannot apply" do
    assert {:error, "a pending action needs a session" <> _} =
             CMDC.Context.push_pending_action(%CMDC.Context{}, label: "x", apply: fn _ -> :ok end)

    ctx = %CMDC.Context{session_id: "p"}

    assert {:error, "a pending action needs a :label" <> _} =
             CMDC.Context.push_pending_action(ctx, apply: fn _ -> :ok end)

    assert {:error, "a pending action needs :apply" <> _} =
             CMDC.Context.push_pending_action(ctx, label: "x")

    assert {:error, ":discard must be" <> _} =
             CMDC.Context.push_pending_action(ctx, label: "x", apply: fn _ -> :ok end, discard: 1)
  end

  test "through the MCP server: resolve is listed while an action is pending and applies it", %{
    dir: dir,
    ctx: ctx
  } do
    {:ok, out} = StringIO.open("")
    input = MCPIO.feeder()
    me = self()

    spawn_link(fn ->
      CMDC.Tool.MCP.Server.serve([EditFile],
        input: input,
        output: out,
        context: ctx,
        list_changed: true
      )

      send(me, :stopped)
    end)

    req = fn id, method, params ->
      MCPIO.feed(input, %{"jsonrpc" => "2.0", "id" => id, "method" => method, "params" => params})
    end

    req.(1, "initialize", %{
      "protocolVersion" => "2025-06-18",
      "capabilities" => %{},
      "clientInfo" => %{"name" => "t", "version" => "1"}
    })

    req.(2, "tools/list", %{})
    MCPIO.await_frames(out, 2)
    req.(3, "tools/call", %{"name" => "edit_file", "arguments" => edit()})
    # The preview, then list_changed: `resolve` appeared.
    [_, list1, preview, changed] = MCPIO.await_frames(out, 4)
    assert changed["method"] == "notifications/tools/list_changed"
    [%{"text" => text}] = preview["result"]["content"]
    [_, id] = Regex.run(~r/pending action (pa_\d+)/, text)
    req.(4, "tools/list", %{})

    req.(5, "tools/call", %{
      "name" => "resolve",
      "arguments" => %{"id" => id, "action" => "apply"}
    })

    [_, _, _, _, list2, applied, gone] = MCPIO.await_frames(out, 7)
    assert gone["method"] == "notifications/tools/list_changed"
    req.(6, "tools/list", %{})
    MCPIO.eof(input)
    assert_receive :stopped
    list3 = List.last(MCPIO.frames(out))

    tool_names = fn frame -> Enum.map(frame["result"]["tools"], & &1["name"]) end
    assert tool_names.(list1) == ["edit_file"]
    assert tool_names.(list2) == ["edit_file", "resolve"]

    assert applied["result"] == %{
             "content" => [%{"type" => "text", "text" => "notes.txt: 1 replacement written"}],
             "isError" => false
           }

    assert tool_names.(list3) == ["edit_file"]
    assert File.read!(Path.join(dir, "notes.txt")) == "alpha\nBETA\ngamma\n"
  end
end
