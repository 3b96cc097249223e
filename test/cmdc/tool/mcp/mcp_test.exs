defmodule CMDC.Tool.MCPTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.MCP

  alias CMDC.Test.MCPIO
  alias CMDC.Tool.MCP
  alias CMDC.Tool.Examples.{Echo, ReadFile}

  defp req(id, method, params \\ %{}),
    do: %{"jsonrpc" => "2.0", "id" => id, "method" => method, "params" => params}

  defp initialized(tools, opts \\ []) do
    {[_], state} = MCP.handle(req(0, "initialize"), MCP.new(tools, opts))
    state
  end

  describe "protocol" do
    test "initialize negotiates 2025-06-18 and 2025-11-25, else offers the newest" do
      state = MCP.new([Echo])

      for {asked, got} <- [
            {"2025-06-18", "2025-06-18"},
            {"2025-11-25", "2025-11-25"},
            {"2024-11-05", "2025-11-25"},
            {nil, "2025-11-25"}
          ] do
        {[reply], _} = MCP.handle(req(1, "initialize", %{"protocolVersion" => asked}), state)
        assert reply["result"]["protocolVersion"] == got
      end
    end

    test "listChanged is advertised only when the server will send it" do
      {[plain], _} = MCP.handle(req(1, "initialize"), MCP.new([Echo]))
      assert plain["result"]["capabilities"]["tools"] == %{}
      {[watching], _} = MCP.handle(req(1, "initialize"), MCP.new([Echo], list_changed: true))
      assert watching["result"]["capabilities"]["tools"] == %{"listChanged" => true}
    end

    test "requests other than ping before initialize get Invalid Request; unknown stay unknown" do
      state = MCP.new([Echo])

      for method <- ["tools/list", "tools/call"] do
        {[reply], ^state} = MCP.handle(req(1, method, %{"name" => "echo"}), state)
        assert reply["error"]["code"] == -32_600
        assert reply["error"]["message"] =~ "not initialized"
      end

      assert {[%{"result" => %{}}], _} = MCP.handle(req(2, "ping"), state)

      assert {[%{"error" => %{"code" => -32_601}}], _} =
               MCP.handle(req(3, "resources/list"), state)

      # server/discover is modern: without its envelope it says what is missing.
      {[reply], _} = MCP.handle(req(4, "server/discover"), state)
      assert reply["error"]["code"] == -32_602
      assert reply["error"]["message"] =~ "io.modelcontextprotocol/protocolVersion"
    end

    test "tools/list pages with an opaque cursor" do
      state = initialized([Echo, ReadFile], page_size: 1)
      {[r1], _} = MCP.handle(req(1, "tools/list"), state)
      assert [%{"name" => "echo", "inputSchema" => %{"type" => "object"}}] = r1["result"]["tools"]
      cursor = r1["result"]["nextCursor"]
      {[r2], _} = MCP.handle(req(2, "tools/list", %{"cursor" => cursor}), state)
      assert [%{"name" => "read_file"}] = r2["result"]["tools"]
      refute Map.has_key?(r2["result"], "nextCursor")
      {[r3], _} = MCP.handle(req(3, "tools/list", %{"cursor" => "garbage"}), state)
      assert r3["error"]["code"] == -32_602
    end

    test "tools/call becomes a call effect; unknown tools are JSON-RPC errors with a hint" do
      state = initialized([Echo])

      params = %{
        "name" => "echo",
        "arguments" => %{"text" => "a"},
        "_meta" => %{"progressToken" => 7}
      }

      assert {[{:call, %{id: 1, module: Echo, arguments: %{"text" => "a"}, progress_token: 7}}],
              _} = MCP.handle(req(1, "tools/call", params), state)

      {[reply], _} = MCP.handle(req(2, "tools/call", %{"name" => "ehco"}), state)
      assert reply["error"]["code"] == -32_602
      assert reply["error"]["message"] =~ "Did you mean: echo"
    end

    test "malformed requests get proper errors" do
      state = initialized([Echo])
      assert {[%{"error" => %{"code" => -32_601}}], _} = MCP.handle(req(1, "nope"), state)
      assert {[%{"error" => %{"code" => -32_600}}], _} = MCP.handle(%{"id" => 1}, state)
      assert {[%{"error" => %{"code" => -32_600}}], _} = MCP.handle([req(1, "ping")], state)
      assert {[%{"error" => %{"code" => -32_600}}], _} = MCP.handle(req([1], "ping"), state)
      params = %{"name" => "echo", "arguments" => [1]}

      assert {[%{"error" => %{"code" => -32_602}}], _} =
               MCP.handle(req(1, "tools/call", params), state)

      assert %{"error" => %{"code" => -32_700}} = MCP.parse_error("x")
    end

    test "results: errors and invalid arguments are isError results" do
      assert %{"isError" => false, "content" => [%{"text" => "t"}]} = MCP.call_result({:ok, "t"})
      assert %{"isError" => true} = MCP.call_result({:error, "bad"})
      assert %{"isError" => true} = MCP.call_result({:invalid, "bad args"})
      assert %{"content" => [%{"text" => ~s({"a":1})}]} = MCP.call_result({:effect, %{a: 1}})
    end
  end

  describe "2026-07-28 (stateless)" do
    @meta %{
      "io.modelcontextprotocol/protocolVersion" => "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities" => %{},
      "io.modelcontextprotocol/clientInfo" => %{"name" => "t", "version" => "1"}
    }

    defp modern(id, method, params \\ %{}),
      do: req(id, method, Map.put(params, "_meta", @meta))

    test "server/discover, tools/list and tools/call need no initialize and change no state" do
      state = MCP.new([ReadFile, Echo])
      {[discover], ^state} = MCP.handle(modern(1, "server/discover"), state)

      assert %{
               "supportedVersions" => ["2026-07-28"],
               "capabilities" => %{"tools" => %{}},
               "resultType" => "complete",
               "cacheScope" => "private",
               "ttlMs" => 60_000,
               "_meta" => %{"io.modelcontextprotocol/serverInfo" => %{"name" => "cmdc_tool"}}
             } = discover["result"]

      {[list], ^state} = MCP.handle(modern(2, "tools/list"), state)
      # Deterministic: tool-name order, whatever order the tools were given in.
      assert ["echo", "read_file"] == Enum.map(list["result"]["tools"], & &1["name"])
      assert %{"resultType" => "complete", "ttlMs" => 60_000} = list["result"]

      params = %{"name" => "echo", "arguments" => %{"text" => "a"}}
      {[{:call, call}], ^state} = MCP.handle(modern(3, "tools/call", params), state)
      assert %{id: 3, module: Echo, modern: true} = call

      assert %{"id" => 3, "result" => %{"resultType" => "complete", "isError" => false} = r} =
               MCP.call_reply(state, call, {:ok, "a"})

      assert r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "cmdc_tool"
      # Legacy results stay as they were.
      legacy = MCP.call_reply(state, %{call | modern: false}, {:ok, "a"})
      refute Map.has_key?(legacy["result"], "resultType")
    end

    test "ping is gone; unknown versions get -32022 listing every version spoken" do
      state = MCP.new([Echo])
      assert {[%{"error" => %{"code" => -32_601}}], _} = MCP.handle(modern(1, "ping"), state)
      meta = Map.put(@meta, "io.modelcontextprotocol/protocolVersion", "2099-01-01")
      {[reply], _} = MCP.handle(req(2, "tools/list", %{"_meta" => meta}), state)

      assert reply["error"]["code"] == -32_022

      assert reply["error"]["data"] == %{
               "supported" => ["2026-07-28", "2025-11-25", "2025-06-18"],
               "requested" => "2099-01-01"
             }

      meta = Map.delete(@meta, "io.modelcontextprotocol/clientCapabilities")
      {[reply], _} = MCP.handle(req(3, "tools/list", %{"_meta" => meta}), state)
      assert reply["error"]["code"] == -32_602
      assert reply["error"]["message"] =~ "clientCapabilities"
    end

    test "HTTP headers must match the body (-32020)" do
      state = MCP.new([Echo])
      params = %{"name" => "echo", "arguments" => %{"text" => "a"}}
      good = %{"mcp-protocol-version" => "2026-07-28", "mcp-method" => "tools/call"}

      assert {[{:call, _}], _} =
               MCP.handle(
                 modern(1, "tools/call", params),
                 state,
                 Map.put(good, "mcp-name", "echo")
               )

      for {headers, named} <- [
            {good, "Mcp-Name header is missing"},
            {Map.put(good, "mcp-name", "other"), "Mcp-Name"},
            {%{good | "mcp-method" => "tools/list"} |> Map.put("mcp-name", "echo"), "Mcp-Method"},
            {Map.delete(good, "mcp-protocol-version") |> Map.put("mcp-name", "echo"),
             "MCP-Protocol-Version"}
          ] do
        {[reply], _} = MCP.handle(modern(2, "tools/call", params), state, headers)
        assert reply["error"]["code"] == -32_020, inspect(headers)
        assert reply["error"]["message"] =~ named
      end

      # Mcp-Name as clients encode non-ASCII names.
      encoded = Map.put(good, "mcp-name", "=?base64?" <> Base.encode64("echo") <> "?=")
      assert {[{:call, _}], _} = MCP.handle(modern(3, "tools/call", params), state, encoded)
    end

    test "subscriptions/listen acknowledges only what the server will send" do
      filter = %{"notifications" => %{"toolsListChanged" => true}}
      {[ack, effect], _} = MCP.handle(modern(9, "subscriptions/listen", filter), MCP.new([Echo]))
      assert ack["method"] == "notifications/subscriptions/acknowledged"
      assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 9
      assert ack["params"]["notifications"] == %{}
      assert effect == {:listen, 9, %{}}
      watching = MCP.new([Echo], list_changed: true)

      {[ack, {:listen, 9, honored}], _} =
        MCP.handle(modern(9, "subscriptions/listen", filter), watching)

      assert ack["params"]["notifications"] == %{"toolsListChanged" => true}
      assert honored == %{"toolsListChanged" => true}

      assert MCP.list_changed(9)["params"]["_meta"] == %{
               "io.modelcontextprotocol/subscriptionId" => 9
             }
    end
  end

  test "server: both eras on one stdio stream; a subscription hears of new tools" do
    {:ok, out} = StringIO.open("")
    input = MCPIO.feeder()
    me = self()

    server =
      spawn_link(fn ->
        CMDC.Tool.MCP.Server.serve([Echo], input: input, output: out, list_changed: true)
        send(me, :stopped)
      end)

    meta = %{
      "io.modelcontextprotocol/protocolVersion" => "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities" => %{}
    }

    listen = %{"_meta" => meta, "notifications" => %{"toolsListChanged" => true}}
    MCPIO.feed(input, req(1, "subscriptions/listen", listen))
    call = %{"_meta" => meta, "name" => "echo", "arguments" => %{"text" => "hi"}}
    MCPIO.feed(input, req(2, "tools/call", call))
    [ack, result] = MCPIO.await_frames(out, 2)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert %{"id" => 2, "result" => %{"resultType" => "complete", "isError" => false}} = result
    CMDC.Tool.MCP.Server.refresh(server, [Echo, ReadFile])
    changed = List.last(MCPIO.await_frames(out, 3))
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 1
    # Cancelling the subscription ends it: no more notifications on it.
    MCPIO.feed(input, %{
      "jsonrpc" => "2.0",
      "method" => "notifications/cancelled",
      "params" => %{"requestId" => 1}
    })

    MCPIO.feed(input, req(3, "tools/list", %{"_meta" => meta}))
    MCPIO.await_frames(out, 4)
    CMDC.Tool.MCP.Server.refresh(server, [Echo])
    MCPIO.feed(input, req(4, "tools/list", %{"_meta" => meta}))
    frames = MCPIO.await_frames(out, 5)
    assert Enum.map(Enum.drop(frames, 3), & &1["id"]) == [3, 4]
    MCPIO.eof(input)
    assert_receive :stopped
  end

  test "server: new tool lists send list_changed only when the tools changed; malformed frames never stop it" do
    {:ok, out} = StringIO.open("")
    input = MCPIO.feeder()
    me = self()

    server =
      spawn_link(fn ->
        CMDC.Tool.MCP.Server.serve([Echo], input: input, output: out, list_changed: true)
        send(me, :stopped)
      end)

    send(input, {:feed, "not json\n"})
    send(input, {:feed, ~s({"jsonrpc":"2.0","id":1,"method":"initialize"}\n)})
    send(input, {:feed, ~s({"jsonrpc":"2.0","id":2,"method":"ping"}\n)})
    MCPIO.await_frames(out, 3)
    CMDC.Tool.MCP.Server.refresh(server, [Echo])
    CMDC.Tool.MCP.Server.refresh(server, [Echo, ReadFile])
    send(input, {:feed, ~s({"jsonrpc":"2.0","id":3,"method":"tools/list"}\n)})
    send(input, :eof)
    assert_receive :stopped

    frames =
      out
      |> StringIO.contents()
      |> elem(1)
      |> String.split("\n", trim: true)
      |> Enum.map(&CMDC.Tool.JSON.decode!/1)

    assert [%{"error" => %{"code" => -32_700}}, %{"id" => 1}, %{"id" => 2}, changed, list] =
             frames

    assert changed == %{"jsonrpc" => "2.0", "method" => "notifications/tools/list_changed"}
    assert length(list["result"]["tools"]) == 2
  end

  test "server: without list_changed, a new tool list is served but never announced" do
    {:ok, out} = StringIO.open("")
    input = MCPIO.feeder()
    me = self()

    server =
      spawn_link(fn ->
        CMDC.Tool.MCP.Server.serve([Echo], input: input, output: out)
        send(me, :stopped)
      end)

    send(input, {:feed, ~s({"jsonrpc":"2.0","id":1,"method":"initialize"}\n)})
    MCPIO.await_frames(out, 1)
    CMDC.Tool.MCP.Server.refresh(server, [Echo, ReadFile])
    send(input, {:feed, ~s({"jsonrpc":"2.0","id":2,"method":"tools/list"}\n)})
    send(input, :eof)
    assert_receive :stopped
    {_, text} = StringIO.contents(out)
    frames = text |> String.split("\n", trim: true) |> Enum.map(&CMDC.Tool.JSON.decode!/1)
    assert [%{"id" => 1}, %{"id" => 2} = list] = frames
    assert length(list["result"]["tools"]) == 2
  end

  @tag timeout: 600_000
  test "end to end with the official MCP Python SDK over stdio" do
    {:ok, python} = CMDC.Tool.PythonEnv.python()
    root = Path.expand("../../../..", __DIR__)
    client = Path.join(root, "test/support/mcp_client.py")

    calls =
      CMDC.Tool.JSON.encode!([
        ["read_file", %{"path" => "mix.exs", "limit" => 1}],
        ["countdown", %{"n" => 3, "delay_ms" => 10}],
        ["word_count", %{"text" => "one two three"}],
        ["count_slowly", %{"n" => 2, "delay_ms" => 10}]
      ])

    input = Path.join(System.tmp_dir!(), "mcp_calls_#{System.unique_integer([:positive])}.json")
    File.write!(input, calls)

    {out, status} =
      System.cmd("sh", ["-c", "#{python} #{client} #{root}/bin/cmdc-mcp --examples < #{input}"],
        cd: root,
        env: [{"MIX_ENV", "test"}]
      )

    assert status == 0, out
    report = out |> String.split("\n", trim: true) |> List.last() |> CMDC.Tool.JSON.decode!()
    assert report["protocol_version"] == "2025-11-25"

    expected = ~w(count_slowly countdown echo file_stats read_file slugify word_count)
    assert expected -- report["tools"] == [], out

    assert report["echo"] == %{"is_error" => false, "text" => "héllo"}
    assert report["bad_args"]["is_error"] == true
    assert report["bad_args"]["text"] =~ "at /text: 5 is not of type"
    assert report["unknown"] =~ "Unknown tool: no_such_tool"
    assert [read, countdown, words, slowly] = report["calls"]
    # Python script tools are served like Elixir ones, progress included.
    assert %{"is_error" => false, "text" => "3"} = words
    assert slowly["progress"] == ["1/2", "2/2"]
    assert slowly["text"] == "counted to 2"
    assert %{"name" => "read_file", "is_error" => false, "text" => text} = read
    assert text =~ "defmodule Mix.Tasks.Compile.CmdcNative"
    # Partial results arrive as notifications/progress, in order, before the result.
    assert countdown["progress"] == ["3...", "2...", "1..."]
    assert countdown["text"] == "liftoff after 3 steps"
    # A cancelled call stops (uncancelled, the countdown runs 100 s) and the server keeps serving.
    assert report["cancel_after_ms"] < 100_000
    assert report["after_cancel"] == "still here"
  end
end
