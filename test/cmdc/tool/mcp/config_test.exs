defmodule CMDC.Tool.MCPConfigTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.MCP.{Config, Servers}
  alias CMDC.Tool.MCPServers

  doctest Config

  @moduletag :capture_log
  @moduletag timeout: 120_000

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
end
