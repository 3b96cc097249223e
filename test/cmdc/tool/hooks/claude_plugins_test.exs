defmodule CMDC.Tool.Hooks.ClaudePluginsTest do
  # Claude Code plugins as a source of hooks: Anthropic's own plugins installed in a test HOME
  # as Claude Code lays them out, their real scripts run by the runner, and plugins broken in
  # each way the plugin rule refuses.
  use ExUnit.Case, async: true

  @moduletag :capture_log

  alias CMDC.Tool.{ClaudeCodePlugins, Discovery, Hooks, Runner}
  alias CMDC.Tool.Discovery.ClaudePlugins

  doctest CMDC.Tool.Discovery.ClaudePlugins
  doctest CMDC.Tool.CLI.Plugins

  defmodule Write do
    # Claude Code's Write tool, as an agent built on this library may offer it.
    @behaviour CMDC.Tool
    def name, do: "Write"
    def description, do: "Writes a file."

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{
          "file_path" => %{"type" => "string"},
          "content" => %{"type" => "string"}
        },
        "required" => ["file_path", "content"]
      }

    def execute(%{"file_path" => path, "content" => text}, _ctx) do
      File.write!(path, text)
      {:ok, "wrote #{byte_size(text)} bytes to #{path}"}
    end
  end

  defmodule Bash do
    @behaviour CMDC.Tool
    def name, do: "Bash"
    def description, do: "Runs a shell command."

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{"command" => %{"type" => "string"}},
        "required" => ["command"]
      }

    def execute(%{"command" => cmd}, ctx) do
      {out, _} = System.cmd("sh", ["-c", cmd], cd: ctx.working_dir, stderr_to_stdout: true)
      {:ok, out}
    end
  end

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_plugins_#{System.unique_integer([:positive])}")
    project = Path.join(root, "project")
    home = Path.join(root, "home")
    File.mkdir_p!(project)
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf!(root) end)
    %{root: root, project: project, home: home}
  end

  defp load(c, opts \\ []), do: Hooks.load([cwd: c.project, home: c.home] ++ opts)

  defp call(c, tools, name, args, config, session \\ "s1") do
    context = %CMDC.Context{session_id: session, working_dir: c.project}

    Runner.run(tools, %{id: "c1", name: name, arguments: args}, context,
      hooks: Hooks.Config.active(config),
      settings_hooks: false
    )
  end

  describe "Anthropic's plugins, installed as Claude Code installs them" do
    test "load with no problem: every hook labelled, CLAUDE_PLUGIN_ROOT expanded and set", c do
      {:ok, roots} = ClaudeCodePlugins.install(c.home, ClaudeCodePlugins.plugins())
      config = load(c)
      assert config.errors == []

      by_plugin = Enum.group_by(config.hooks, & &1.plugin)

      counts =
        Map.new(by_plugin, fn {plugin, hooks} -> {plugin, Enum.map(hooks, & &1.event_name)} end)

      assert counts[ClaudeCodePlugins.id("security-guidance")] ==
               ~w(SessionStart UserPromptSubmit PostToolUse PostToolUse PostToolUse Stop)

      assert counts[ClaudeCodePlugins.id("explanatory-output-style")] == ["SessionStart"]

      assert counts[ClaudeCodePlugins.id("hookify")] ==
               ~w(UserPromptSubmit PreToolUse PostToolUse Stop)

      assert counts[ClaudeCodePlugins.id("ralph-wiggum")] == ["Stop"]

      for hook <- config.hooks do
        root = roots[hook.plugin |> String.split("@") |> hd()]
        assert hook.env == %{"CLAUDE_PLUGIN_ROOT" => root, "HOME" => c.home}
        refute hook.command =~ "${CLAUDE_PLUGIN_ROOT}"
        assert hook.command =~ root
        assert hook.label =~ "plugin #{hook.plugin}"
        assert hook.active
      end

      # The commit and push reviews: `if` conditions, in the background.
      reviews = for h <- config.hooks, h.condition, do: {h.condition.source, h.async}
      assert reviews == [{"Bash(git commit:*)", :rewake}, {"Bash(git push:*)", :rewake}]

      listing = Hooks.Listing.render(config, c.project)
      assert listing =~ "plugin security-guidance@claude-code-plugins"
      assert listing =~ "PostToolUse (asyncRewake)"
      assert listing =~ "Bash if Bash(git commit:*)"
      refute listing =~ "problems"
    end

    test "a disabled, an uninstalled and a project-disabled plugin bring nothing", c do
      {:ok, _} = ClaudeCodePlugins.install(c.home, ["hookify"], enabled: false)
      {:ok, _} = ClaudeCodePlugins.install(c.home, ["ralph-wiggum"], enabled: nil)
      {:ok, _} = ClaudeCodePlugins.install(c.home, ["explanatory-output-style"])

      assert load(c).hooks |> Enum.map(& &1.plugin) |> Enum.uniq() ==
               [ClaudeCodePlugins.id("explanatory-output-style")]

      # A trusted project switches it off in its own settings; an untrusted one cannot.
      File.mkdir_p!(Path.join(c.project, ".claude"))

      File.write!(
        Path.join(c.project, ".claude/settings.local.json"),
        ~s({"enabledPlugins": {"#{ClaudeCodePlugins.id("explanatory-output-style")}": false}})
      )

      assert load(c, trust_project: true).hooks == []
      assert length(load(c, trust_project: false).hooks) == 1

      report = ClaudePlugins.load(cwd: c.project, home: c.home)
      status = Map.new(report.plugins, &{&1.name, &1.status})

      assert status == %{
               "hookify" => :disabled,
               "ralph-wiggum" => :disabled,
               "explanatory-output-style" => :enabled
             }
    end

    test "security-guidance warns about eval( in a Write, as in Claude Code", c do
      case ClaudeCodePlugins.install(c.home, ["security-guidance"], scripts: true) do
        {:skip, why} ->
          IO.puts("skipped: #{why}")

        {:ok, _roots} ->
          config = load(c)
          assert config.errors == []
          file = Path.join(c.project, "app.js")
          args = %{"file_path" => file, "content" => "const x = eval(userInput);\n"}
          result = call(c, [Write], "Write", args, config)
          refute result.is_error
          assert result.content =~ "wrote 27 bytes"
          assert result.content =~ "Security Warning: eval() executes arbitrary code"
          assert result.content =~ "[from security-guidance@claude-code-plugins plugin]"

          # A harmless file gets no warning; a Bash call is not matched by the Edit|Write group.
          args = %{"file_path" => Path.join(c.project, "ok.js"), "content" => "const x = 1;\n"}
          assert call(c, [Write], "Write", args, config).content =~ ~r/\Awrote 13 bytes[^\n]*\z/
      end
    end

    test "hookify blocks a dangerous rm with its rule file (its PreToolUse hook)", c do
      # hookify imports itself as the package `hookify`: a directory marketplace's layout.
      case ClaudeCodePlugins.install(c.home, ["hookify"], scripts: true, layout: :marketplace) do
        {:skip, why} ->
          IO.puts("skipped: #{why}")

        {:ok, _} ->
          File.mkdir_p!(Path.join(c.project, ".claude"))

          File.write!(Path.join(c.project, ".claude/hookify.dangerous-rm.local.md"), """
          ---
          name: block-dangerous-rm
          enabled: true
          event: bash
          pattern: rm\\s+-rf
          action: block
          ---

          Dangerous rm command detected!
          """)

          config = load(c)
          assert config.errors == []
          File.mkdir_p!(Path.join(c.project, "victim"))
          result = call(c, [Bash], "Bash", %{"command" => "rm -rf victim"}, config)
          assert result.reason == :denied
          assert File.dir?(Path.join(c.project, "victim"))
          assert Enum.any?(result.notes, &(&1 =~ "Dangerous rm command detected"))
          assert call(c, [Bash], "Bash", %{"command" => "echo fine"}, config).content == "fine\n"
      end
    end

    test "explanatory-output-style's SessionStart and ralph-wiggum's Stop through event/3", c do
      case ClaudeCodePlugins.install(c.home, ["explanatory-output-style", "ralph-wiggum"],
             scripts: true
           ) do
        {:skip, why} ->
          IO.puts("skipped: #{why}")

        {:ok, _} ->
          hooks = Hooks.Config.active(load(c))
          context = %CMDC.Context{session_id: "s-ev", working_dir: c.project}

          {:ok, start} =
            Hooks.event(:session_start, %{source: "startup"},
              hooks: hooks,
              context: context,
              settings_hooks: false
            )

          assert [insight] = start.context
          assert insight =~ "You are in 'explanatory' output style mode"

          # No loop running: the agent may stop.
          {:ok, stop} =
            Hooks.event(:stop, %{stop_hook_active: false},
              hooks: hooks,
              context: context,
              settings_hooks: false
            )

          assert {stop.blocked, stop.errors} == {nil, []}

          # A loop running (its state file, a transcript with the last answer): the Stop hook
          # blocks and hands the prompt back, as Claude Code's loop does.
          File.mkdir_p!(Path.join(c.project, ".claude"))

          File.write!(Path.join(c.project, ".claude/ralph-loop.local.md"), """
          ---
          active: true
          iteration: 1
          max_iterations: 5
          completion_promise: "DONE"
          started_at: "2026-11-28T00:00:00Z"
          ---

          Fix the failing test.
          """)

          transcript = Path.join(c.project, "transcript.jsonl")

          line = %{
            "role" => "assistant",
            "message" => %{"content" => [%{"type" => "text", "text" => "working on it"}]}
          }

          File.write!(transcript, CMDC.Tool.JSON.encode!(line) <> "\n")

          {:ok, stop} =
            Hooks.event(:stop, %{stop_hook_active: false, transcript_path: transcript},
              hooks: hooks,
              context: context,
              settings_hooks: false
            )

          assert stop.blocked =~ "Fix the failing test."
          assert stop.blocked_by =~ "ralph-wiggum"
      end
    end
  end

  describe "broken plugins" do
    test "outside its folder, a missing file, a loop: refused, reported; the others load", c do
      {:ok, _} = ClaudeCodePlugins.install(c.home, ["explanatory-output-style"])

      plugin = fn name, manifest ->
        root = Path.join([c.home, ".claude/plugins/cache/local", name, "1.0.0"])
        File.mkdir_p!(Path.join(root, ".claude-plugin"))

        File.write!(
          Path.join(root, ".claude-plugin/plugin.json"),
          CMDC.Tool.JSON.encode!(manifest)
        )

        ClaudeCodePlugins.register(c.home, "#{name}@local", root, "1.0.0", true)
        root
      end

      File.write!(Path.join(c.root, "elsewhere.json"), ~s({"hooks": {}}))
      plugin.("out", %{"name" => "out", "hooks" => "../../../../../../elsewhere.json"})
      plugin.("gone", %{"name" => "gone", "mcpServers" => "./servers.json"})
      loop = plugin.("loop", %{"name" => "loop", "hooks" => ["./a.json"]})
      File.ln_s!(Path.join(loop, "b.json"), Path.join(loop, "a.json"))
      File.ln_s!(Path.join(loop, "a.json"), Path.join(loop, "b.json"))

      config = load(c)

      assert Enum.map(config.hooks, & &1.plugin) |> Enum.uniq() ==
               [ClaudeCodePlugins.id("explanatory-output-style")]

      problems = Map.new(config.errors, &{&1.hook, &1.reason})
      assert problems["plugin out@local"] =~ "leaves the plugin folder"
      assert problems["plugin gone@local"] =~ "names a missing file"
      assert problems["plugin loop@local"] =~ "loops (a symlink cycle)"

      # Discovery (list, doctor) reports them too, an outside path as :outside_plugin.
      report = Discovery.discover(cwd: c.project, home: c.home, sources: [:plugins])
      kinds = Map.new(report.errors, &{&1.provider, &1.type})

      assert kinds == %{
               "claude-plugin:gone@local" => :bad_manifest,
               "claude-plugin:loop@local" => :bad_manifest,
               "claude-plugin:out@local" => :outside_plugin
             }

      # `mix cmdc.tools plugins` lists each with its problem, and fails.
      text =
        CMDC.Tool.CLI.Plugins.render(ClaudePlugins.load(cwd: c.project, home: c.home), c.home)

      assert text =~ ~r/explanatory-output-style@claude-code-plugins\s+1\.0\.0\s+enabled/
      assert text =~ "hooks: SessionStart×1"
      assert text =~ "plugins refused (3)"

      assert text =~
               "out@local: hooks \"../../../../../../elsewhere.json\" leaves the plugin folder"
    end
  end

  describe "what else a plugin brings" do
    test "this library's own plugins bring hooks the same way", c do
      root = Path.join(c.home, ".cmdc/plugins/guard")
      File.mkdir_p!(Path.join(root, "hooks"))
      File.write!(Path.join(root, "cmdc-plugin.json"), ~s({"name": "guard", "version": "1.0.0"}))

      File.write!(
        Path.join(root, "hooks/hooks.json"),
        ~s({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo \\"from $CLAUDE_PLUGIN_ROOT\\" >&2; exit 2"}]}]}})
      )

      File.mkdir_p!(Path.join(root, "tools"))
      config = load(c, cmdc_home: Path.join(c.home, ".cmdc"))
      assert config.errors == []
      assert [%{plugin: "guard@cmdc"}] = config.hooks
      denied = call(c, [Bash], "Bash", %{"command" => "ls"}, config)
      assert denied.reason == :denied
      assert denied.content =~ "from #{root}"
    end

    test "its MCP server joins the configured servers, named as Claude Code names it", c do
      {:ok, %{command: python}} = CMDC.Tool.MCPServers.python_stdio()
      root = Path.join([c.home, ".claude/plugins/cache/local/db-tools/1.0.0"])
      File.mkdir_p!(Path.join(root, ".claude-plugin"))
      File.write!(Path.join(root, ".claude-plugin/plugin.json"), ~s({"name": "db-tools"}))
      File.cp!(CMDC.Tool.MCPServers.py_server(), Path.join(root, "server.py"))

      File.write!(
        Path.join(root, ".mcp.json"),
        CMDC.Tool.JSON.encode!(%{
          "py" => %{"command" => python, "args" => ["${CLAUDE_PLUGIN_ROOT}/server.py", "stdio"]}
        })
      )

      ClaudeCodePlugins.register(c.home, "db-tools@local", root, "1.0.0", true)
      # A disabled plugin's server is not started.
      {:ok, _} = ClaudeCodePlugins.install(c.home, ["hookify"], enabled: false)

      report =
        CMDC.Tool.MCP.Servers.load(
          cwd: c.project,
          home: c.home,
          cmdc_home: nil,
          sources: [:plugins]
        )

      on_exit(fn -> CMDC.Tool.MCP.Servers.stop(report) end)
      assert report.errors == []
      assert [{"plugin:db-tools:py", _pid}] = report.clients
      add = Enum.find(report.tools, &(&1.name == "plugin_db-tools_py__add"))
      assert add.provider == "mcp:plugin:db-tools:py"

      # Hook matchers see it as Claude Code names it: mcp__plugin_<plugin>_<server>__<tool>.
      File.mkdir_p!(Path.join(c.project, ".claude"))

      File.write!(
        Path.join(c.project, ".claude/settings.json"),
        ~s({"hooks": {"PreToolUse": [
        {"matcher": "mcp__plugin_db-tools_py__add", "hooks": [{"type": "command", "command": "echo 'no adding' >&2; exit 2"}]}]}})
      )

      config = load(c, trust_project: true)
      tools = Enum.map(report.tools, & &1.module)
      denied = call(c, tools, "plugin_db-tools_py__add", %{"a" => 1, "b" => 2}, config)
      assert denied.reason == :denied and denied.content =~ "no adding"
      File.rm!(Path.join(c.project, ".claude/settings.json"))

      assert call(c, tools, "plugin_db-tools_py__add", %{"a" => 1, "b" => 2}, load(c)).content ==
               "3"
    end

    test "its tool files join discovery", c do
      root = Path.join([c.home, ".claude/plugins/cache/local/kit/1.0.0"])
      File.mkdir_p!(Path.join(root, "tools"))
      mod = "PluginKit#{System.unique_integer([:positive])}"

      File.write!(Path.join(root, "tools/hello.ex"), """
      defmodule #{mod} do
        @behaviour CMDC.Tool
        def name, do: "#{String.downcase(mod)}"
        def description, do: "Says hello."
        def parameters, do: %{"type" => "object"}
        def execute(_, _), do: {:ok, "hello"}
      end
      """)

      ClaudeCodePlugins.register(c.home, "kit@local", root, "1.0.0", true)
      report = Discovery.discover(cwd: c.project, home: c.home, sources: [:plugins])
      assert [tool] = report.tools
      assert {tool.name, tool.provider} == {String.downcase(mod), "claude-plugin:kit@local"}
      # The plugin's plain name is its tools' namespace (OpenAI Responses namespaces).
      assert tool.settings["namespace"] == "kit"
      assert tool.module.execute(%{}, nil) == {:ok, "hello"}

      ClaudeCodePlugins.register(c.home, "kit@local", root, "1.0.0", false)
      assert Discovery.discover(cwd: c.project, home: c.home, sources: [:plugins]).tools == []
    end
  end

  describe "mix cmdc.tools" do
    import ExUnit.CaptureIO
    alias CMDC.Tool.CLI.Commands

    test "plugins lists each plugin, what it brings, and fails on a refused one", c do
      {:ok, _} = ClaudeCodePlugins.install(c.home, ["security-guidance", "ralph-wiggum"])
      {:ok, _} = ClaudeCodePlugins.install(c.home, ["hookify"], enabled: false)
      out = capture_io(fn -> assert 0 = Commands.plugins([], cwd: c.project, home: c.home) end)
      assert out =~ ~r/PLUGIN\s+VERSION\s+STATUS\s+SCOPE\s+FOLDER\s+BRINGS/
      assert out =~ ~r/hookify@claude-code-plugins\s+0\.1\.0\s+disabled/

      assert out =~
               ~r/security-guidance@claude-code-plugins\s+2\.0\.0\s+enabled \(~\/.claude\/settings.json\)\s+user\s+\S+\s+hooks: PostToolUse×3, SessionStart×1, Stop×1, UserPromptSubmit×1/

      ClaudeCodePlugins.register(c.home, "ghost@local", "/nonexistent/ghost", "1.0.0", true)
      out = capture_io(fn -> assert 1 = Commands.plugins([], cwd: c.project, home: c.home) end)
      assert out =~ "plugins refused (1):\n  - ghost@local: its folder does not exist"
    end

    test "call runs a plugin's hooks: security-guidance warns about eval(", c do
      case ClaudeCodePlugins.install(c.home, ["security-guidance"], scripts: true) do
        {:skip, why} ->
          IO.puts("skipped: #{why}")

        {:ok, _} ->
          # `call` starts a session: security-guidance's SessionStart would build a venv with
          # pip in the background; its own lock says another session is building it already.
          File.mkdir_p!(Path.join(c.home, ".claude/security"))
          File.write!(Path.join(c.home, ".claude/security/agent-sdk-venv.building"), "")
          mod = "PluginWrite#{System.unique_integer([:positive])}"
          File.mkdir_p!(Path.join(c.project, ".cmdc/tools"))

          File.write!(Path.join(c.project, ".cmdc/tools/write.ex"), """
          defmodule #{mod} do
            @behaviour CMDC.Tool
            def name, do: "Write"
            def description, do: "Writes a file."
            def parameters, do: %{"type" => "object", "properties" => %{"file_path" => %{"type" => "string"}, "content" => %{"type" => "string"}}}
            def execute(%{"file_path" => p, "content" => t}, _), do: (File.write!(p, t); {:ok, "written"})
          end
          """)

          args =
            CMDC.Tool.JSON.encode!(%{
              "file_path" => Path.join(c.project, "a.py"),
              "content" => "eval(x)\n"
            })

          out =
            capture_io(fn ->
              capture_io(:stderr, fn ->
                assert 0 =
                         Commands.call(["Write", args],
                           cwd: c.project,
                           home: c.home,
                           trust: true,
                           mcp: false
                         )
              end)
            end)

          assert out =~ "written"
          assert out =~ "Security Warning: eval() executes arbitrary code"
      end
    end
  end

  describe "bin/cmdc-mcp" do
    @describetag timeout: 600_000
    @root Path.expand("../../../..", __DIR__)

    test "a client's Write call gets security-guidance's warning (the official Python SDK)", c do
      with {:ok, _} <- ClaudeCodePlugins.install(c.home, ["security-guidance"], scripts: true),
           {:ok, python} <- CMDC.Tool.PythonEnv.python() do
        # The server starts a session: see the `call` test for this lock.
        File.mkdir_p!(Path.join(c.home, ".claude/security"))
        File.write!(Path.join(c.home, ".claude/security/agent-sdk-venv.building"), "")
        tool = Path.join(c.root, "write_tool.ex")
        mod = "McpPluginWrite#{System.unique_integer([:positive])}"

        File.write!(tool, """
        defmodule #{mod} do
          @behaviour CMDC.Tool
          def name, do: "Write"
          def description, do: "Writes a file."
          def parameters, do: %{"type" => "object", "properties" => %{"file_path" => %{"type" => "string"}, "content" => %{"type" => "string"}}}
          def execute(%{"file_path" => p, "content" => t}, _), do: (File.write!(p, t); {:ok, "written"})
        end
        """)

        calls = Path.join(c.root, "calls.json")
        args = %{"file_path" => Path.join(c.project, "a.js"), "content" => "eval(x)\n"}
        File.write!(calls, CMDC.Tool.JSON.encode!([["Write", args]]))
        client = Path.join(@root, "test/support/mcp_client.py")
        server = Path.join(@root, "bin/cmdc-mcp")
        command = "#{python} #{client} #{server} --examples #{tool} < #{calls}"
        env = [{"MIX_ENV", "test"}, {"HOME", c.home}, {"CMDC_HOME", Path.join(c.home, ".cmdc")}]
        {out, 0} = System.cmd("sh", ["-c", command], env: env, cd: c.project)
        report = out |> String.split("\n", trim: true) |> List.last() |> CMDC.Tool.JSON.decode!()
        assert [%{"name" => "Write", "is_error" => false, "text" => text}] = report["calls"]
        assert text =~ "written"
        assert text =~ "Security Warning: eval() executes arbitrary code"
      else
        {:skip, why} -> IO.puts("skipped: #{why}")
        {:error, why} -> IO.puts("skipped: no Python MCP SDK: #{why}")
      end
    end
  end
end
