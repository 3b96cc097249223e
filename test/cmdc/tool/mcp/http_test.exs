defmodule CMDCTest.MCPTools.Regional do
  @moduledoc false
  # Arguments mirrored into HTTP headers (x-mcp-header, MCP 2026-07-28).
  @behaviour CMDC.Tool
  def name, do: "regional"
  def description, do: "Answers with the region it was asked for."

  def parameters do
    %{
      "type" => "object",
      "properties" => %{
        "region" => %{"type" => "string", "x-mcp-header" => "Region"},
        "limit" => %{"type" => "integer", "x-mcp-header" => "Limit"}
      },
      "required" => ["region"]
    }
  end

  def execute(%{"region" => region}, _context), do: {:ok, "served from #{region}"}
end

defmodule CMDC.Tool.MCP.HTTPTest do
  # The Streamable HTTP server against clients nobody here wrote (the official Python and
  # TypeScript SDKs), raw HTTP for what those clients never send, and real OS processes.
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually

  alias CMDC.Test.OsProc
  alias CMDC.Tool.Examples.{Countdown, Echo, ReadFile}
  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.HTTP
  alias CMDC.Tool.MCPServers

  @moduletag timeout: 600_000
  @root Path.expand("../../../..", __DIR__)
  @modern "2026-07-28"
  @meta %{
    "io.modelcontextprotocol/protocolVersion" => @modern,
    "io.modelcontextprotocol/clientCapabilities" => %{}
  }

  setup_all do
    Code.require_file(Path.join(@root, "test/fixtures/mcp_tools/hold.ex"))
    Code.require_file(Path.join(@root, "test/fixtures/mcp_tools/flood.ex"))
    :ok
  end

  defp start(opts \\ []) do
    opts = Keyword.merge([tools: [Echo, ReadFile, Countdown], port: 0], opts)
    server = start_supervised!({HTTP, opts}, id: make_ref())
    {server, HTTP.url(server)}
  end

  defp python do
    {:ok, python} = CMDC.Tool.PythonEnv.python()
    python
  end

  defp py_client(args) do
    client = Path.join(@root, "test/support/mcp_http_client.py")
    {out, status} = System.cmd(python(), [client | args], stderr_to_stdout: true)
    assert status == 0, out
    out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
  end

  # A request as an HTTP client sends it (OTP's httpc: not ours).
  defp post(url, body, headers \\ [], profile \\ :default) do
    headers = Enum.map(headers, fn {k, v} -> {to_charlist(k), to_charlist(v)} end)
    request = {to_charlist(url), headers, ~c"application/json", body}

    {:ok, {{_, status, _}, resp_headers, resp_body}} =
      :httpc.request(:post, request, [timeout: 20_000], [body_format: :binary], profile)

    headers = Map.new(resp_headers, fn {k, v} -> {to_string(k), to_string(v)} end)
    decoded = if resp_body == "", do: nil, else: JSON.decode(resp_body)
    {status, headers, decoded}
  end

  defp modern(id, method, params \\ %{}) do
    JSON.encode!(%{
      "jsonrpc" => "2.0",
      "id" => id,
      "method" => method,
      "params" => Map.put(params, "_meta", @meta)
    })
  end

  defp modern_headers(method, name \\ nil) do
    [{"mcp-protocol-version", @modern}, {"mcp-method", method}] ++
      if(name, do: [{"mcp-name", name}], else: [])
  end

  describe "official Python SDK client (mcp 2.3.0)" do
    test "over HTTP in every mode: 2026-07-28, auto (probe) and legacy (initialize)" do
      {_server, url} = start()

      for {mode, version} <- [{@modern, @modern}, {"auto", @modern}, {"legacy", "2025-11-25"}] do
        report = py_client([mode, url])
        assert report["protocol_version"] == version, mode
        assert report["tools"] == ["countdown", "echo", "read_file"]
        assert report["echo"] == %{"is_error" => false, "text" => "héllo"}
        assert report["bad_args"]["is_error"] == true
        assert report["bad_args"]["text"] =~ "at /text: 5 is not of type"
        assert report["unknown"] =~ "Unknown tool: no_such_tool"
        # Progress reaches the client on the call's own SSE stream, before the result.
        assert report["countdown"]["progress"] == ["3...", "2...", "1..."], mode
        assert report["countdown"]["text"] == "liftoff after 3 steps"
      end
    end

    test "over stdio in both eras (bin/cmdc-mcp)" do
      server = Path.join(@root, "bin/cmdc-mcp")

      for {mode, version} <- [{@modern, @modern}, {"auto", @modern}, {"legacy", "2025-11-25"}] do
        report =
          System.cmd(
            python(),
            [
              Path.join(@root, "test/support/mcp_http_client.py"),
              mode,
              "stdio",
              server,
              "--examples"
            ],
            env: [{"MIX_ENV", "test"}],
            stderr_to_stdout: false
          )
          |> then(fn {out, 0} -> out |> String.split("\n", trim: true) |> List.last() end)
          |> JSON.decode!()

        assert report["protocol_version"] == version, mode
        # A pinned version skips server/discover: the client then knows no server name.
        if mode != @modern, do: assert(report["server_name"] == "cmdc_tool")
        assert report["echo"]["text"] == "héllo"
        assert report["countdown"]["progress"] == ["3...", "2...", "1..."]
      end
    end

    test "subscriptions/listen over HTTP: the client hears of a new tool list" do
      {server, url} = start(list_changed: true)
      marker = Path.join(System.tmp_dir!(), "mcp_listen_#{System.unique_integer([:positive])}")
      on_exit(fn -> File.rm(marker) end)
      parent = self()

      Task.start_link(fn ->
        eventually(fn -> File.exists?(marker) end, within: 60_000)
        HTTP.refresh(server, [Echo, ReadFile])
        send(parent, :refreshed)
      end)

      report = py_client([@modern, url, "--marker", marker])
      assert_received :refreshed
      assert report["honored"] == %{"toolsListChanged" => true}
      assert report["event"] =~ "ToolsListChanged"
      assert report["tools_after"] == ["echo", "read_file"]
    end
  end

  test "official TypeScript SDK client over HTTP (a legacy session, ended with DELETE)" do
    case CMDC.Tool.NodeEnv.sdk() do
      {:error, reason} ->
        IO.puts("\nskipped: TypeScript SDK unavailable: #{reason}")

      {:ok, sdk} ->
        {_server, url} = start()
        client = Path.join(@root, "test/support/mcp_http_client.mjs")
        {out, 0} = System.cmd("node", [client, sdk, url], stderr_to_stdout: true)
        report = out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
        assert report["stream_errors"] == []
        assert is_binary(report["session"])
        assert report["tools"] == ["countdown", "echo", "read_file"]
        assert report["echo"] == %{"isError" => false, "text" => "après"}

        assert report["countdown"] == %{
                 "text" => "liftoff after 3 steps",
                 "progress" => ["3...", "2...", "1..."]
               }

        assert report["unknown"] =~ "Unknown tool: nope"
        # terminateSession sent DELETE: the session is gone.
        {status, _, _} =
          post(url, JSON.encode!(%{"jsonrpc" => "2.0", "id" => 1, "method" => "tools/list"}), [
            {"mcp-session-id", report["session"]}
          ])

        assert status == 404
    end
  end

  test "bin/cmdc-mcp --http 0 serves the project's tools; off loopback it needs credentials" do
    bin = Path.join(@root, "bin/cmdc-mcp")

    port =
      Port.open({:spawn_executable, bin}, [
        :binary,
        :stderr_to_stdout,
        {:line, 4096},
        args: ["--examples", "--http", "0"],
        env: [{~c"MIX_ENV", ~c"test"}],
        cd: @root
      ])

    {:os_pid, os_pid} = Port.info(port, :os_pid)
    on_exit(fn -> System.cmd("kill", ["-9", "#{os_pid}"], stderr_to_stdout: true) end)
    url = await_url(port)
    report = py_client(["auto", url])
    assert report["protocol_version"] == @modern
    assert "countdown" in report["tools"]
    assert report["echo"]["text"] == "héllo"

    {out, 2} =
      System.cmd(bin, ["--http", "0", "--host", "0.0.0.0"],
        env: [{"MIX_ENV", "test"}],
        stderr_to_stdout: true
      )

    assert out =~ "--host off loopback needs --token-file, CMDC_MCP_TOKEN or --oauth-introspect"
  end

  defp await_url(port) do
    receive do
      {^port, {:data, {:eol, "cmdc-mcp: serving MCP on " <> url}}} -> url
      {^port, {:data, _}} -> await_url(port)
    after
      300_000 -> flunk("bin/cmdc-mcp --http never said where it serves")
    end
  end

  describe "requests no SDK sends" do
    test "modern requests need their headers (-32020), and an envelope or a session" do
      {_server, url} = start()
      call = modern(1, "tools/call", %{"name" => "echo", "arguments" => %{"text" => "x"}})

      assert {200, _, {:ok, %{"result" => %{"resultType" => "complete"}}}} =
               post(url, call, modern_headers("tools/call", "echo"))

      {400, _, {:ok, reply}} = post(url, call)
      assert reply["error"]["code"] == -32_020
      assert reply["error"]["message"] =~ "MCP-Protocol-Version header is missing"
      {400, _, {:ok, reply}} = post(url, call, modern_headers("tools/list"))
      assert reply["error"]["code"] == -32_020

      bare = JSON.encode!(%{"jsonrpc" => "2.0", "id" => 2, "method" => "tools/list"})
      {400, _, {:ok, reply}} = post(url, bare)
      assert reply["error"]["message"] =~ "send initialize"

      meta = Map.put(@meta, "io.modelcontextprotocol/protocolVersion", "2030-01-01")

      body =
        JSON.encode!(%{
          "jsonrpc" => "2.0",
          "id" => 3,
          "method" => "tools/list",
          "params" => %{"_meta" => meta}
        })

      headers = [{"mcp-protocol-version", "2030-01-01"}, {"mcp-method", "tools/list"}]
      {400, _, {:ok, reply}} = post(url, body, headers)
      assert reply["error"]["code"] == -32_022
      assert reply["error"]["data"]["requested"] == "2030-01-01"

      assert {404, _, {:ok, %{"error" => %{"code" => -32_601}}}} =
               post(url, modern(4, "ping"), modern_headers("ping"))

      assert {400, _, {:ok, %{"error" => %{"code" => -32_700}}}} = post(url, "{not json", [])
    end

    test "x-mcp-header arguments: the official client mirrors them, a request without is refused" do
      {_server, url} = start(tools: [Echo, CMDCTest.MCPTools.Regional])

      code = """
      import asyncio, json, sys
      from mcp import Client
      async def main():
          async with Client(sys.argv[1], mode="2026-07-28") as c:
              await c.list_tools()
              r = await c.call_tool("regional", {"region": "Zürich", "limit": 3})
              print(json.dumps({"text": r.content[0].text, "error": r.is_error}))
      asyncio.run(main())
      """

      {out, 0} = System.cmd(python(), ["-c", code, url], stderr_to_stdout: true)

      assert out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!() == %{
               "text" => "served from Zürich",
               "error" => false
             }

      body =
        modern(1, "tools/call", %{
          "name" => "regional",
          "arguments" => %{"region" => "eu", "limit" => 3}
        })

      h = modern_headers("tools/call", "regional")
      {400, _, {:ok, reply}} = post(url, body, h)
      assert reply["error"]["code"] == -32_020
      assert reply["error"]["message"] =~ "Mcp-Param-"
      {400, _, _} = post(url, body, [{"mcp-param-region", "us"}, {"mcp-param-limit", "3"} | h])

      assert {200, _, _} =
               post(url, body, [{"mcp-param-region", "eu"}, {"mcp-param-limit", "3.0"} | h])
    end

    test "Origin and Host from elsewhere are refused (DNS rebinding)" do
      {_server, url} = start()
      body = modern(1, "tools/list")
      ok = modern_headers("tools/list")
      assert {200, _, _} = post(url, body, [{"origin", "http://localhost:3000"} | ok])
      {403, _, {:ok, reply}} = post(url, body, [{"origin", "https://evil.example"} | ok])
      assert reply["error"]["message"] =~ "Origin https://evil.example is not allowed"
      assert {403, _, _} = post(url, body, [{"origin", "null"} | ok])
      assert {403, _, _} = post(url, body, [{"host", "evil.example:80"} | ok])
      {_server, url} = start(allowed_origins: ["https://app.example"])
      assert {200, _, _} = post(url, body, [{"origin", "https://app.example"} | ok])
    end

    test "a bearer token: missing or wrong gets 401 with WWW-Authenticate" do
      token = Base.encode64(:crypto.strong_rand_bytes(24))
      {_server, url} = start(auth: {:bearer, token})
      body = modern(1, "tools/list")
      {401, headers, {:ok, reply}} = post(url, body, modern_headers("tools/list"))
      assert headers["www-authenticate"] =~ "Bearer"
      assert reply["error"]["message"] =~ "authentication required"

      {401, headers, _} =
        post(url, body, [{"authorization", "Bearer wrong"} | modern_headers("tools/list")])

      assert headers["www-authenticate"] =~ ~s(error="invalid_token")

      assert {200, _, {:ok, %{"result" => %{"tools" => [_, _, _]}}}} =
               post(url, body, [
                 {"authorization", "Bearer " <> token} | modern_headers("tools/list")
               ])
    end

    test "OAuth 2.1 resource server: RFC 9728 metadata, RFC 7662 introspection, audience" do
      port = free_port()
      resource = "http://127.0.0.1:#{port}/mcp"
      introspection = MCPServers.introspection(python(), resource) <> "/introspect"

      {_server, url} =
        start(
          port: port,
          auth:
            {:oauth,
             introspection_url: introspection,
             authorization_servers: ["https://auth.example"],
             client_id: "rs",
             client_secret: "secret"}
        )

      assert url == resource
      metadata_url = "http://127.0.0.1:#{port}/.well-known/oauth-protected-resource/mcp"

      {:ok, {{_, 200, _}, _, json}} =
        :httpc.request(:get, {to_charlist(metadata_url), []}, [], body_format: :binary)

      assert %{"resource" => ^resource, "authorization_servers" => ["https://auth.example"]} =
               JSON.decode!(json)

      body = modern(1, "tools/list")
      h = modern_headers("tools/list")
      {401, headers, _} = post(url, body, h)
      assert headers["www-authenticate"] == ~s(Bearer resource_metadata="#{metadata_url}")

      for {token, why} <- [
            {"foreign-token", "not issued for #{resource}"},
            {"expired-token", "expired"},
            {"unknown-token", "not active"}
          ] do
        {401, headers, {:ok, reply}} =
          post(url, body, [{"authorization", "Bearer " <> token} | h])

        assert headers["www-authenticate"] =~
                 ~s(resource_metadata="#{metadata_url}", error="invalid_token")

        assert reply["error"]["message"] =~ why, token
      end

      assert {200, _, {:ok, %{"result" => %{"tools" => [_, _, _]}}}} =
               post(url, body, [{"authorization", "Bearer good-token"} | h])

      # The official client with a token for this server.
      report = py_client_with_token(url, "good-token")
      assert report["echo"]["text"] == "héllo"
    end
  end

  defp py_client_with_token(url, token) do
    code = """
    import asyncio, json, sys, httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    async def main():
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + sys.argv[2]})
        async with Client(streamable_http_client(sys.argv[1], http_client=http), mode="auto") as c:
            r = await c.call_tool("echo", {"text": "héllo"})
            print(json.dumps({"echo": {"text": r.content[0].text}}))
    asyncio.run(main())
    """

    {out, 0} = System.cmd(python(), ["-c", code, url, token], stderr_to_stdout: true)
    out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
  end

  defp free_port do
    {:ok, socket} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(socket)
    :gen_tcp.close(socket)
    port
  end

  defp read_until(socket, text, seen \\ "") do
    if String.contains?(seen, text) do
      seen
    else
      {:ok, more} = :gen_tcp.recv(socket, 0, 10_000)
      read_until(socket, text, seen <> more)
    end
  end

  defp initialize(url, profile \\ :default) do
    init = %{"protocolVersion" => "2025-11-25", "capabilities" => %{}}

    body =
      JSON.encode!(%{"jsonrpc" => "2.0", "id" => 1, "method" => "initialize", "params" => init})

    {200, %{"mcp-session-id" => session}, _} = post(url, body, [], profile)
    {:ok, session}
  end

  # A tools/call of a tool that writes its `sleep`'s pid to `pid_file`, sent on a raw socket
  # (SSE accepted): that pid once the file is there.
  defp call_holding(socket, name, args, meta, pid_file) do
    params = %{"name" => name, "arguments" => args, "_meta" => Map.merge(@meta, meta)}

    body =
      JSON.encode!(%{"jsonrpc" => "2.0", "id" => 1, "method" => "tools/call", "params" => params})

    request =
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" <>
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: #{@modern}\r\n" <>
        "Mcp-Method: tools/call\r\nMcp-Name: #{name}\r\nContent-Length: #{byte_size(body)}\r\n\r\n" <>
        body

    :ok = :gen_tcp.send(socket, request)
    eventually(fn -> File.exists?(pid_file) end, within: 30_000)
    pid_file |> File.read!() |> String.trim() |> String.to_integer()
  end

  defp drain(socket) do
    case :gen_tcp.recv(socket, 0, 10_000) do
      {:ok, _} -> drain(socket)
      {:error, reason} -> reason
    end
  end

  describe "limits and lifecycles" do
    test "a client vanishing mid-call cancels the call: the tool and its OS process die" do
      {_server, url} = start(tools: [Echo, CMDCTest.MCPTools.Hold])

      pid_file =
        Path.join(System.tmp_dir!(), "mcp_http_hold_#{System.unique_integer([:positive])}")

      on_exit(fn -> File.rm(pid_file) end)
      %URI{port: port} = URI.parse(url)
      {:ok, socket} = :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false])

      sleep_pid = call_holding(socket, "hold", %{"pid_file" => pid_file}, %{}, pid_file)
      assert OsProc.running?(sleep_pid)
      :gen_tcp.close(socket)
      assert OsProc.wait_dead(sleep_pid), "sleep #{sleep_pid} outlived its cancelled call"
      # The server goes on.
      assert {200, _, _} = post(url, modern(2, "tools/list"), modern_headers("tools/list"))
    end

    test "sessions unused for :session_idle_ms are gone (the client then initializes again)" do
      # The server's clock is the test's: nothing sleeps through an idle time or a sweep.
      clock = :counters.new(1, [])
      now = fn -> :counters.get(clock, 1) end
      {server, url} = start(session_idle_ms: 60_000, clock: now)
      {:ok, session} = initialize(url)
      list = JSON.encode!(%{"jsonrpc" => "2.0", "id" => 2, "method" => "tools/list"})
      :counters.put(clock, 1, 59_999)
      assert {200, _, _} = post(url, list, [{"mcp-session-id", session}])
      # Used at 59,999: gone at 119,999.
      :counters.put(clock, 1, 119_998)
      assert {200, _, _} = post(url, list, [{"mcp-session-id", session}])
      :counters.put(clock, 1, 179_999)
      {404, _, {:ok, reply}} = post(url, list, [{"mcp-session-id", session}])
      assert reply["error"]["message"] =~ "initialize again"
      {:ok, _other} = initialize(url)
      :counters.put(clock, 1, 240_000)
      assert HTTP.sweep(server) == 1
    end

    # Issue 36 item 3: 12,000 initialize filled the table and every new client got 503 for an
    # hour; ids were not tied to who opened them.
    test "sessions are per principal: a flood evicts only the flooder's own, ids do not travel" do
      {_server, url} = start(max_sessions_per_principal: 20, max_sessions: 100)
      # Another client: another source address (all of 127/8 is this host).
      profile = :"mcp_other_#{System.unique_integer([:positive])}"
      {:ok, _} = :inets.start(:httpc, profile: profile)
      on_exit(fn -> :inets.stop(:httpc, profile) end)
      :ok = :httpc.set_options([socket_opts: [ip: {127, 0, 0, 2}]], profile)
      {:ok, theirs} = initialize(url, profile)
      {:ok, first_own} = initialize(url)
      for _ <- 1..300, do: {:ok, _} = initialize(url)
      list = JSON.encode!(%{"jsonrpc" => "2.0", "id" => 2, "method" => "tools/list"})

      assert {200, _, {:ok, %{"result" => _}}} =
               post(url, list, [{"mcp-session-id", theirs}], profile)

      # The flooder's oldest went (least recently used); its newest work.
      assert {404, _, _} = post(url, list, [{"mcp-session-id", first_own}])
      # Their id from this address is unknown here, and cannot be ended from here.
      assert {404, _, _} = post(url, list, [{"mcp-session-id", theirs}])

      {:ok, {{_, 404, _}, _, _}} =
        :httpc.request(
          :delete,
          {to_charlist(url), [{~c"mcp-session-id", to_charlist(theirs)}]},
          [],
          []
        )

      assert {200, _, _} = post(url, list, [{"mcp-session-id", theirs}], profile)
    end

    # Issue 36 item 2: a stream nobody read grew the VM by GBs; now progress is dropped, then
    # the stream is closed and the call cancelled.
    test "a call whose client never reads its stream is cancelled: the tool's OS process dies" do
      {_server, url} =
        start(
          tools: [Echo, CMDCTest.MCPTools.Flood],
          stream_soft_bytes: 16_384,
          stream_hard_bytes: 65_536
        )

      pid_file =
        Path.join(System.tmp_dir!(), "mcp_http_flood_#{System.unique_integer([:positive])}")

      on_exit(fn -> File.rm(pid_file) end)
      %URI{port: port} = URI.parse(url)
      # A small receive buffer: the server's writes stall soon.
      {:ok, socket} =
        :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false, recbuf: 4096])

      args = %{"pid_file" => pid_file, "size" => 4096}

      meta = %{"progressToken" => "p1"}
      sleep_pid = call_holding(socket, "flood", args, meta, pid_file)
      # Never read: the stream is closed once the client is 64 kB behind, the call with it.
      assert OsProc.wait_dead(sleep_pid, 30_000), "sleep #{sleep_pid} outlived its call"
      # What the client finds when it reads at last: the start of the stream, then the end.
      assert {:ok, "HTTP/1.1 200 OK" <> _} = :gen_tcp.recv(socket, 0, 10_000)
      assert drain(socket) in [:closed, :econnreset]
      assert {200, _, _} = post(url, modern(2, "tools/list"), modern_headers("tools/list"))
    end

    test "legacy sessions: initialize mints Mcp-Session-Id, unknown ids are 404, GET is 405" do
      {server, url} = start(list_changed: true)

      init = %{
        "protocolVersion" => "2025-06-18",
        "capabilities" => %{},
        "clientInfo" => %{"name" => "t", "version" => "1"}
      }

      body =
        JSON.encode!(%{"jsonrpc" => "2.0", "id" => 1, "method" => "initialize", "params" => init})

      {200, headers, {:ok, reply}} = post(url, body)
      assert reply["result"]["protocolVersion"] == "2025-06-18"
      session = headers["mcp-session-id"]
      assert byte_size(session) > 16
      list = JSON.encode!(%{"jsonrpc" => "2.0", "id" => 2, "method" => "tools/list"})

      assert {200, _, {:ok, %{"result" => %{"tools" => [_, _, _]}}}} =
               post(url, list, [{"mcp-session-id", session}])

      assert {404, _, _} = post(url, list, [{"mcp-session-id", "nope"}])
      assert reply["result"]["capabilities"]["tools"] == %{"listChanged" => true}
      {:ok, {{_, 405, _}, _, _}} = :httpc.request(:get, {to_charlist(url), []}, [], [])
      assert reply["result"]["capabilities"]["tools"] == %{"listChanged" => true}

      # The session's GET stream hears of a new tool list.
      {:ok, socket} =
        :gen_tcp.connect({127, 0, 0, 1}, HTTP.port(server), [:binary, active: false])

      :ok =
        :gen_tcp.send(
          socket,
          "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n" <>
            "Mcp-Session-Id: #{session}\r\n\r\n"
        )

      assert {:ok, "HTTP/1.1 200 OK" <> head} = :gen_tcp.recv(socket, 0, 10_000)
      assert head =~ "text/event-stream"
      HTTP.refresh(server, [Echo, Countdown])
      assert read_until(socket, "notifications/tools/list_changed") =~ "event: message"
      :gen_tcp.close(socket)
      # The session's next request sees the new list.
      assert {200, _, {:ok, %{"result" => %{"tools" => [_, _]}}}} =
               post(url, list, [{"mcp-session-id", session}])

      # notifications/cancelled stops the session's call; its POST gets an answer at once.
      session_headers = [{"mcp-session-id", session}]
      params = %{"name" => "countdown", "arguments" => %{"n" => 1000, "delay_ms" => 50}}

      slow =
        JSON.encode!(%{
          "jsonrpc" => "2.0",
          "id" => 7,
          "method" => "tools/call",
          "params" => params
        })

      # On a connection of its own (httpc would queue the cancel behind it on a shared one).
      {:ok, profile} =
        :inets.start(:httpc, profile: :"mcp_cancel_#{System.unique_integer([:positive])}")

      on_exit(fn -> :inets.stop(:httpc, profile) end)
      call = Task.async(fn -> post(url, slow, session_headers, profile) end)

      cancel = %{
        "jsonrpc" => "2.0",
        "method" => "notifications/cancelled",
        "params" => %{"requestId" => 7}
      }

      # A cancel that comes before the server runs request 7 is ignored (as the spec says):
      # sent again until the call answers.
      answer =
        eventually(fn ->
          assert {202, _, nil} = post(url, JSON.encode!(cancel), session_headers)
          Task.yield(call, 100)
        end)

      assert {:ok,
              {200, _, {:ok, %{"id" => 7, "error" => %{"message" => "Request cancelled" <> _}}}}} =
               answer

      {:ok, {{_, 204, _}, _, _}} =
        :httpc.request(
          :delete,
          {to_charlist(url), [{~c"mcp-session-id", to_charlist(session)}]},
          [],
          []
        )

      assert {404, _, _} = post(url, list, session_headers)
    end
  end
end
