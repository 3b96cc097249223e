defmodule CMDC.Tool.Hooks.ElixirHooksTest do
  use ExUnit.Case, async: true

  @moduletag :capture_log

  alias CMDC.Tool.{Hooks, Runner}
  alias CMDC.Tool.Examples.Echo

  doctest CMDC.Tool.Hooks
  doctest CMDC.Tool.Hooks.Hook
  doctest CMDC.Tool.Hooks.Matcher
  doctest CMDC.Tool.Hooks.Verdict
  doctest CMDC.Tool.Hooks.Dispatch
  doctest CMDC.Tool.Hooks.Store

  defmodule Count do
    @behaviour CMDC.Tool
    def name, do: "count"
    def description, do: "Counts to n."

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{"n" => %{"type" => "integer", "minimum" => 1}},
        "required" => ["n"],
        "additionalProperties" => false
      }

    def execute(%{"n" => n}, _ctx), do: {:ok, Enum.join(1..n, ",")}
  end

  defmodule Audit do
    @behaviour CMDC.Tool.Hooks
    def hook_options, do: [name: "audit"]

    @impl true
    def before_call(call, ctx) do
      send(ctx.assigns.test, {:before, call.tool, call.args})
      :ok
    end

    @impl true
    def after_call(call, result, ctx) do
      send(ctx.assigns.test, {:after, call.tool, result.content})
      :ok
    end

    @impl true
    def on_session(event, ctx) do
      send(ctx.assigns.test, {:session, event})
      :ok
    end
  end

  defp ctx,
    do: %CMDC.Context{
      session_id: "s-#{System.unique_integer([:positive])}",
      assigns: %{test: self()}
    }

  defp call(name, args), do: %{id: "c1", name: name, arguments: args}
  defp run(tools, call, opts, ctx \\ ctx()), do: Runner.run(tools, call, ctx, opts)

  describe "before a call" do
    test "deny > ask > allow, whatever the order; the first deny gives the reason" do
      hooks = [
        [name: "a", before_call: fn _, _ -> :allow end],
        [name: "b", before_call: fn _, _ -> {:ask, "check"} end],
        [name: "c", before_call: fn _, _ -> {:deny, "first"} end],
        [name: "d", before_call: fn _, _ -> {:deny, "second"} end]
      ]

      r = run([Echo], call("echo", %{"text" => "x"}), hooks: hooks)

      assert {r.is_error, r.reason, r.content} ==
               {true, :denied, "echo was denied by hook c: first"}
    end

    test "ask goes to the approver with the hook's reason; headless it is denied" do
      hooks = [[name: "asker", before_call: fn _, _ -> {:ask, "looks odd"} end]]
      r = run([Echo], call("echo", %{"text" => "x"}), hooks: hooks)
      assert r.reason == :denied and r.content =~ "headless"

      test = self()
      approver = fn req -> send(test, {:asked, req}) && :allow end
      r = run([Echo], call("echo", %{"text" => "x"}), hooks: hooks, approver: approver)
      assert {r.is_error, r.content} == {false, "x"}
      assert_received {:asked, %{tool: "echo", reason: "hook asker: looks odd"}}
    end

    test "allow skips an asking policy, never a deny policy" do
      hooks = [[before_call: fn _, _ -> :allow end]]

      assert run([CMDC.Tool.TestTools.AskAlways], call("guarded", %{}), hooks: hooks).content ==
               "ran"

      assert run([CMDC.Tool.TestTools.AskAlways], call("guarded", %{}), []).reason == :denied

      assert run([CMDC.Tool.TestTools.Forbidden], call("never", %{}), hooks: hooks).reason ==
               :denied
    end

    test "the last rewrite wins and rewritten arguments are validated again" do
      hooks = [
        [name: "one", before_call: fn _, _ -> {:rewrite, %{"n" => 2}} end],
        [name: "two", before_call: fn _, _ -> {:rewrite, %{"n" => 3}} end]
      ]

      assert run([Count], call("count", %{"n" => 9}), hooks: hooks).content == "1,2,3"

      bad = [[name: "bad", before_call: fn _, _ -> {:rewrite, %{"n" => "three"}} end]]
      r = run([Count], call("count", %{"n" => 9}), hooks: bad)
      assert r.reason == :invalid
      assert r.content =~ "hook bad rewrote the arguments of count, and they are invalid"
      assert r.content =~ "n"
    end

    test "context from hooks before and after reaches the model; the hook sees the rewrite" do
      test = self()

      hooks = [
        [before_call: fn _, _ -> %{context: "note: cwd is /tmp", args: %{"text" => "new"}} end],
        [after_call: fn call, _r, _ -> send(test, {:args, call.args}) && {:context, "after"} end]
      ]

      r = run([Echo], call("echo", %{"text" => "old"}), hooks: hooks)
      assert r.content == "new\n\nnote: cwd is /tmp\nafter"
      assert_received {:args, %{"text" => "new"}}
    end
  end

  describe "after a call" do
    test "rewrite content, structured and is_error: the last rewrite wins" do
      hooks = [
        [after_call: fn _, _, _ -> {:rewrite, "first"} end],
        [
          after_call: fn _, _, _ ->
            {:rewrite, %{content: "boom", is_error: true, structured: %{"a" => 1}}}
          end
        ]
      ]

      r = run([Echo], call("echo", %{"text" => "x"}), hooks: hooks)

      assert {r.content, r.is_error, r.reason, r.structured} ==
               {"boom", true, :tool_error, %{"a" => 1}}

      flip = [[after_call: fn _, _, _ -> {:rewrite, %{is_error: false, content: "fine"}} end]]
      r = run([Count], call("count", %{"n" => 0}), hooks: flip)
      # Invalid arguments never reach the tool nor its after hooks.
      assert r.reason == :invalid

      r = run([CMDC.Tool.TestTools.Raise], call("raise", %{}), hooks: flip)
      assert {r.is_error, r.reason, r.content} == {false, nil, "fine"}
    end

    test "the first block wins and the content never reaches the model" do
      hooks = [
        [name: "b1", after_call: fn _, _, _ -> {:block, "secret inside"} end],
        [name: "b2", after_call: fn _, _, _ -> {:block, "second"} end],
        [name: "rw", after_call: fn _, _, _ -> {:rewrite, "rewritten"} end]
      ]

      r = run([Echo], call("echo", %{"text" => "password=1"}), hooks: hooks)

      assert {r.reason, r.content} ==
               {:blocked, "the result of echo was blocked by hook b1: secret inside"}
    end

    test "after_call sees failures too (PostToolUseFailure)" do
      test = self()
      hooks = [[after_call: fn _, r, _ -> send(test, {:seen, r.reason}) && :ok end]]
      run([CMDC.Tool.TestTools.Raise], call("raise", %{}), hooks: hooks)
      assert_received {:seen, :crashed}
    end
  end

  describe "fail-safe" do
    test "a raising, exiting, slow or confused hook denies or blocks its call; the runner lives" do
      cases = [
        {[before_call: fn _, _ -> raise "kaput" end], :denied, "raised ** (RuntimeError) kaput"},
        {[before_call: fn _, _ -> exit(:bye) end], :denied, "exit: :bye"},
        {[before_call: fn _, _ -> Process.sleep(:infinity) end, timeout: 100], :denied,
         "did not answer within 100 ms"},
        {[before_call: fn _, _ -> {:maybe, 1} end], :denied, "not a hook answer"},
        {[after_call: fn _, _, _ -> raise "late" end], :blocked, "raised ** (RuntimeError) late"},
        {[after_call: fn _, _, _ -> Process.sleep(:infinity) end, timeout: 100], :blocked,
         "did not answer"},
        {[after_call: fn _, _, _ -> {:rewrite, %{content: 42}} end], :blocked,
         "not a hook answer"}
      ]

      for {hook, reason, text} <- cases do
        r = run([Echo], call("echo", %{"text" => "x"}), hooks: [[{:name, "h"} | hook]])
        assert r.reason == reason, inspect({hook, r})
        assert r.content =~ text
        assert r.content =~ "hook h"
      end
    end

    test "a bad :hooks option is an error result, not a crash" do
      r = run([Echo], call("echo", %{"text" => "x"}), hooks: [[before_call: 1]])
      assert r.is_error and r.content =~ "invalid :hooks option"
    end

    test "a stop ends the call with :abort set" do
      hooks = [[before_call: fn _, _ -> %{stop: "enough"} end]]
      r = run([Echo], call("echo", %{"text" => "x"}), hooks: hooks)
      assert {r.reason, r.abort} == {:aborted, "enough"}
    end
  end

  test "matching hooks run concurrently" do
    # A barrier: each hook checks in and waits to be let go, which happens only once both have
    # checked in. Sequential hooks would wait for ever, time out, and so deny the call (the
    # time-out only bounds that hang).
    barrier =
      spawn_link(fn ->
        first = receive(do: ({:arrived, pid} -> pid))
        second = receive(do: ({:arrived, pid} -> pid))
        for pid <- [first, second], do: send(pid, :go)
      end)

    wait_both = fn _, _ ->
      send(barrier, {:arrived, self()})
      receive(do: (:go -> :allow))
    end

    hooks = [[before_call: wait_both, timeout: 30_000], [before_call: wait_both, timeout: 30_000]]
    assert run([Echo], call("echo", %{"text" => "x"}), hooks: hooks).content == "x"
  end

  test "matchers: only matching tools' hooks run" do
    hooks = [[match: "count|other", before_call: fn _, _ -> {:deny, "no"} end]]
    assert run([Echo], call("echo", %{"text" => "x"}), hooks: hooks).content == "x"
    assert run([Count], call("count", %{"n" => 1}), hooks: hooks).reason == :denied
    regex = [[match: "^ec.o$", before_call: fn _, _ -> {:deny, "no"} end]]
    assert run([Echo], call("echo", %{"text" => "x"}), hooks: regex).reason == :denied
  end

  defmodule Dotted do
    @behaviour CMDC.Tool
    def name, do: "fs.read"
    def description, do: "A tool whose name OpenAI is given as fs_read."
    def parameters, do: %{"type" => "object"}
    def execute(_, _), do: {:ok, "read"}
  end

  test "a tool called by a provider's mapped name matches its own name too" do
    hooks = [[match: "^fs\\.read$", before_call: fn _, _ -> {:deny, "no"} end]]
    assert run([Dotted], call("fs_read", %{}), hooks: hooks).reason == :denied
    assert run([Dotted], call("fs_read", %{}), []).content == "read"
  end

  test "hooks attached to a registry, then to a session, then given to the run: in that order" do
    reg = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(reg, Echo)
    c = ctx()
    rw = fn text -> [before_call: fn _, _ -> {:rewrite, %{"text" => text}} end] end
    :ok = Hooks.attach(reg, [rw.("registry")])
    :ok = Hooks.attach({:session, c.session_id}, [rw.("session"), Audit])
    assert length(Hooks.attached({:session, c.session_id})) == 2

    assert run(reg, call("echo", %{"text" => "x"}), [], c).content == "session"
    assert_received {:before, "echo", %{"text" => "x"}}
    assert_received {:after, "echo", "session"}

    assert run(reg, call("echo", %{"text" => "x"}), [hooks: [rw.("runner")]], c).content ==
             "runner"

    # Another session of the same registry sees only the registry's hooks.
    assert run(reg, call("echo", %{"text" => "x"}), []).content == "registry"

    :ok = Runner.session_event(reg, :shutdown, c)
    assert_received {:session, :shutdown}
    assert Hooks.attached({:session, c.session_id}) == []
    Hooks.detach(reg)
    assert run(reg, call("echo", %{"text" => "x"}), []).content == "x"
  end

  test "attach refuses a bad hook with a message naming it" do
    assert {:error, "the hook nope has none of" <> _} = Hooks.attach(:global, [[name: "nope"]])

    assert {:error, "the hook module NoSuchHook does not exist"} =
             Hooks.attach(:global, [NoSuchHook])

    assert {:error, "the matcher" <> _} =
             Hooks.new([[match: "(", before_call: fn _, _ -> :ok end]])

    assert {:error, "unknown hook option :befor_call; the options are" <> _} =
             Hooks.new([[befor_call: fn _, _ -> :ok end, after_call: fn _, _, _ -> :ok end]])
  end
end
