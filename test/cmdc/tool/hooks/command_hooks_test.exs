defmodule CMDC.Tool.Hooks.CommandHooksTest do
  # Real command hooks: shell and Python scripts written here, run by the runner.
  use ExUnit.Case, async: true

  @moduletag :capture_log

  alias CMDC.Tool.{Hooks, Runner}
  alias CMDC.Tool.Examples.Echo
  alias CMDC.Test.OsProc

  doctest CMDC.Tool.Hooks.Command
  doctest CMDC.Tool.Hooks.Config
  doctest CMDC.Tool.Hooks.Listing

  defmodule McpLike do
    # The shape of a tool of an MCP server (`CMDC.Tool.MCP.Remote`): its settings name the server.
    @behaviour CMDC.Tool
    def name, do: "memory__create"
    def description, do: "Creates a memory."
    def parameters, do: %{"type" => "object"}
    def __tool_settings__, do: %{server: "memory", remote_name: "create"}
    def execute(_, _), do: {:ok, "created"}
  end

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_hooks_#{System.unique_integer([:positive])}")
    project = Path.join(root, "project")
    home = Path.join(root, "home")
    File.mkdir_p!(Path.join(project, ".claude"))
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf!(root) end)
    %{project: project, home: home}
  end

  defp settings!(dir, file \\ ".claude/settings.json", hooks) do
    path = Path.join(dir, file)
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, CMDC.Tool.JSON.encode!(%{"hooks" => hooks}))
    path
  end

  defp script!(dir, name, body) do
    path = Path.join(dir, name)
    File.write!(path, body)
    File.chmod!(path, 0o755)
    path
  end

  defp group(matcher, command, extra \\ %{}),
    do: %{
      "matcher" => matcher,
      "hooks" => [Map.merge(%{"type" => "command", "command" => command}, extra)]
    }

  defp load(ctx, opts \\ []),
    do: Hooks.load([cwd: ctx.project, home: ctx.home, trust_project: true] ++ opts)

  defp run(ctx, tools, name, args, opts \\ []) do
    config = load(ctx)
    assert config.errors == []
    context = %CMDC.Context{session_id: "sess-1", working_dir: ctx.project}

    Runner.run(
      tools,
      %{id: "call-1", name: name, arguments: args},
      context,
      [hooks: Hooks.Config.active(config)] ++ opts
    )
  end

  # A PreToolUse hook answering `json` on stdout.
  defp pre_json(ctx, json, matcher \\ "echo") do
    settings!(ctx.project, %{
      "PreToolUse" => [group(matcher, "printf '%s' '#{CMDC.Tool.JSON.encode!(json)}'")]
    })
  end

  defp post_json(ctx, json, event \\ "PostToolUse") do
    settings!(ctx.project, %{
      event => [group("*", "printf '%s' '#{CMDC.Tool.JSON.encode!(json)}'")]
    })
  end

  describe "stdin and environment" do
    test "a Python hook gets every field on stdin, the project dir as cwd and in the env", ctx do
      dump = Path.join(ctx.project, "seen.json")

      script!(ctx.project, "dump.py", """
      import json, os, sys
      data = json.load(sys.stdin)
      data["_cwd"] = os.getcwd()
      data["_env"] = [os.environ.get("CLAUDE_PROJECT_DIR"), os.environ.get("CMDC_PROJECT_DIR")]
      with open(#{inspect(dump)} + "." + data["hook_event_name"], "w") as f:
          json.dump(data, f)
      """)

      settings!(ctx.project, %{
        "PreToolUse" => [group("echo", "python3 dump.py")],
        "PostToolUse" => [group("echo", "python3 \"$CLAUDE_PROJECT_DIR/dump.py\"")]
      })

      assert run(ctx, [Echo], "echo", %{"text" => "hi"}).content == "hi"
      pre = CMDC.Tool.JSON.decode!(File.read!(dump <> ".PreToolUse"))

      assert %{
               "session_id" => "sess-1",
               "transcript_path" => nil,
               "cwd" => cwd,
               "permission_mode" => "default",
               "hook_event_name" => "PreToolUse",
               "tool_name" => "echo",
               "tool_input" => %{"text" => "hi"},
               "tool_use_id" => "call-1",
               "_env" => [dir, dir]
             } = pre

      assert cwd == ctx.project and dir == ctx.project and pre["_cwd"] == ctx.project
      refute Map.has_key?(pre, "tool_response")

      post = CMDC.Tool.JSON.decode!(File.read!(dump <> ".PostToolUse"))

      assert post["tool_response"] == %{
               "content" => "hi",
               "structured" => nil,
               "is_error" => false
             }
    end

    test "PostToolUseFailure gets the error and is_interrupt", ctx do
      dump = Path.join(ctx.project, "fail.json")
      settings!(ctx.project, %{"PostToolUseFailure" => [group("*", "cat > #{dump}")]})
      r = run(ctx, [CMDC.Tool.TestTools.Raise], "raise", %{})
      assert r.reason == :crashed
      seen = CMDC.Tool.JSON.decode!(File.read!(dump))
      assert %{"hook_event_name" => "PostToolUseFailure", "is_interrupt" => false} = seen
      assert seen["error"] =~ "the tool failed"
    end
  end

  describe "exit codes" do
    test "exit 2 before a call denies it with stderr as the reason; after, it blocks", ctx do
      settings!(ctx.project, %{
        "PreToolUse" => [group("echo", "echo 'rm is forbidden' >&2; exit 2")]
      })

      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert r.reason == :denied and r.content =~ "rm is forbidden"
      assert r.content =~ ".claude/settings.json PreToolUse[0].hooks[0]"

      settings!(ctx.project, %{"PostToolUse" => [group("echo", "echo 'leaks a key' >&2; exit 2")]})

      r = run(ctx, [Echo], "echo", %{"text" => "sk-123"})
      assert r.reason == :blocked and r.content =~ "leaks a key"
      refute r.content =~ "sk-123"
    end

    test "exit 2 after a failure adds stderr as context", ctx do
      settings!(ctx.project, %{
        "PostToolUseFailure" => [group("*", "echo 'try again with n=1' >&2; exit 2")]
      })

      r = run(ctx, [CMDC.Tool.TestTools.Raise], "raise", %{})
      assert r.is_error and r.content =~ "try again with n=1"
    end

    test "another status is a non-blocking error naming the hook; the call goes on", ctx do
      settings!(ctx.project, %{
        "PreToolUse" => [
          group("echo", "echo oops >&2; exit 1"),
          group("*", "no-such-command-cmdc")
        ]
      })

      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert {r.is_error, r.content} == {false, "x"}
      assert [one, other] = r.notes

      assert one =~
               "settings.json PreToolUse[0].hooks[0] (echo: echo oops >&2; exit 1): exited with status 1: oops"

      assert other =~ "exited with status 127"
    end
  end

  describe "JSON fields before a call" do
    test "permissionDecision deny / allow / ask / defer", ctx do
      out = fn d ->
        %{
          "hookSpecificOutput" => %{
            "hookEventName" => "PreToolUse",
            "permissionDecision" => d,
            "permissionDecisionReason" => "because"
          }
        }
      end

      pre_json(ctx, out.("deny"))
      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert r.reason == :denied and r.content =~ "because"

      pre_json(ctx, out.("ask"))
      assert run(ctx, [Echo], "echo", %{"text" => "x"}).reason == :denied
      approver = fn %{reason: reason} -> if reason =~ ": because", do: :allow end
      assert run(ctx, [Echo], "echo", %{"text" => "x"}, approver: approver).content == "x"

      pre_json(ctx, out.("allow"), "guarded")

      assert run(ctx, [CMDC.Tool.TestTools.AskAlways], "guarded", %{}).content ==
               "ran"

      pre_json(ctx, out.("defer"), "guarded")

      assert run(ctx, [CMDC.Tool.TestTools.AskAlways], "guarded", %{}).reason ==
               :denied
    end

    test "the older decision: block / approve", ctx do
      pre_json(ctx, %{"decision" => "block", "reason" => "old style"})
      assert run(ctx, [Echo], "echo", %{"text" => "x"}).content =~ "old style"
    end

    test "updatedInput rewrites the arguments, and is validated again", ctx do
      pre_json(ctx, %{"hookSpecificOutput" => %{"updatedInput" => %{"text" => "rewritten"}}})
      assert run(ctx, [Echo], "echo", %{"text" => "x"}).content == "rewritten"

      pre_json(ctx, %{"hookSpecificOutput" => %{"updatedInput" => %{"text" => 42}}})
      r = run(ctx, [Echo], "echo", %{"text" => "x"})

      assert r.reason == :invalid and
               r.content =~ "rewrote the arguments of echo, and they are invalid"
    end

    test "additionalContext, systemMessage, suppressOutput", ctx do
      pre_json(ctx, %{
        "suppressOutput" => true,
        "systemMessage" => "for the user",
        "hookSpecificOutput" => %{"additionalContext" => "for the model"}
      })

      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert r.content == "x\n\nfor the model"
      assert r.notes == ["for the user"]
    end

    test "continue: false stops the turn with stopReason", ctx do
      pre_json(ctx, %{"continue" => false, "stopReason" => "budget spent"})
      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert {r.reason, r.abort} == {:aborted, "budget spent"}
    end

    test "a field of the wrong type is named and ignored", ctx do
      pre_json(ctx, %{"hookSpecificOutput" => %{"permissionDecision" => "maybe"}})
      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert r.content == "x"
      assert [note] = r.notes
      assert note =~ "ignored invalid fields: permissionDecision: \"maybe\""
    end
  end

  describe "JSON fields after a call" do
    test "decision block + reason", ctx do
      post_json(ctx, %{"decision" => "block", "reason" => "lint failed"})
      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert r.reason == :blocked and r.content =~ "lint failed"
    end

    test "updatedToolOutput as text and as an object, additionalContext", ctx do
      post_json(ctx, %{
        "hookSpecificOutput" => %{"updatedToolOutput" => "redacted", "additionalContext" => "ctx"}
      })

      assert run(ctx, [Echo], "echo", %{"text" => "x"}).content == "redacted\n\nctx"

      post_json(ctx, %{"hookSpecificOutput" => %{"updatedToolOutput" => %{"n" => 1}}})
      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert {r.content, r.structured} == {~s({"n":1}), %{"n" => 1}}
    end

    test "updatedMCPToolOutput (content items, structuredContent, isError)", ctx do
      post_json(ctx, %{
        "hookSpecificOutput" => %{
          "updatedMCPToolOutput" => %{
            "content" => [%{"type" => "text", "text" => "a"}, %{"type" => "text", "text" => "b"}],
            "isError" => true
          }
        }
      })

      r = run(ctx, [McpLike], "memory__create", %{})
      assert {r.content, r.is_error} == {"a\nb", true}
    end

    test "PostToolUseFailure additionalContext", ctx do
      post_json(
        ctx,
        %{"hookSpecificOutput" => %{"additionalContext" => "hint"}},
        "PostToolUseFailure"
      )

      assert run(ctx, [CMDC.Tool.TestTools.Raise], "raise", %{}).content =~ "\n\nhint"
    end
  end

  describe "bad output" do
    test "text that is not JSON, and output over 1 MB, are errors naming the hook", ctx do
      settings!(ctx.project, %{
        "PreToolUse" => [
          group("echo", "echo hello there"),
          group("echo", "head -c 3000000 /dev/zero | tr '\\\\0' a")
        ]
      })

      r = run(ctx, [Echo], "echo", %{"text" => "x"})
      assert r.content == "x"
      assert [plain, huge] = r.notes
      assert plain =~ "(echo: echo hello there): printed text that is not a JSON object"
      assert huge =~ "printed more than 1000000 bytes"
    end
  end

  test "a hook past its timeout is killed with its children; the call goes on", ctx do
    pids = Path.join(ctx.project, "pids")

    cmd =
      "sleep 30 & echo $! >> #{pids}; sh -c 'sleep 30' & echo $! >> #{pids}; echo $$ >> #{pids}; wait"

    settings!(ctx.project, %{"PreToolUse" => [group("echo", cmd, %{"timeout" => 1.5})]})
    r = run(ctx, [Echo], "echo", %{"text" => "x"})
    assert r.content == "x"
    assert [note] = r.notes
    assert note =~ "timed out after 1500 ms: killed with its process group"

    os_pids = pids |> File.read!() |> String.split() |> Enum.map(&String.to_integer/1)
    assert length(os_pids) == 3
    for pid <- os_pids, do: assert(OsProc.wait_dead(pid), "process #{pid} outlived its hook")
    {ps, 0} = System.cmd("ps", ["-eo", "pid=,args="])
    for pid <- os_pids, do: refute(ps =~ ~r/^\s*#{pid}\s+sleep/m)
  end

  test "matching hooks of one event run concurrently", ctx do
    a = Path.join(ctx.project, "a")
    b = Path.join(ctx.project, "b")
    # Each waits for the other's file: run one after the other, the first would time out.
    wait = fn mine, other ->
      "touch #{mine}; for i in $(seq 100); do [ -e #{other} ] && exit 0; sleep 0.05; done; exit 1"
    end

    settings!(ctx.project, %{
      "PreToolUse" => [
        group("*", wait.(a, b), %{"timeout" => 4}),
        group("*", wait.(b, a), %{"timeout" => 4})
      ]
    })

    r = run(ctx, [Echo], "echo", %{"text" => "x"})
    assert {r.content, r.notes} == {"x", []}
  end

  describe "matchers" do
    test "exact, list, regex, star and empty", ctx do
      for {matcher, denied?} <- [
            {"echo", true},
            {"Echo", false},
            {"read_file|echo", true},
            {"read_file, echo", true},
            {"ec.*", true},
            {"^cho", false},
            {"*", true},
            {"", true},
            {"ech", false}
          ] do
        settings!(ctx.project, %{"PreToolUse" => [group(matcher, "exit 2")]})

        assert run(ctx, [Echo], "echo", %{"text" => "x"}).reason ==
                 if(denied?, do: :denied, else: nil),
               matcher
      end
    end

    test "a tool of a real MCP server (the Python SDK's) matches mcp__server__tool", ctx do
      {:ok, %{command: python, args: args}} = CMDC.Tool.MCPServers.python_stdio()
      servers = %{"mcpServers" => %{"py" => %{"command" => python, "args" => args}}}
      File.write!(Path.join(ctx.project, ".mcp.json"), CMDC.Tool.JSON.encode!(servers))

      report =
        CMDC.Tool.MCP.Servers.load(
          cwd: ctx.project,
          home: ctx.home,
          cmdc_home: nil,
          trust_project: true
        )

      on_exit(fn -> CMDC.Tool.MCP.Servers.stop(report) end)
      tools = Enum.map(report.tools, & &1.module)

      settings!(ctx.project, %{
        "PreToolUse" => [group("mcp__py__add", "echo 'not via hooks' >&2; exit 2")]
      })

      r = run(ctx, tools, "py__add", %{"a" => 2, "b" => 2})
      assert r.reason == :denied and r.content =~ "not via hooks"

      settings!(ctx.project, %{
        "PostToolUse" => [
          group(
            "mcp__py__.*",
            "printf '%s' '#{CMDC.Tool.JSON.encode!(%{"hookSpecificOutput" => %{"updatedMCPToolOutput" => %{"content" => [%{"type" => "text", "text" => "five"}]}}})}'"
          )
        ]
      })

      assert run(ctx, tools, "py__add", %{"a" => 2, "b" => 2}).content == "five"
    end

    test "MCP tools match server__tool and mcp__server__tool", ctx do
      for matcher <- ["memory__create", "mcp__memory__create", "mcp__memory__.*", "mcp__.*"] do
        settings!(ctx.project, %{"PreToolUse" => [group(matcher, "exit 2")]})
        assert run(ctx, [McpLike], "memory__create", %{}).reason == :denied, matcher
      end
    end
  end

  test "SessionStart and SessionEnd run at the session's start and shutdown", ctx do
    log = Path.join(ctx.project, "session.log")

    settings!(ctx.project, %{
      "SessionStart" => [group("startup", "cat >> #{log}; echo >> #{log}")],
      "SessionEnd" => [group("*", "cat >> #{log}")]
    })

    hooks = Hooks.Config.active(load(ctx))
    context = %CMDC.Context{session_id: "s-events", working_dir: ctx.project}
    :ok = Runner.session_event([Echo], :start, context, hooks: hooks)
    :ok = Runner.session_event([Echo], :shutdown, context, hooks: hooks)

    [start, stop] =
      log |> File.read!() |> String.split("\n", trim: true) |> Enum.map(&CMDC.Tool.JSON.decode!/1)

    assert %{
             "hook_event_name" => "SessionStart",
             "source" => "startup",
             "session_id" => "s-events"
           } = start

    assert %{"hook_event_name" => "SessionEnd", "reason" => "other"} = stop
  end

  describe "settings files" do
    test "user and project files; project hooks only when trusted", ctx do
      user = settings!(ctx.home, %{"PreToolUse" => [group("*", "true")]})

      local =
        settings!(ctx.project, ".claude/settings.local.json", %{
          "PostToolUse" => [group("*", "true")]
        })

      cmdc =
        settings!(ctx.project, ".cmdc/settings.json", %{"PostToolUse" => [group("*", "true")]})

      own = settings!(ctx.home, ".cmdc/settings.json", %{"SessionEnd" => [group("*", "true")]})

      untrusted = Hooks.load(cwd: ctx.project, home: ctx.home, trust_project: false)

      assert Enum.map(untrusted.files, &{&1.path, &1.active}) == [
               {Path.join(ctx.home, ".claude/settings.json"), true},
               {own, true},
               {local, false},
               {cmdc, false}
             ]

      assert user == Path.join(ctx.home, ".claude/settings.json")
      assert length(untrusted.hooks) == 4
      assert length(Hooks.Config.active(untrusted)) == 2

      # The trust list of discovery (~/.cmdc/trusted.json) is the same gate.
      File.write!(
        Path.join(ctx.home, ".cmdc/trusted.json"),
        CMDC.Tool.JSON.encode!(%{"trusted" => [ctx.project]})
      )

      listed =
        Hooks.load(cwd: ctx.project, home: ctx.home, cmdc_home: Path.join(ctx.home, ".cmdc"))

      assert length(Hooks.Config.active(listed)) == 4
    end

    test "a relative CMDC_HOME never makes a project's file the user's (ignored, reported)",
         ctx do
      # With CMDC_HOME=".", the project's own ./settings.json would pass as a user file.
      settings!(ctx.project, "settings.json", %{"PreToolUse" => [group("*", "true")]})
      config = Hooks.load(cwd: ctx.project, home: ctx.home, cmdc_home: ".", trust_project: false)
      assert config.hooks == []

      assert [%{path: "(user folders)", reason: "CMDC_HOME is \".\", not an absolute path" <> _}] =
               config.errors

      # Run from the home folder, the project's files are the user's own: active, no trust asked.
      settings!(ctx.home, %{"PreToolUse" => [group("*", "true")]})
      at_home = Hooks.load(cwd: ctx.home, home: ctx.home, trust_project: false)
      assert [%{active: true, source: :user}] = at_home.files
    end

    test "bad input: each problem names the file and the hook, the others load", ctx do
      File.write!(Path.join(ctx.project, ".claude/settings.local.json"), "{not json")

      path =
        settings!(ctx.project, %{
          "PreToolUse" => [
            group("read_(file", "true"),
            group("*", "true"),
            %{"matcher" => "*", "hooks" => [%{"type" => "command"}]}
          ],
          "Stopp" => [group("*", "true")],
          "PostToolUse" => [
            group("*", "true", %{"timeout" => -1}),
            group("*", "true", %{"type" => "prompt"})
          ]
        })

      config = load(ctx)
      # The group whose matcher cannot be run keeps its hook (listed, failing when asked).
      assert length(config.hooks) == 2
      reasons = Enum.map(config.errors, &{Path.basename(&1.path), &1.hook, &1.reason})

      assert {"settings.json", "PreToolUse[0]",
              "the matcher \"read_(file\" is not a valid regular expression: unclosed group; its hooks fail whenever a tool is called"} in reasons

      assert {"settings.json", "PreToolUse[2].hooks[0]",
              "the hook has no command (\"command\" must be a non-empty string)"} in reasons

      assert Enum.any?(
               reasons,
               &match?({"settings.json", "Stopp", "unknown event \"Stopp\"" <> _}, &1)
             )

      assert {"settings.json", "PostToolUse[0].hooks[0]",
              "timeout must be a positive number of seconds (got -1)"} in reasons

      assert {"settings.json", "PostToolUse[1].hooks[0]",
              "hook type \"prompt\" is not supported (only \"command\")"} in reasons

      assert Enum.any?(
               reasons,
               &match?({"settings.local.json", nil, "not valid JSON: " <> _}, &1)
             )

      assert Enum.all?(
               config.errors,
               &(&1.path in [path, Path.join(ctx.project, ".claude/settings.local.json")])
             )
    end
  end

  test "the example of examples/hooks: deny with exit 2, ask with permissionDecision", ctx do
    examples = Path.expand("../../../../examples/hooks", __DIR__)
    File.mkdir_p!(Path.join(ctx.project, "examples/hooks"))
    File.cp!(Path.join(examples, "guard.py"), Path.join(ctx.project, "examples/hooks/guard.py"))

    File.cp!(
      Path.join(examples, "settings.json"),
      Path.join(ctx.project, ".claude/settings.json")
    )

    r = run(ctx, [Echo], "echo", %{"text" => "rm -rf /"})
    assert r.reason == :denied and r.content =~ "recursive deletes are not allowed here"

    r = run(ctx, [CMDC.Tool.Examples.ReadFile], "read_file", %{"path" => "/etc/hostname"})
    assert r.reason == :denied and r.content =~ "/etc/hostname is outside the project"
    assert run(ctx, [Echo], "echo", %{"text" => "fine"}).content == "fine"
  end
end
