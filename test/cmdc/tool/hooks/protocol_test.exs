defmodule CMDC.Tool.Hooks.ProtocolTest do
  # The hook protocol as Claude Code runs it today: `if` conditions, background hooks
  # (`async`, `asyncRewake`), the agent events of `CMDC.Tool.Hooks.event/3`, and settings that
  # hold keys or events this library does not know. Real shell hooks, run by the runner.
  use ExUnit.Case, async: true

  @moduletag :capture_log

  alias CMDC.Tool.{Hooks, Runner}
  alias CMDC.Tool.Hooks.{Background, Events}

  doctest CMDC.Tool.Hooks.Condition
  doctest CMDC.Tool.Hooks.Events

  defmodule Bash do
    # Says what it would run (the hooks, not the command, are under test).
    @behaviour CMDC.Tool
    def name, do: "Bash"
    def description, do: "Runs a shell command."

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{"command" => %{"type" => "string"}},
        "required" => ["command"]
      }

    def execute(%{"command" => cmd}, _ctx), do: {:ok, "ran: " <> cmd}
  end

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_protocol_#{System.unique_integer([:positive])}")
    project = Path.join(root, "project")
    home = Path.join(root, "home")
    File.mkdir_p!(Path.join(project, ".claude"))
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf!(root) end)
    session = "proto-#{System.unique_integer([:positive])}"
    %{project: project, home: home, session: session}
  end

  defp settings!(c, hooks) do
    File.write!(
      Path.join(c.project, ".claude/settings.json"),
      CMDC.Tool.JSON.encode!(%{"hooks" => hooks})
    )

    config = Hooks.load(cwd: c.project, home: c.home, trust_project: true)
    {Hooks.Config.active(config), config.errors}
  end

  defp hook(command, extra \\ %{}),
    do: Map.merge(%{"type" => "command", "command" => command}, extra)

  defp run(c, hooks, command) do
    context = %CMDC.Context{session_id: c.session, working_dir: c.project}

    Runner.run([Bash], %{id: "c", name: "Bash", arguments: %{"command" => command}}, context,
      hooks: hooks,
      settings_hooks: false
    )
  end

  describe "if conditions" do
    test "a hook runs only for calls its permission rule matches", c do
      {hooks, []} =
        settings!(c, %{
          "PostToolUse" => [
            %{
              "matcher" => "Bash",
              "hooks" => [
                hook(
                  "echo '{\"hookSpecificOutput\": {\"additionalContext\": \"commit hook\"}}'",
                  %{
                    "if" => "Bash(git commit:*)"
                  }
                ),
                hook(
                  "echo '{\"hookSpecificOutput\": {\"additionalContext\": \"status hook\"}}'",
                  %{
                    "if" => "Bash(git status)"
                  }
                ),
                hook("echo '{\"hookSpecificOutput\": {\"additionalContext\": \"npm hook\"}}'", %{
                  "if" => "Bash(npm run *)"
                })
              ]
            }
          ]
        })

      context_of = fn cmd ->
        run(c, hooks, cmd).content |> String.split("\n\n") |> tl()
      end

      assert context_of.("git commit -m 'x'") == ["commit hook"]
      assert context_of.("git add . && git commit -m x") == ["commit hook"]
      assert context_of.("git commits") == ["commit hook"]
      assert context_of.("git status") == ["status hook"]
      assert context_of.("git status -s") == []
      assert context_of.("npm run build") == ["npm hook"]
      assert context_of.("git push") == []
    end

    test "a rule that does not parse is reported and its hook not loaded", c do
      {hooks, [error]} =
        settings!(c, %{"PreToolUse" => [%{"hooks" => [hook("true", %{"if" => "Bash(git"})]}]})

      assert hooks == []
      assert error.reason =~ ~s|"Bash(git" is not a permission rule|
    end
  end

  describe "background hooks" do
    test "asyncRewake never holds the call up; its findings reach the session", c do
      release = Path.join(c.project, "release")

      script =
        "while [ ! -e #{release} ]; do sleep 0.05; done; " <>
          "echo 'hardcoded secret in config.py' >&2; exit 2"

      {hooks, []} =
        settings!(c, %{
          "PostToolUse" => [
            %{
              "matcher" => "Bash",
              "hooks" => [
                hook(script, %{
                  "if" => "Bash(git commit:*)",
                  "asyncRewake" => true,
                  "rewakeMessage" => "Background review of the commit:",
                  "rewakeSummary" => "review found issues"
                })
              ]
            }
          ]
        })

      :ok = Background.subscribe(c.session)
      # The hook cannot end before `release` exists: the call's return proves it did not wait.
      first = run(c, hooks, "git commit -m wip")
      assert first.content == "ran: git commit -m wip"
      refute File.exists?(release)
      assert Background.take(c.session) == []

      File.write!(release, "")
      assert_receive {:cmdc_tool_hook_report, session, report}, 60_000
      assert session == c.session
      assert report.rewake
      assert report.summary == "review found issues"
      assert report.context == "Background review of the commit:\n\nhardcoded secret in config.py"

      # The next result of the session carries it, once.
      second = run(c, hooks, "ls")
      assert second.content == "ran: ls\n\n" <> report.context
      assert run(c, hooks, "ls").content == "ran: ls"
    end

    test "a hook that says {\"async\": true} first goes on in the background", c do
      release = Path.join(c.project, "release")

      script =
        ~s(echo '{"async": true, "asyncTimeout": 180000}'; ) <>
          "while [ ! -e #{release} ]; do sleep 0.05; done; " <>
          ~s(echo '{"hookSpecificOutput": {"additionalContext": "venv built"}}')

      {hooks, []} = settings!(c, %{"SessionStart" => [%{"hooks" => [hook(script)]}]})
      :ok = Background.subscribe(c.session)
      context = %CMDC.Context{session_id: c.session, working_dir: c.project}

      # The event returns while the hook still waits for `release`.
      {:ok, start} =
        Hooks.event(:session_start, %{source: "startup"},
          hooks: hooks,
          context: context,
          settings_hooks: false
        )

      assert {start.context, start.errors} == {[], []}
      refute File.exists?(release)

      File.write!(release, "")
      assert_receive {:cmdc_tool_hook_report, _, %{context: "venv built", rewake: false}}, 60_000
      assert run(c, hooks, "ls").content == "ran: ls\n\nvenv built"
      # Nothing else reached the caller's mailbox (the detached hook answered once).
      assert {:messages, []} = Process.info(self(), :messages)
    end

    test "async: its JSON answer comes later; failures are notes, never a block", c do
      # Each waits for `release`, so none can end before the call's result.
      wait = "while [ ! -e #{Path.join(c.project, "release")} ]; do sleep 0.05; done; "

      {hooks, []} =
        settings!(c, %{
          "PreToolUse" => [
            %{
              "hooks" => [
                hook(
                  wait <>
                    ~s(echo '{"hookSpecificOutput": {"additionalContext": "lint: 2 warnings"}}'),
                  %{"async" => true, "if" => "Bash(make)"}
                ),
                hook(wait <> "echo broken >&2; exit 7", %{"async" => true, "if" => "Bash(make)"}),
                # An async hook cannot deny: exit 2 is not a decision.
                hook(wait <> "exit 2", %{"async" => true, "if" => "Bash(make)"})
              ]
            }
          ]
        })

      :ok = Background.subscribe(c.session)
      assert run(c, hooks, "make").content == "ran: make"
      File.write!(Path.join(c.project, "release"), "")

      reports =
        for _ <- 1..3 do
          assert_receive {:cmdc_tool_hook_report, _, report}, 60_000
          report
        end

      assert Enum.find(reports, & &1.context).context == "lint: 2 warnings"
      assert Enum.find(reports, & &1.error).error =~ "exited with status 7: broken"
      refute Enum.any?(reports, & &1.rewake)

      later = run(c, hooks, "ls")
      assert later.content == "ran: ls\n\nlint: 2 warnings"
      assert Enum.any?(later.notes, &(&1 =~ "exited with status 7"))
    end
  end

  describe "agent events (event/3)" do
    test "UserPromptSubmit: plain text is context; exit 2 refuses the prompt", c do
      {hooks, []} =
        settings!(c, %{
          "UserPromptSubmit" => [
            %{
              "hooks" => [
                hook("echo 'branch: main'"),
                hook(
                  ~s(grep -q password && { echo 'no secrets in prompts' >&2; exit 2; } || exit 0)
                )
              ]
            }
          ]
        })

      context = %CMDC.Context{session_id: c.session, working_dir: c.project}

      # The second hook reads the event on stdin: the prompt is in it.
      {:ok, ok} =
        Hooks.event(:user_prompt_submit, %{prompt: "fix the bug"},
          hooks: hooks,
          context: context,
          settings_hooks: false
        )

      assert {ok.blocked, ok.context, ok.errors} == {nil, ["branch: main"], []}

      {:ok, no} =
        Hooks.event(:user_prompt_submit, %{"prompt" => "my password is x"},
          hooks: hooks,
          context: context,
          settings_hooks: false
        )

      assert no.blocked == "no secrets in prompts"
      assert no.blocked_by =~ "UserPromptSubmit[0].hooks[1]"
    end

    test "Stop: decision block keeps the agent going; PreCompact and Notification match", c do
      {hooks, []} =
        settings!(c, %{
          # Stop has no matcher field: a matcher is ignored, as in Claude Code.
          "Stop" => [
            %{
              "matcher" => "whatever",
              "hooks" => [hook(~s(echo '{"decision": "block", "reason": "tests still fail"}'))]
            }
          ],
          "PreCompact" => [
            %{"matcher" => "manual", "hooks" => [hook("echo 'saving notes' >&2; exit 2")]}
          ],
          "Notification" => [
            %{
              "matcher" => "idle_prompt",
              "hooks" => [hook(~s(echo '{"systemMessage": "pinged"}'))]
            }
          ]
        })

      {:ok, stop} =
        Hooks.event(:stop, %{stop_hook_active: false}, hooks: hooks, settings_hooks: false)

      assert stop.blocked == "tests still fail"

      {:ok, manual} =
        Hooks.event(:pre_compact, %{trigger: "manual"}, hooks: hooks, settings_hooks: false)

      assert {manual.blocked, manual.messages} == {nil, ["saving notes"]}

      {:ok, auto} =
        Hooks.event(:pre_compact, %{trigger: "auto"}, hooks: hooks, settings_hooks: false)

      assert auto.messages == []

      {:ok, note} =
        Hooks.event(:notification, %{message: "waiting", notification_type: "idle_prompt"},
          hooks: hooks,
          settings_hooks: false
        )

      assert note.messages == ["pinged"]
    end

    test "bad calls are errors, not crashes" do
      assert {:error, msg} = Hooks.event(:pre_tool_use, %{})
      assert msg =~ "tool events run through CMDC.Tool.Runner"
      assert {:error, _} = Hooks.event(:nope, %{})

      assert {:error, ~s(the notification event needs the field "message")} =
               Hooks.event(:notification, %{})

      assert_raise ArgumentError, ~r/unknown option :hook/, fn ->
        Hooks.event(:stop, %{}, hook: [])
      end
    end
  end

  describe "the one event table" do
    test "every event of the table loads from a settings file, under its own atom", c do
      groups = Map.new(Events.names(), &{&1, [%{"hooks" => [hook("true")]}]})
      {hooks, errors} = settings!(c, groups)
      assert errors == []
      assert Enum.map(hooks, & &1.event_name) == Events.names()
      assert Enum.map(hooks, &hd(&1.events)) == Events.all()
    end

    test "unknown keys and events are tolerated and reported", c do
      {hooks, errors} =
        settings!(c, %{
          "PermissionRequest" => [%{"hooks" => [hook("true")]}],
          "PreToolUze" => [%{"hooks" => [hook("true")]}],
          "PreToolUse" => [
            %{"matcher" => "Bash", "color" => "red", "hooks" => [hook("true", %{"tiemout" => 5})]}
          ]
        })

      assert [%{event_name: "PreToolUse"}] = hooks
      reasons = Enum.map(errors, & &1.reason)

      assert Enum.any?(
               reasons,
               &(&1 =~ "PermissionRequest is a Claude Code event cmdc_tool does not run")
             )

      assert Enum.any?(
               reasons,
               &(&1 =~ ~s[unknown event "PreToolUze" (did you mean "PreToolUse"?)])
             )

      assert Enum.any?(reasons, &(&1 =~ ~s(unknown key "color")))

      assert Enum.any?(
               reasons,
               &(&1 =~ ~s(unknown key "tiemout") and &1 =~ ~s(did you mean "timeout"))
             )

      assert run(c, hooks, "ls").content == "ran: ls"
    end
  end
end
