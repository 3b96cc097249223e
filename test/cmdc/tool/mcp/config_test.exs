defmodule CMDC.Tool.MCPConfigTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.MCP.{Config, Servers}
  alias CMDC.Tool.MCPServers

  import ExUnit.CaptureLog

  doctest Config

  @moduletag :capture_log
  @moduletag timeout: 120_000
  @keepalive Path.expand("../../../support/mcp_keepalive.py", __DIR__)

  setup do
    dir = Path.join(System.tmp_dir!(), "cmdc-mcpcfg-#{System.unique_integer([:positive])}")
    project = Path.join(dir, "project")
    home = Path.join(dir, "home")
    File.mkdir_p!(project)
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{project: project, home: home}
  end

  defp write_json(path, term) do
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, CMDC.Tool.JSON.encode!(term))
    path
  end

  describe "bad configs name the file and the server" do
    test "invalid JSON", %{project: project} do
      path = Path.join(project, ".mcp.json")
      File.write!(path, ~s|{"mcpServers": {"a": |)

      assert {[], [%{path: ^path, server: nil, reason: reason}]} = Config.read(path, %{})
      assert reason =~ "#{path}: invalid JSON"
    end

    test "unknown transport, missing command or url, unset variable; the good one stays",
         %{project: project} do
      path =
        write_json(Path.join(project, ".mcp.json"), %{
          "mcpServers" => %{
            "good" => %{"command" => "srv", "args" => ["--token", "${TOKEN}"]},
            "nocmd" => %{"args" => ["x"]},
            "weird" => %{"type" => "websocket", "url" => "ws://x"},
            "nourl" => %{"type" => "http"},
            "unset" => %{"type" => "http", "url" => "https://x/${MISSING_VAR}/mcp"},
            "hdr" => %{
              "type" => "http",
              "url" => "https://example.com/mcp",
              "headers" => %{"Authorization" => "Bearer ${TOKEN}"}
            }
          }
        })

      {servers, errors} = Config.read(path, %{"TOKEN" => "t0k"})

      assert [
               %{name: "good", transport: {:stdio, %{args: ["--token", "t0k"]}}},
               %{name: "hdr", transport: {:http, %{headers: %{"Authorization" => "Bearer t0k"}}}}
             ] = servers

      reasons = Map.new(errors, &{&1.server, &1.reason})

      assert reasons["nocmd"] ==
               ~s|#{path}: server "nocmd": no "command" (a stdio server needs one)|

      assert reasons["weird"] ==
               ~s|#{path}: server "weird": unknown transport "websocket" (supported: stdio, http)|

      assert reasons["nourl"] == ~s|#{path}: server "nourl": no "url" (an http server needs one)|
      assert reasons["unset"] =~ ~s(server "unset": ${MISSING_VAR} is not set)
    end
  end

  describe "Servers.load/1" do
    setup %{project: project} do
      {:ok, %{command: python, args: args}} = MCPServers.python_stdio()

      write_json(Path.join(project, ".mcp.json"), %{
        "mcpServers" => %{
          "py" => %{"command" => python, "args" => args, "env" => %{"PYTHONUNBUFFERED" => "1"}},
          "ghost" => %{"command" => "no-such-mcp-server-cmdc"},
          "broken" => %{"type" => "stdio"}
        }
      })

      %{python: python, args: args}
    end

    test "one broken server never stops the others; errors name the file and the server",
         %{project: project, home: home} = ctx do
      # A user-level server with the same name loses to the project's (first wins).
      claude =
        write_json(Path.join(home, ".claude.json"), %{
          "mcpServers" => %{"py" => %{"command" => ctx.python, "args" => ctx.args}}
        })

      report =
        Servers.load(
          cwd: project,
          home: home,
          cmdc_home: nil,
          trust_project: true,
          reserved: ["py__cancelled"],
          init_timeout: 30_000
        )

      on_exit(fn -> Servers.stop(report) end)
      names = Enum.map(report.tools, & &1.name)
      assert "py__add" in names
      refute "py__cancelled" in names

      add = Enum.find(report.tools, &(&1.name == "py__add"))
      assert %{kind: :mcp, server: "py", provider: "mcp:py", source: :project} = add

      assert {:ok, "4"} = add.module.execute(%{"a" => 2, "b" => 2}, CMDC.Context.new())

      mcp_json = Path.join(project, ".mcp.json")
      by_server = Enum.group_by(report.errors, &Map.get(&1, :server))
      assert [%{reason: broken}] = by_server["broken"]
      assert broken =~ ~s(#{mcp_json}: server "broken": no "command")
      assert [%{type: :mcp_server, reason: ghost}] = by_server["ghost"]
      assert ghost =~ mcp_json
      assert ghost =~ "MCP server ghost"
      assert ghost =~ "no-such-mcp-server-cmdc"

      assert Enum.any?(report.errors, &(&1.type == :conflict and &1.path == claude))

      assert Enum.any?(
               report.errors,
               &(&1.type == :conflict and &1[:name] == "py__cancelled" and &1.winner == :reserved)
             )
    end

    test "an untrusted project's servers are not started", %{project: project, home: home} do
      report = Servers.load(cwd: project, home: home, cmdc_home: nil, trust_project: false)
      assert report.tools == [] and report.clients == []
      assert [%{type: :untrusted, reason: reason}] = report.ignored
      assert reason =~ "not trusted"
      assert reason =~ "trust_project: true"
    end
  end

  # The counting server, stopped with the test.
  defp counting_server(python) do
    port = MCPServers.free_port()
    {:ok, exec} = CMDC.Tool.Exec.start(python, [@keepalive, "keepalive", "#{port}", "30"])
    on_exit(fn -> CMDC.Tool.Exec.cancel(exec) end)
    true = MCPServers.wait_port(port)
    "http://127.0.0.1:#{port}/mcp"
  end

  defp python! do
    System.find_executable("python3") || flunk("python3 is needed by the counting server")
  end

  # Writes `.mcp.json` with `servers` and loads it as a trusted project.
  defp load(%{project: project, home: home}, servers) do
    write_json(Path.join(project, ".mcp.json"), %{"mcpServers" => servers})

    report =
      Servers.load(
        cwd: project,
        home: home,
        cmdc_home: nil,
        trust_project: true,
        sources: [:project],
        init_timeout: 30_000
      )

    on_exit(fn -> Servers.stop(report) end)
    assert report.errors == []
    Map.new(report.tools, &{&1.name, &1.module})
  end

  defp stats(url) do
    {:ok, stats} = MCPServers.stats(url)
    stats
  end

  defp echo(tools, server, n) do
    for i <- 1..n do
      text = "#{i}"
      assert {:ok, ^text} = tools["#{server}__echo"].execute(%{"text" => text}, ctx())
    end
  end

  defp ctx, do: CMDC.Context.new()

  # The `"cmdc"` keys of an HTTP server, loaded by Servers.load/1 and counted by real servers:
  # the suite's connection-counting server (test/support/mcp_keepalive.py) and the official
  # Python SDK's server behind a counting TCP relay.
  describe ~s("cmdc" keys of an HTTP server) do
    test "keepAlive: false opens a connection per request; without it, one is kept", ctx do
      python = python!()
      on = counting_server(python)
      off = counting_server(python)

      tools =
        load(ctx, %{
          "kept" => %{"type" => "http", "url" => on},
          "fresh" => %{"type" => "http", "url" => off, "cmdc" => %{"keepAlive" => false}}
        })

      echo(tools, "kept", 5)
      echo(tools, "fresh", 5)
      # the probe, tools/list and 5 calls: 7 requests each
      assert %{"connections" => 1, "requests" => 7} = stats(on)
      assert %{"connections" => 7, "requests" => 7} = stats(off)
      # Each closed after its request (the relay may see a close just after the next open, so
      # two can overlap for a moment; none is left open).
      assert MCPServers.wait_stat(off, "open", 0, 30_000)
      assert stats(off)["max_open"] <= 2
    end

    test "httpIdleMs and httpConnections reach the client", ctx do
      python = python!()
      idle = counting_server(python)
      narrow = counting_server(python)

      tools =
        load(ctx, %{
          "idle" => %{"url" => idle, "cmdc" => %{"httpIdleMs" => 3_000}},
          "narrow" => %{"type" => "http", "url" => narrow, "cmdc" => %{"httpConnections" => 2}}
        })

      # One connection carried the probe, tools/list and both calls (each within 3 s of the
      # last, even on a loaded machine); the client closes it once idle for 3 s (the server
      # would wait 30 s), so the next call opens another.
      echo(tools, "idle", 2)
      assert %{"connections" => 1, "requests" => 4} = stats(idle)
      assert MCPServers.wait_stat(idle, "open", 0, 30_000)
      echo(tools, "idle", 1)
      assert %{"connections" => 2} = stats(idle)

      sleep = tools["narrow__sleep"]

      results =
        1..8
        |> Enum.map(fn _ -> Task.async(fn -> sleep.execute(%{"seconds" => 0.2}, ctx()) end) end)
        |> Enum.map(&Task.await(&1, 30_000))

      assert Enum.all?(results, &(&1 == {:ok, "slept"}))
      assert %{"max_open" => max_open, "connections" => connections} = stats(narrow)
      assert max_open <= 2 and connections <= 2
    end

    test "the official Python SDK's server: keepAlive: false, one new connection per call", ctx do
      {:ok, url, _exec} = MCPServers.python_http("http-stateless")
      {relay, count} = MCPServers.relay(URI.parse(url).port)
      relayed = "http://127.0.0.1:#{relay}/mcp"

      tools =
        load(ctx, %{
          "sdk" => %{"type" => "http", "url" => relayed, "cmdc" => %{"keepAlive" => false}}
        })

      before = Agent.get(count, & &1)

      for _ <- 1..10,
          do: assert({:ok, "5"} = tools["sdk__add"].execute(%{"a" => 2, "b" => 3}, ctx()))

      assert Agent.get(count, & &1) == before + 10
    end
  end

  describe "bad values name the file, the server and the key" do
    test "each bad value is its server's error; the good servers stay" do
      bad = %{
        "a" => %{"keepAlive" => "no"},
        "b" => %{"httpConnections" => 0},
        "c" => %{"httpIdleMs" => 1.5},
        "d" => %{"httpConnections" => "4"},
        "e" => %{"keepAlive" => nil},
        "f" => ["keepAlive"]
      }

      servers =
        bad
        |> Map.new(fn {name, ours} ->
          {name, %{"url" => "http://127.0.0.1:9/mcp", "cmdc" => ours}}
        end)
        |> Map.put("good", %{"type" => "http", "url" => "http://127.0.0.1:9/mcp"})

      json = CMDC.Tool.JSON.encode!(%{"mcpServers" => servers})
      {[good], errors} = Config.parse(json, "/p/.mcp.json", %{})
      assert good.name == "good" and not Map.has_key?(good, :limits)
      assert good.transport == {:http, %{url: "http://127.0.0.1:9/mcp", headers: %{}}}

      reasons = Map.new(errors, &{&1.server, &1.reason})

      assert reasons == %{
               "a" =>
                 ~s(/p/.mcp.json: server "a": "cmdc.keepAlive" must be true or false, got "no"),
               "b" =>
                 ~s(/p/.mcp.json: server "b": "cmdc.httpConnections" must be a positive integer, got 0),
               "c" =>
                 ~s(/p/.mcp.json: server "c": "cmdc.httpIdleMs" must be a positive integer, got 1.5),
               "d" =>
                 ~s(/p/.mcp.json: server "d": "cmdc.httpConnections" must be a positive integer, got "4"),
               "e" =>
                 ~s(/p/.mcp.json: server "e": "cmdc.keepAlive" must be true or false, got nil),
               "f" =>
                 ~s|/p/.mcp.json: server "f": "cmdc" must be an object (keys: httpConnections, httpIdleMs, keepAlive), got ["keepAlive"]|
             }
    end

    test "an unknown key is logged with the nearest one and ignored; stdio ignores the object" do
      json =
        CMDC.Tool.JSON.encode!(%{
          "mcpServers" => %{
            "h" => %{
              "url" => "http://127.0.0.1:9/mcp",
              "cmdc" => %{"keepalive" => false, "httpConnections" => 3},
              "timeout" => 5
            },
            "s" => %{"command" => "srv", "cmdc" => %{"keepAlive" => "ignored"}}
          }
        })

      log =
        capture_log(fn ->
          assert {[h, s], []} = Config.parse(json, "/p/.mcp.json", %{})
          assert h.transport == {:http, %{url: "http://127.0.0.1:9/mcp", headers: %{}}}
          assert h.limits == [http_connections: 3]
          assert {:stdio, %{command: "srv"}} = s.transport
          refute Map.has_key?(s, :limits)
        end)

      assert log =~
               ~s|/p/.mcp.json: server "h": "cmdc.keepalive" is not a key cmdc_tool reads (did you mean "keepAlive"?); ignored|
    end
  end
end
