defmodule CMDC.Tool.MCPHostileTest do
  # Issue 23 items 1-4: hostile MCP servers (test/support/mcp_hostile.py, one mode per case).
  # Each test runs a well-behaved server beside the hostile one and checks that it keeps
  # answering, that the hostile server's pending request fails promptly with a clear error,
  # and (for floods) that memory, the client's mailbox and scheduler lateness stay bounded while
  # the flooder is slowed down by the exec layer's credit window, not restarted; figures are
  # printed.
  use ExUnit.Case, async: false

  alias CMDC.Tool.MCP.{Client, Slots}

  import CMDC.Tool.LoadProbe, only: [timed: 1]
  alias CMDC.Tool.LoadProbe

  @moduletag timeout: 180_000
  @moduletag :capture_log
  @script Path.expand("../../../support/mcp_hostile.py", __DIR__)

  setup_all do
    case System.find_executable("python3") do
      nil -> {:ok, skip: "python3 is not installed"}
      python -> {:ok, python: python}
    end
  end

  defp hostile(ctx, mode, opts \\ []) do
    args = [@script, mode | Enum.map(List.wrap(opts[:n]), &to_string/1)]
    name = opts[:name] || mode

    client_opts =
      [name: name, transport: {:stdio, %{command: ctx.python, args: args}}, init_timeout: 20_000]
      |> Keyword.merge(Keyword.drop(opts, [:n, :name]))

    start_supervised!({Client, client_opts}, id: name)
  end

  defp good(ctx), do: hostile(ctx, "good", name: "good")

  defp echo(client) do
    :ok = Client.await_ready(client)
    [tool] = Client.tools(client)
    tool.execute(%{"text" => "still here"}, CMDC.Context.new())
  end

  describe "malformed messages are protocol errors of their server (item 1)" do
    for {mode, expected} <- [
          {"list_array", "a response's result is not an object: []"},
          {"init_array", "a response's result is not an object"},
          {"caps_array", "capabilities is not an object"}
        ] do
      test "#{mode}: fails its request at once, the other server answers", ctx do
        good = good(ctx)
        bad = hostile(ctx, unquote(mode))
        {result, ms} = timed(fn -> Client.await_ready(bad, 20_000) end)
        assert {:error, message} = result
        assert message =~ unquote(expected)
        assert message =~ "MCP server #{unquote(mode)}"
        assert ms < 5_000, "failed after #{ms} ms"
        assert :ok = Client.await_ready(good)
        assert {:ok, "still here"} = echo(good)
        assert Process.alive?(bad)
      end
    end

    test "progress with array params and an array result: the call fails, nothing crashes",
         ctx do
      good = good(ctx)
      bad = hostile(ctx, "progress_list")
      :ok = Client.await_ready(bad)

      {result, ms} =
        timed(fn -> Client.call_tool(bad, "echo", %{}, on_progress: fn _ -> :ok end) end)

      assert {:error, message} = result
      assert message =~ "result is not an object"
      assert ms < 5_000
      assert Client.info(bad).status == :ready
      assert {:ok, "still here"} = echo(good)
    end
  end

  describe "undecodable answers fail their request promptly (item 4)" do
    for {mode, expected} <- [
          {"bad_utf8", "does not decode"},
          {"huge_line", "over 16777216 bytes"},
          {"endless_cursor", "max_pages"},
          {"silent_list", "tools/list unanswered after 3000 ms"}
        ] do
      test "#{mode}", ctx do
        good = good(ctx)
        bad = hostile(ctx, unquote(mode), limits: [request_timeout: 3_000])
        {result, ms} = timed(fn -> Client.await_ready(bad, 30_000) end)
        IO.puts("\n#{unquote(mode)}: failed after #{ms} ms")
        assert {:error, message} = result
        assert message =~ unquote(expected)
        assert ms < 10_000
        assert {:ok, "still here"} = echo(good)
      end
    end

    test "a 5,000-deep inputSchema: the tool is left out with the reason", ctx do
      bad = hostile(ctx, "deep")
      {result, ms} = timed(fn -> Client.await_ready(bad, 30_000) end)
      IO.puts("\ndeep schema: settled after #{ms} ms: #{inspect(result)}")
      assert ms < 10_000

      case result do
        :ok ->
          assert Client.tools(bad) == []
          assert [problem] = Client.info(bad).problems
          assert problem =~ "nests deeper than 64"

        {:error, message} ->
          assert message =~ "does not decode"
      end
    end
  end

  describe "isolation (item 2)" do
    test "a server crashing in a loop is marked failed with its reason; others answer", ctx do
      good = good(ctx)

      bad = hostile(ctx, "crash_loop", limits: [max_restarts: 2, restart_window: 60_000])

      assert {:error, _} = Client.await_ready(bad, 20_000)
      info = wait_until(fn -> Client.info(bad) end, &(&1.status == :failed), 20_000)
      assert info.last_error =~ "marked failed"
      assert info.last_error =~ "exited with status 7"
      assert {:error, message} = Client.call_tool(bad, "echo", %{})
      assert message =~ "marked failed"
      assert {:ok, "still here"} = echo(good)
    end

    test "a server that cannot start is logged once, not at every retry" do
      log =
        ExUnit.CaptureLog.capture_log([level: :warning], fn ->
          client =
            start_supervised!(
              {Client, name: "ghost", transport: {:stdio, %{command: "no-such-mcp-cmdc-x"}}},
              id: "ghost"
            )

          Process.sleep(2_000)
          assert Client.info(client).restarts >= 3
        end)

      assert length(String.split(log, "no-such-mcp-cmdc-x")) - 1 == 1
    end

    test "a crash message never quotes stderr written during an earlier call", ctx do
      client = hostile(ctx, "good", name: "stale")
      :ok = Client.await_ready(client)
      assert {:ok, _} = Client.call_tool(client, "echo", %{"text" => "noisy"})
      Process.sleep(300)
      assert {:error, message} = Client.call_tool(client, "echo", %{"text" => "die"})
      assert message =~ "exited with status 9"
      refute message =~ "something odd"
    end

    test "a client killed outright (no terminate/2) still frees its tool slots", ctx do
      good = good(ctx)
      :ok = Client.await_ready(good)
      [tool] = Client.tools(good)
      held = Slots.stats().in_use
      Process.unlink(good)
      Process.exit(good, :kill)
      wait_until(fn -> Slots.stats().in_use end, &(&1 == held - 1), 5_000)
      assert Slots.lookup(tool) == nil
    end

    test "Servers: a client process that crashes in a loop takes no other server down", ctx do
      home = Path.join(System.tmp_dir!(), "cmdc-hostile-#{System.unique_integer([:positive])}")
      File.mkdir_p!(home)

      File.write!(
        Path.join(home, ".mcp.json"),
        CMDC.Tool.JSON.encode!(%{
          "mcpServers" => %{
            "good" => %{"command" => ctx.python, "args" => [@script, "good"]},
            "loop" => %{"command" => ctx.python, "args" => [@script, "good"]}
          }
        })
      )

      report =
        CMDC.Tool.MCP.Servers.load(cwd: home, home: home, cmdc_home: nil, trust_project: true)

      on_exit(fn -> CMDC.Tool.MCP.Servers.stop(report) end)
      clients = Map.new(report.clients)

      # Kill the "loop" client over and over (as a crashing bug would): its own supervisor
      # restarts it, then gives up; the shared supervisor and the other client never move.
      shared = Process.whereis(CMDC.Tool.MCP.ClientSupervisor)

      for _ <- 1..6 do
        case client_named("loop") do
          nil -> :ok
          pid -> Process.exit(pid, :kill)
        end

        Process.sleep(100)
      end

      assert client_named("loop") == nil
      assert Process.whereis(CMDC.Tool.MCP.ClientSupervisor) == shared

      assert Process.alive?(clients["good"])
      assert {:ok, "still here"} = echo(clients["good"])
    end
  end

  describe "limits and remote tools at scale (items 2-3)" do
    test "40,000 tools: refused by max_tools, the VM untouched; 2,000 tools stop in < 1 s",
         ctx do
      atoms = :erlang.system_info(:atom_count)
      big = hostile(ctx, "many", n: 40_000, name: "big", limits: [max_tools: 1_000])
      {result, ms} = timed(fn -> Client.await_ready(big, 60_000) end)
      assert {:error, message} = result
      assert message =~ "max_tools (1000)"
      IO.puts("\n40,000 tools: refused after #{ms} ms: #{message}")

      big = hostile(ctx, "many", n: 40_000, name: "big2", limits: [max_tools: 50_000])
      assert {:error, message} = Client.await_ready(big, 60_000)
      assert message =~ "max_total_tools (20000)"

      two = hostile(ctx, "many", n: 2_000, name: "two")
      {result, ready_ms} = timed(fn -> Client.await_ready(two, 60_000) end)
      assert result == :ok
      assert length(Client.tools(two)) == 2_000
      [first | _] = Client.tools(two)
      assert first.name() =~ "two__tool_0_"
      in_use = Slots.stats().in_use
      {stopped, stop_ms} = timed(fn -> stop_supervised("two") end)
      assert stopped == :ok
      IO.puts("2,000 tools: ready in #{ready_ms} ms, stopped in #{stop_ms} ms")
      assert stop_ms < 1_000
      assert Slots.stats().in_use <= in_use - 2_000
      # A freed slot says its tool is gone; once purged (in the background) it is no module.
      try do
        first.name()
        flunk("a stopped server's tool still answers")
      rescue
        e in ArgumentError -> assert Exception.message(e) =~ "no longer holds an MCP tool"
        UndefinedFunctionError -> :purged
      end

      IO.puts("atoms grew #{:erlang.system_info(:atom_count) - atoms} over 82,000 listed tools")
    end

    # Purging thousands of modules takes the code server a while (earlier tests leave many
    # free slots to purge too): the time is the machine's, not the stop's.
    @tag timeout: 600_000
    # 500 tools a cycle (was 2,000): what is checked is that a cycle leaves nothing and a second
    # adds nothing, which a count the warm pool cannot hide (64) shows as well; each purged slot
    # costs the code server 2-25 ms, the bulk of this test's time. The stop time of 2,000
    # tools is the test above's.
    @cycle 500
    test "#{@cycle} tools: a stop leaves the VM as it was (modules, ETS rows, processes, " <>
           "ports, OS processes, atoms); a second cycle adds nothing",
         ctx do
      # Free slots are purged once free for 30 s by default: at once here.
      Application.put_env(:cmdc_tool, :mcp_slot_linger_ms, 0)
      assert Slots.settle(300_000) == :ok
      # A first small cycle loads the code every cycle runs and fills the warm pool (64 free
      # slots stay loaded): what follows is the cycles' alone.
      cycle(ctx, "warmup", 100)
      base = vm_state()
      first = cycle(ctx, "first", @cycle)
      one = vm_state()
      second = cycle(ctx, "second", @cycle)
      two = vm_state()
      %{warm: warm} = Slots.stats()

      IO.puts("""
      \n#{@cycle} tools, two start/stop cycles (warm pool #{warm}):
        stop #{first.stop_ms} / #{second.stop_ms} ms; slots purged after #{first.settle_ms} / \
      #{second.settle_ms} ms (in the background)
        modules #{base.modules} -> #{first.loaded.modules} loaded -> #{one.modules} -> \
      #{second.loaded.modules} -> #{two.modules}
        ETS rows #{base.ets_rows} -> #{one.ets_rows} -> #{two.ets_rows}; processes \
      #{base.processes} -> #{one.processes} -> #{two.processes}; ports #{base.ports} -> \
      #{one.ports} -> #{two.ports}; OS children #{base.os_children} -> #{one.os_children} -> \
      #{two.os_children}
        atoms #{base.atoms} -> #{one.atoms} (+#{one.atoms - base.atoms}) -> #{two.atoms} \
      (+#{two.atoms - one.atoms})
      """)

      for run <- [first, second] do
        assert run.stop_ms < 1_000
        assert run.settle == :ok
        assert run.loaded.modules >= base.modules + @cycle - warm
      end

      # Each cycle leaves the VM as it found it: as many modules (the warm pool's slots, which
      # ones may change), ETS rows, processes, ports and OS processes. The first makes at most
      # one slot name (atom) per tool, the second none.
      slot? = &String.starts_with?(Atom.to_string(&1), "Elixir.CMDC.Tool.MCP.Tools.Slot")

      for {before, now} <- [{base, one}, {one, two}] do
        assert Enum.all?(MapSet.difference(now.loaded, before.loaded), slot?)
        # Slots other clients still hold (a server started by this module's setup) stay.
        assert Enum.count(now.loaded, slot?) <= warm + Slots.stats().in_use

        assert Map.drop(now, [:loaded, :atoms]) == Map.drop(before, [:loaded, :atoms])
      end

      assert :ets.info(Slots, :size) <= Slots.stats().in_use
      assert one.atoms - base.atoms <= @cycle
      assert Map.drop(two, [:loaded]) == Map.drop(one, [:loaded])
    end

    # 750 names a listing (was 3,000): the limit is on listings, which the round in the names
    # counts; each listing's slots are purged after the test, so more names only cost time.
    test "list_changed after every listing with 750 new names: relists are rate-limited",
         ctx do
      atoms = :erlang.system_info(:atom_count)
      relist = hostile(ctx, "relist_loop", n: 750, limits: [max_relists_per_minute: 3])
      :ok = Client.await_ready(relist, 60_000)
      Process.sleep(3_000)
      grown = :erlang.system_info(:atom_count) - atoms
      IO.puts("\nrelist loop: atoms grew #{grown} in 3 s")
      # At most two listings' slots at once (the one in use and the one replacing it).
      assert grown < 2_500
      assert Client.info(relist).status == :ready
      # Tool names carry the listing's round: 1 first listing + at most 3 relists a minute.
      [tool | _] = Client.tools(relist)
      [_, round] = Regex.run(~r/tool_(\d+)_/, tool.name())
      IO.puts("relist loop: #{String.to_integer(round) + 1} listings in 3 s (max 1 + 3)")
      assert String.to_integer(round) <= 3
    end
  end

  describe "floods (item 3): backpressure, not restarts" do
    for mode <- ["stderr_flood", "notify_flood"] do
      test "#{mode}: memory and the client's mailbox stay bounded for 4 s; nobody is " <>
             "restarted; both servers answer during it",
           ctx do
        good = good(ctx)
        :ok = Client.await_ready(good)
        :erlang.garbage_collect()
        before = :erlang.memory(:total)
        late = LoadProbe.lateness()
        bad = hostile(ctx, unquote(mode))
        :ok = Client.await_ready(bad)
        # 4 s (was 10): the credit window bounds the flood from its first lines on; a longer
        # flood only repeats the same samples (8 calls of the other server still run in it).
        watch = watch_flood(bad, good, before, 4_000)
        worst = LoadProbe.stop(late)
        growth = div(watch.peak - before, 1_048_576)
        info = Client.info(bad)
        {own, own_ms} = timed(fn -> echo(bad) end)

        IO.puts(
          "\n#{unquote(mode)} (4 s): memory growth peak #{growth} MB, flooder's mailbox " <>
            "peak #{watch.queue} messages, worst scheduler lateness #{worst} ms; the other " <>
            "server's #{length(watch.calls)} calls during it: #{inspect(Enum.uniq(watch.calls))}; " <>
            "the flooder: #{info.status}, #{info.restarts} restarts, its own call " <>
            "#{inspect(own)} in #{own_ms} ms"
        )

        assert growth < 100
        # The window (64) plus at most one dropped-lines notice per stderr line and callers.
        assert watch.queue <= 160
        assert Enum.uniq(watch.calls) == [{:ok, "still here"}]
        assert {info.status, info.restarts, info.last_error} == {:ready, 0, nil}
        assert {:ok, "still here"} = own
      end
    end
  end

  # Samples memory and the flooder's mailbox every 100 ms and calls the good server every
  # 500 ms, for `ms`.
  defp watch_flood(bad, good, before, ms) do
    Enum.reduce(1..div(ms, 100), %{peak: before, queue: 0, calls: []}, fn i, acc ->
      Process.sleep(100)
      {:message_queue_len, queued} = Process.info(bad, :message_queue_len)
      calls = if rem(i, 5) == 0, do: [echo(good) | acc.calls], else: acc.calls
      %{peak: max(acc.peak, :erlang.memory(:total)), queue: max(acc.queue, queued), calls: calls}
    end)
  end

  # Starts a client of `n` tools, stops it, waits for the slots beyond the warm pool to be
  # purged; the stop's and the purge's times and the VM while the tools were loaded.
  defp cycle(ctx, name, n) do
    client = hostile(ctx, "many", n: n, name: name)
    :ok = Client.await_ready(client, 60_000)
    ^n = length(Client.tools(client))
    loaded = vm_state()
    {:ok, stop_ms} = timed(fn -> stop_supervised(name) end)
    {settle, settle_ms} = timed(fn -> Slots.settle(240_000) end)
    %{stop_ms: stop_ms, settle: settle, settle_ms: settle_ms, loaded: loaded}
  end

  defp vm_state do
    loaded = MapSet.new(:code.all_loaded(), &elem(&1, 0))

    %{
      loaded: loaded,
      modules: MapSet.size(loaded),
      ets_rows: Enum.sum(Enum.map(:ets.all(), &(:ets.info(&1, :size) || 0))),
      processes: length(Process.list()),
      ports: length(Port.list()),
      os_children: os_children(),
      atoms: :erlang.system_info(:atom_count)
    }
  end

  # Live OS processes whose parent is this VM.
  defp os_children do
    me = System.pid()

    Path.wildcard("/proc/[0-9]*/stat")
    |> Enum.count(fn stat ->
      case File.read(stat) do
        {:ok, text} ->
          [_, rest] = String.split(text, ") ", parts: 2)
          [state, ppid | _] = String.split(rest, " ")
          ppid == me and state != "Z"

        _ ->
          false
      end
    end)
  end

  defp client_named(name) do
    CMDC.Tool.MCP.ClientSupervisor
    |> DynamicSupervisor.which_children()
    |> Enum.map(fn {_, sup, _, _} -> CMDC.Tool.MCP.Client.Supervisor.client(sup) end)
    |> Enum.find(&(is_pid(&1) and Client.info(&1).name == name))
  end

  defp wait_until(fun, ok?, ms) do
    value = fun.()

    cond do
      ok?.(value) -> value
      ms <= 0 -> flunk("condition not met: #{inspect(value)}")
      true -> Process.sleep(100) && wait_until(fun, ok?, ms - 100)
    end
  end
end
