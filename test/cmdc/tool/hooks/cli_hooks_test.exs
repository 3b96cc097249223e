defmodule CMDC.Tool.Hooks.CLIHooksTest do
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  alias CMDC.Tool.CLI.Commands

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_cli_hooks_#{System.unique_integer([:positive])}")
    project = Path.join(root, "project")
    home = Path.join(root, "home")
    File.mkdir_p!(Path.join(project, ".claude"))
    File.mkdir_p!(Path.join(home, ".claude"))
    on_exit(fn -> File.rm_rf!(root) end)

    File.write!(Path.join(project, ".claude/settings.json"), ~s({"hooks": {"PreToolUse": [
      {"matcher": "echo", "hooks": [{"type": "command", "command": "echo 'no echo today' >&2; exit 2", "timeout": 5}]},
      {"matcher": "read_(", "hooks": [{"type": "command", "command": "true"}]}]}}))

    File.write!(
      Path.join(home, ".claude/settings.json"),
      ~s({"hooks": {"PostToolUse": [
      {"hooks": [{"type": "command", "command": "printf '{\\"systemMessage\\": \\"post ran\\"}'"}]}]}})
    )

    %{project: project, home: home}
  end

  test "hooks lists each hook with its file and whether it is active", %{project: p, home: h} do
    out = capture_io(fn -> assert 0 = Commands.hooks([], cwd: p, home: h) end)
    assert out =~ ~r/EVENT\s+MATCHER\s+COMMAND\s+TIMEOUT\s+ON FAILURE\s+FILE\s+ACTIVE/

    assert out =~
             ~r/PostToolUse\s+\*\s+printf .*60s\s+continue\s+\S*home\/.claude\/settings.json\s+yes/

    assert out =~
             ~r/PreToolUse\s+echo\s+echo 'no echo today' >&2; exit 2\s+5s\s+continue\s+.claude\/settings.json\s+no \(project not trusted\)/

    assert out =~ "inactive: the project is not trusted"

    assert out =~
             ~s(.claude/settings.json PreToolUse[1]: the matcher "read_(" is not a valid regular expression)

    out = capture_io(fn -> assert 0 = Commands.hooks([], cwd: p, home: h, trust: true) end)
    assert out =~ ~r/PreToolUse\s+echo.*settings.json\s+yes/
  end

  test "call applies the hooks: a trusted project's PreToolUse denies, notes go to stderr", %{
    project: p,
    home: h
  } do
    err =
      capture_io(:stderr, fn ->
        out =
          capture_io(fn ->
            assert 1 =
                     Commands.call(["echo", ~s({"text": "hi"})],
                       cwd: p,
                       home: h,
                       trust: true,
                       mcp: false,
                       examples: true
                     )
          end)

        assert out =~ "echo was denied by #{p}/.claude/settings.json PreToolUse[0].hooks[0]"
        assert out =~ "no echo today"
      end)

    assert err =~ "hooks: #{p}/.claude/settings.json PreToolUse[1]: the matcher"

    err =
      capture_io(:stderr, fn ->
        out =
          capture_io(fn ->
            assert 0 =
                     Commands.call(["echo", ~s({"text": "hi"})],
                       cwd: p,
                       home: h,
                       mcp: false,
                       examples: true
                     )
          end)

        assert out =~ "hi"
      end)

    assert err =~ "hook: post ran"
  end

  test "on a terminal, a hook's ask shows which hook asked and why; y runs the call", %{home: h} do
    File.write!(
      Path.join(h, ".claude/settings.json"),
      ~s({"hooks": {"PreToolUse": [{"matcher": "echo", "hooks": [
      {"type": "command", "command": "printf '{\\"hookSpecificOutput\\": {\\"permissionDecision\\": \\"ask\\", \\"permissionDecisionReason\\": \\"echo is loud\\"}}'"}]}]}})
    )

    root = Path.expand("../../../..", __DIR__)
    pty = Path.join(root, "test/support/pty_run.py")

    args = [
      pty,
      "y",
      "mix",
      "cmdc.tools",
      "call",
      "echo",
      ~s({"text": "hi"}),
      "--no-mcp",
      "--examples"
    ]

    {out, 0} = System.cmd("python3", args, cd: root, env: [{"MIX_ENV", "test"}, {"HOME", h}])
    out = String.replace(out, ~r/\e\[[0-9;]*m/, "")
    assert out =~ "approval needed for echo"

    assert out =~
             ~r/asked by \S*home\/.claude\/settings.json PreToolUse\[0\]\.hooks\[0\] .*: echo is loud/

    assert out =~ ~r/^hi\r?$/m
    assert out =~ "EXIT=0"
  end
end
