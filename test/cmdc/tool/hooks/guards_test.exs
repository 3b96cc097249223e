defmodule CMDC.Tool.Hooks.GuardsTest do
  # Issue 37 items 1 and 2, each attack as the issue reproduced it on real command hooks (sh
  # scripts run by the runner): a matcher PCRE cannot finish, matchers only JavaScript can
  # run, a deny followed by more than 1 MB, hooks that hang / are killed / exit 1 / print
  # invalid JSON with and without failClosed, and a daemon a hook forks.
  use ExUnit.Case, async: true

  import ExUnit.CaptureIO

  @moduletag :capture_log

  alias CMDC.Test.OsProc
  alias CMDC.Tool.{Hooks, Runner}
  alias CMDC.Tool.Examples.Echo
  alias CMDC.Tool.Hooks.{Listing, Matcher}
  alias CMDC.Tool.Test.Factory

  doctest CMDC.Tool.Hooks.Failure

  @hostile String.duplicate("a", 40) <> "_delete"

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_guards_#{System.unique_integer([:positive])}")
    project = Path.join(root, "project")
    home = Path.join(root, "home")
    File.mkdir_p!(Path.join(project, ".claude"))
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf!(root) end)
    %{project: project, home: home}
  end

  defp settings!(ctx, hooks) do
    path = Path.join(ctx.project, ".claude/settings.json")
    File.write!(path, CMDC.Tool.JSON.encode!(%{"hooks" => hooks}))
    path
  end

  defp group(matcher, command, extra \\ %{}),
    do: %{
      "matcher" => matcher,
      "hooks" => [Map.merge(%{"type" => "command", "command" => command}, extra)]
    }

  defp closed(extra \\ %{}), do: Map.put(extra, "cmdc", %{"failClosed" => true})

  defp load(ctx, opts \\ []),
    do: Hooks.load([cwd: ctx.project, home: ctx.home, trust_project: true] ++ opts)

  defp run(ctx, tools, name, opts \\ []) do
    config = load(ctx)
    context = %CMDC.Context{session_id: "guards", working_dir: ctx.project}
    call = %{id: "g-1", name: name, arguments: %{"text" => "ran"}}
    Runner.run(tools, call, context, [hooks: Hooks.Config.active(config)] ++ opts)
  end

  describe "matchers (item 1)" do
    test "a matcher PCRE gives up on still matches: the deny hook runs", ctx do
      tool = Factory.tool(@hostile, "A hostile tool.", %{"type" => "object"})
      # The attack: the VM's own regex engine hits its match limit and answers "no match".
      refute Regex.match?(~r/(a|aa)*b|delete/, @hostile)

      settings!(ctx, %{
        "PreToolUse" => [group("(a|aa)*b|delete", "echo 'no deletes' >&2; exit 2")]
      })

      r = run(ctx, [tool], @hostile)
      assert {r.is_error, r.reason} == {true, :denied}
      assert r.content =~ "no deletes"

      # The same matcher on an Elixir hook: the one engine.
      deny = [
        name: "no_delete",
        match: "(a|aa)*b|delete",
        before_call: fn _, _ -> {:deny, "no"} end
      ]

      r =
        Runner.run([tool], %{id: "e", name: @hostile, arguments: %{}}, %CMDC.Context{},
          hooks: [deny]
        )

      assert r.reason == :denied

      # Linear time whatever the name's length (no timing asserted: a backtracking engine
      # would not return from this).
      {:ok, m} = Matcher.parse("(a|aa)*b|delete")
      assert Matcher.match(m, [String.duplicate("a", 100_000) <> "_delete"]) == {:ok, true}
      assert Matcher.match(m, [String.duplicate("a", 100_000)]) == {:ok, false}
      # A long text is matched on a dirty scheduler: the normal-scheduler NIF yields first.
      {:regex, compiled, _} = m
      assert CMDC.Tool.Native.matcher_match(compiled, [@hostile]) == {:ok, true}

      assert CMDC.Tool.Native.matcher_match(compiled, [String.duplicate("a", 2_000)]) ==
               {:error, :yield}
    end

    test "JavaScript-only matchers are reported when read, listed, and never a silent non-match",
         ctx do
      settings!(ctx, %{
        "PreToolUse" => [
          group("^(?!read_).*", "echo 'guarded' >&2; exit 2"),
          group("(e)\\1cho", "echo 'guarded' >&2; exit 2", closed())
        ]
      })

      config = load(ctx)
      assert [look, back] = config.errors
      assert look.hook == "PreToolUse[0]" and look.reason =~ "uses look-around"
      assert look.reason =~ "JavaScript's regular expressions accept"
      assert back.hook == "PreToolUse[1]" and back.reason =~ "back-reference"
      # Both hooks are kept, listed as failing.
      assert length(config.hooks) == 2
      listing = Listing.render(config, ctx.project)
      assert listing =~ ~r/\^\(\?!read_\)\.\*.*continue.*fails \(matcher cannot be run/
      assert listing =~ ~r/\(e\)\\1cho.*deny.*fails \(matcher cannot be run/
      assert listing =~ "uses look-around"

      # At a call: the fail-closed one denies, naming its matcher; the other is a note.
      r = run(ctx, [Echo], "echo")
      assert r.reason == :denied
      assert r.content =~ "has a matcher that cannot be run"
      assert r.content =~ "back-reference"

      settings!(ctx, %{"PreToolUse" => [group("^(?!read_).*", "exit 2")]})
      r = run(ctx, [Echo], "echo")
      assert {r.is_error, r.content} == {false, "ran"}
      assert [note] = r.notes
      assert note =~ "has a matcher that cannot be run" and note =~ "look-around"
    end

    test "mix cmdc.tools hooks and doctor show the matcher problem", ctx do
      settings!(ctx, %{"PreToolUse" => [group("(?<=mcp__)fs", "true")]})

      out =
        capture_io(fn ->
          CMDC.Tool.CLI.Commands.hooks([], cwd: ctx.project, home: ctx.home, trust: true)
        end)

      assert out =~ "PreToolUse[0]: the matcher \"(?<=mcp__)fs\" uses look-around"

      out = capture_io(fn -> CMDC.Tool.CLI.Commands.doctor([], cwd: ctx.project, trust: true) end)
      assert out =~ "hooks: .claude/settings.json PreToolUse[0]: the matcher"
      assert out =~ "look-around"
    end

    test "an Elixir hook's matcher that cannot be run is refused when the hook is made" do
      assert {:error, message} = Hooks.Hook.new(match: "(?!x)", before_call: fn _, _ -> :ok end)
      assert message =~ "look-around"
    end
  end

  describe "failures (item 2)" do
    @failing [
      {"hang", "sleep 30", %{"timeout" => 1}, "timed out after 1000 ms"},
      {"kill", "kill -9 $$", %{}, "killed by signal 9"},
      {"exit 1", "echo broken >&2; exit 1", %{}, "exited with status 1: broken"},
      {"invalid JSON", "echo '{\"hookSpecificOutput\": '", %{}, "not a JSON object"}
    ]

    test "each failure lets the call run by default (Claude Code's rule), with a note", ctx do
      for {what, cmd, extra, says} <- @failing do
        settings!(ctx, %{"PreToolUse" => [group("echo", cmd, extra)]})
        r = run(ctx, [Echo], "echo")
        assert {r.is_error, r.content} == {false, "ran"}, what
        assert [note] = r.notes
        assert note =~ says, what
      end
    end

    test "with \"cmdc\": {\"failClosed\": true} each failure denies the call", ctx do
      for {what, cmd, extra, says} <- @failing do
        settings!(ctx, %{"PreToolUse" => [group("echo", cmd, closed(extra))]})
        r = run(ctx, [Echo], "echo")
        assert {r.is_error, r.reason} == {true, :denied}, what
        assert r.content =~ says, what
        assert r.content =~ "fail-closed: not run", what
      end
    end

    test "the runner's hooks_fail_closed: true closes every command hook", ctx do
      settings!(ctx, %{"PreToolUse" => [group("echo", "exit 1")]})
      assert run(ctx, [Echo], "echo").content == "ran"
      assert run(ctx, [Echo], "echo", hooks_fail_closed: true).reason == :denied
      # And Hooks.load(fail_closed: true) for a server reading the files.
      assert Enum.all?(load(ctx, fail_closed: true).hooks, & &1.fail_closed)
    end

    test "after a call a fail-closed failure withholds the result", ctx do
      settings!(ctx, %{"PostToolUse" => [group("echo", "exit 1", closed())]})
      r = run(ctx, [Echo], "echo")
      assert {r.is_error, r.reason} == {true, :blocked}
      refute r.content =~ "ran"
    end

    test "a deny printed and then more than 1 MB denies, in both modes", ctx do
      deny =
        ~s({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "not today"}})

      allow = ~s({"hookSpecificOutput": {"permissionDecision": "allow"}})
      flood = "head -c 2000000 /dev/zero | tr '\\\\0' ' '"

      for {json, says} <- [{deny, "(deny: not today)"}, {allow, "(allow)"}],
          extra <- [%{}, closed()] do
        settings!(ctx, %{
          "PreToolUse" => [group("echo", "printf '%s' '#{json}'; #{flood}", extra)]
        })

        r = run(ctx, [Echo], "echo")
        assert {r.is_error, r.reason} == {true, :denied}
        assert r.content =~ "printed more than 1000000 bytes"
        assert r.content =~ says
      end

      # Without a decision at its start it is an ordinary failure (non-blocking by default).
      settings!(ctx, %{"PreToolUse" => [group("echo", flood)]})
      assert run(ctx, [Echo], "echo").content == "ran"

      # A short tail of other text after the decision: the same rule.
      settings!(ctx, %{"PreToolUse" => [group("echo", "printf '%s and more' '#{deny}'")]})
      r = run(ctx, [Echo], "echo")
      assert r.reason == :denied and r.content =~ "printed more text after its JSON answer"
    end

    test "a daemon the hook forks is killed with it", ctx do
      pidfile = Path.join(ctx.project, "daemon.pid")

      settings!(ctx, %{
        "PreToolUse" => [
          group("echo", "setsid sleep 1000 > /dev/null 2>&1 & echo $! > #{pidfile}")
        ]
      })

      r = run(ctx, [Echo], "echo")
      assert r.content == "ran"
      pid = pidfile |> File.read!() |> String.trim() |> String.to_integer()
      assert OsProc.wait_dead(pid), "the hook's daemon #{pid} outlived it"
    end

    test "a bad \"cmdc\" key is a problem naming the key, and the hook fails closed", ctx do
      settings!(ctx, %{
        "PreToolUse" => [
          group("echo", "true", %{"cmdc" => %{"failClose" => true}}),
          group("echo", "true", %{"cmdc" => %{"failClosed" => "yes"}})
        ]
      })

      config = load(ctx)
      assert [typo, value] = config.errors
      assert typo.hook == "PreToolUse[0].hooks[0]"
      assert typo.reason =~ ~s(unknown key "failClose" in "cmdc" (did you mean "failClosed"?\))
      assert value.reason =~ "cmdc.failClosed must be true or false"
      # Meant to change how the hook fails: it loads, fail-closed, until fixed.
      assert value.reason =~ "the hook fails closed until this is fixed"
      assert [%{fail_closed: true}, %{fail_closed: true}] = config.hooks
    end
  end
end
