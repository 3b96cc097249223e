defmodule CMDC.Tool.RunnerTest.Keys do
  @moduledoc false
  @behaviour CMDC.Tool
  def name, do: "keys"
  def description, do: "Shows the arguments it got."
  def parameters, do: %{"type" => "object", "required" => ["path"]}
  def execute(args, _ctx), do: {:ok, inspect(args)}
end

defmodule CMDC.Tool.RunnerTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.Runner
  doctest CMDC.Tool.Result

  import ExUnit.CaptureLog

  alias CMDC.Tool.Runner
  alias CMDC.Tool.Examples.Echo
  alias CMDC.Tool.TestTools, as: T

  @tools [
    Echo,
    T.Sleep,
    T.Raise,
    T.Throw,
    T.BadReturn,
    T.Stream,
    T.Effect,
    T.Spawner,
    T.Big,
    T.Fails,
    T.Asker,
    T.Exclusive,
    T.Logged,
    T.Aborter,
    T.Lifecycle,
    T.BadLifecycle
  ]

  defp ctx(fields \\ []),
    do: CMDC.Context.new(Keyword.merge([session_id: "s-#{System.unique_integer()}"], fields))

  defp call(name, args, id \\ "c1"), do: %{id: id, name: name, arguments: args}

  test "success, tool error and effect results" do
    assert %{content: "hi", is_error: false, id: "c1", name: "echo"} =
             Runner.run(@tools, call("echo", %{"text" => "hi"}), ctx())

    assert %{content: "it did not work", is_error: true} =
             Runner.run(@tools, call("fails", %{}), ctx())

    assert %{effect: {:sub_agent, %{answer: 42}}, is_error: false, content: nil} =
             Runner.run(@tools, call("effect", %{}), ctx())
  end

  test "arguments as the JSON text the model sent" do
    assert %{content: "hé"} = Runner.run(@tools, call("echo", ~s({"text": "hé"})), ctx())

    assert %{is_error: true, reason: :invalid, content: text} =
             Runner.run(@tools, call("echo", "{"), ctx())

    assert text =~ "invalid JSON"
  end

  test "atom keys (nested too) reach execute/2 as strings, on a list and on a registry" do
    args = %{path: "a", opts: %{"s" => nil, deep: 1}, list: [%{k: true}, 2]}

    expected =
      inspect(%{
        "path" => "a",
        "opts" => %{"deep" => 1, "s" => nil},
        "list" => [%{"k" => true}, 2]
      })

    assert %{content: ^expected} =
             Runner.run([CMDC.Tool.RunnerTest.Keys], call("keys", args), ctx())

    reg = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.RunnerTest.Keys)
    assert %{content: ^expected} = Runner.run(reg, call("keys", args), ctx())
    # Validation sees the string keys: "required" holds for an atom-keyed map.
    assert %{is_error: true, reason: :invalid} = Runner.run(reg, call("keys", %{other: 1}), ctx())
  end

  test "unknown tools answer with the nearest names" do
    assert %{is_error: true, reason: :unknown_tool, content: text} =
             Runner.run(@tools, call("ecoh", %{}), ctx())

    assert text =~ "Unknown tool: ecoh"
    assert text =~ "echo"
  end

  test "invalid arguments become an error result the model can act on" do
    assert %{is_error: true, reason: :invalid, content: text} =
             Runner.run(@tools, call("echo", %{"text" => 1}), ctx())

    assert text =~ "at /text: 1 is not of type \"string\""
    assert text =~ "Accepted parameters: text (string, required)"
  end

  test "raise, exit and a wrong return shape become short error results, reported to Logger" do
    log =
      capture_log(fn ->
        assert %{is_error: true, reason: :crashed, content: text} =
                 Runner.run(@tools, call("raise", %{}), ctx())

        assert text =~ "the tool failed: boom in <source>"
        refute text =~ "runner_tools.ex"

        assert %{is_error: true, content: "the tool failed (exit): :oops"} =
                 Runner.run(@tools, call("throw", %{}), ctx())

        assert %{is_error: true, content: bad} =
                 Runner.run(@tools, call("bad_return", %{}), ctx())

        assert bad =~ "invalid result"
      end)

    assert log =~ "boom in"
    assert log =~ "runner_tools.ex"
  end

  test "time-outs kill the tool and say so" do
    started = System.monotonic_time(:millisecond)

    assert %{is_error: true, reason: :timeout, content: "timed out after 100 ms"} =
             Runner.run(@tools, call("sleep", %{"ms" => 60_000}), ctx(), timeout: 100)

    # Over before the tool would have ended (a busy machine may take seconds to say so).
    assert System.monotonic_time(:millisecond) - started < 60_000
    # The tool's own default applies without an option.
    assert %{content: "slept 10"} = Runner.run(@tools, call("sleep", %{"ms" => 10}), ctx())
  end

  test "streaming: partial results arrive in order before the final result" do
    me = self()

    result =
      Runner.run(@tools, call("stream", %{"n" => 50}), ctx(), on_update: &send(me, {:part, &1}))

    assert result.content == "done 50"

    parts =
      for _ <- 1..50,
          do:
            (receive do
               {:part, p} -> p
             after
               30_000 -> nil
             end)

    assert parts == Enum.map(1..50, &"step #{&1}")
  end

  test "cancel stops the tool and the processes it started" do
    handle =
      Runner.async(
        @tools,
        call("spawner", %{"report_to" => :erlang.pid_to_list(self()) |> to_string()}),
        ctx()
      )

    assert_receive {:child, child, tool}
    assert Process.alive?(child) and Process.alive?(tool)
    Runner.cancel(handle)
    assert %{is_error: true, reason: :cancelled} = Runner.await(handle)
    refute_alive(tool)
    refute_alive(child)
  end

  test "cancel kills the OS processes the tool started through Exec (whole process group)" do
    me = :erlang.pid_to_list(self()) |> to_string()
    handle = Runner.async([CMDC.Tool.TestTools.Shell], call("shell", %{"to" => me}), ctx())
    assert_receive {:os_started, os_pid}
    {children, 0} = System.cmd("pgrep", ["-g", Integer.to_string(os_pid)])
    group = String.split(children)
    assert length(group) >= 2
    Runner.cancel(handle)
    assert %{reason: :cancelled} = Runner.await(handle)

    for pid <- group,
        do: assert(CMDC.Test.OsProc.wait_dead(String.to_integer(pid)), "#{pid} survived")
  end

  test "the caller dying stops the tool" do
    me = self()

    caller =
      spawn(fn ->
        Runner.run(
          @tools,
          call("spawner", %{"report_to" => :erlang.pid_to_list(me) |> to_string()}),
          ctx()
        )
      end)

    assert_receive {:child, child, tool}
    Process.exit(caller, :kill)
    refute_alive(tool)
    refute_alive(child)
  end

  test "oversized text is cut with a visible marker, on a character boundary" do
    result = Runner.run(@tools, call("big", %{}), ctx(), max_output: 1001)
    assert result.content =~ "[output truncated:"
    assert String.valid?(result.content)
    assert byte_size(result.content) < 1100
  end

  describe "permissions" do
    test "deny, and ask without an approver (headless) means not run" do
      assert %{is_error: true, reason: :denied, content: text} =
               Runner.run(@tools, call("echo", %{"text" => "x"}), ctx(),
                 policies: %{"echo" => :deny}
               )

      assert text =~ "not allowed"
      assert %{reason: :denied, content: text} = Runner.run(@tools, call("asker", %{}), ctx())
      assert text =~ "headless"
    end

    test "ask_once asks once per session; ask_always every time" do
      me = self()
      approver = fn req -> send(me, {:asked, req.tool}) && :allow end
      c = ctx()

      assert %{content: "approved and ran"} =
               Runner.run(@tools, call("asker", %{}), c, approver: approver)

      assert %{content: "approved and ran"} =
               Runner.run(@tools, call("asker", %{}), c, approver: approver)

      assert_received {:asked, "asker"}
      refute_received {:asked, "asker"}

      opts = [approver: approver, policies: %{"echo" => :ask_always}]
      Runner.run(@tools, call("echo", %{"text" => "1"}), c, opts)
      Runner.run(@tools, call("echo", %{"text" => "2"}), c, opts)
      assert_received {:asked, "echo"}
      assert_received {:asked, "echo"}

      deny = fn _ -> {:deny, "not today"} end

      assert %{content: "asker was not approved: not today"} =
               Runner.run(@tools, call("asker", %{}), ctx(), approver: deny)
    end
  end

  test "a registry: lookup, did-you-mean and per-tool settings overriding the tool's own" do
    reg = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(reg, [Echo, T.Sleep, T.Asker])
    assert %{content: "hi"} = Runner.run(reg, call("echo", %{"text" => "hi"}), ctx())
    assert %{reason: :unknown_tool, content: text} = Runner.run(reg, call("eco", %{}), ctx())
    assert text =~ "echo"

    :ok = CMDC.Tool.Registry.put_settings(reg, "sleep", %{timeout_ms: 50})

    assert %{reason: :timeout, content: "timed out after 50 ms"} =
             Runner.run(reg, call("sleep", %{"ms" => 5_000}), ctx())

    :ok = CMDC.Tool.Registry.put_settings(reg, "asker", %{policy: :auto})
    assert %{content: "approved and ran"} = Runner.run(reg, call("asker", %{}), ctx())
  end

  describe "run_many/4" do
    test "keeps order and isolates failures" do
      calls = [
        call("echo", %{"text" => "a"}, "1"),
        call("raise", %{}, "2"),
        call("nope", %{}, "3"),
        call("echo", %{"text" => "d"}, "4")
      ]

      results =
        capture_log(fn -> send(self(), {:r, Runner.run_many(@tools, calls, ctx())}) end) &&
          receive(do: ({:r, r} -> r))

      assert Enum.map(results, & &1.id) == ["1", "2", "3", "4"]
      assert Enum.map(results, & &1.is_error) == [false, true, true, false]
    end

    test "runs concurrently, and an exclusive tool never beside another call" do
      {:ok, _} = Agent.start_link(fn -> [] end, name: :runner_log)
      log = %{"log" => "runner_log"}

      calls = [
        call("logged", log, "1"),
        call("logged", log, "2"),
        call("exclusive", log, "3"),
        call("logged", log, "4")
      ]

      results = Runner.run_many(@tools, calls, ctx())
      assert Enum.all?(results, &(not &1.is_error))
      events = Agent.get(:runner_log, &Enum.reverse/1)

      {[_, _ | _] = before, [{:exclusive_start, xs}, {:exclusive_end, xe} | rest]} =
        Enum.split_while(events, &(elem(&1, 0) != :exclusive_start))

      assert Enum.all?(before, fn {_, t} -> t <= xs end)
      assert Enum.all?(rest, fn {_, t} -> t >= xe end)
      # The first two ran side by side: both started before either ended.
      assert [{:start, _}, {:start, _}, {:end, _}, {:end, _}] = before
    end

    test "an abort cancels the rest of the turn" do
      calls = [call("aborter", %{}, "1"), call("sleep", %{"ms" => 5_000}, "2")]
      [a, b] = Runner.run_many(@tools, calls, ctx())
      assert a.abort == "user pressed stop" and a.is_error
      assert b.is_error and b.reason == :aborted
    end
  end

  test "lifecycle events reach on_session/2; a crashing handler is only a warning" do
    log =
      capture_log(fn ->
        assert :ok = Runner.session_event(@tools, :start, ctx(assigns: %{test: self()}))
      end)

    assert_received {:session, :start}
    assert log =~ "lifecycle bug"
  end

  test "observers get start, update and end events with the duration" do
    Runner.run(@tools, call("stream", %{"n" => 1}), ctx(), subscriber: self())
    assert_received {:cmdc_tool_event, :start, %{name: "stream"}}
    assert_received {:cmdc_tool_event, :update, "step 1"}
    assert_received {:cmdc_tool_event, :end, %{name: "stream", duration_us: d}} when d > 0
  end

  # Waits for the process to end (a monitor sees it; no polling): a generous bound, since the
  # test is about whether it ends, not how fast.
  defp refute_alive(pid) do
    ref = Process.monitor(pid)
    assert_receive {:DOWN, ^ref, :process, ^pid, _}
  end
end
