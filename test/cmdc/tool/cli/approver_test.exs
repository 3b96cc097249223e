defmodule CMDC.Tool.CLI.ApproverTest do
  # `mix cmdc.tools call` asks the person at the terminal (tested on a real pseudo-terminal),
  # takes --yes for scripted use, and refuses off a terminal naming the flag.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO
  import CMDC.Tool.ScriptCase

  alias CMDC.Tool.CLI.Commands

  @root Path.expand("../../../..", __DIR__)
  @pty Path.join(@root, "test/support/pty_run.py")

  defp guarded_dir do
    dir = tmp_dir("cli_approval")

    write!(dir, "guarded.py", ~S'''
    def launch(target: str) -> str:
        """Launches something at a target."""
        return "launched " + target


    launch.executionPolicy = "ask-always"
    launch.resultApprovalPolicy = "always"
    ''')

    dir
  end

  defp on_pty(answers, dir) do
    {out, 0} =
      System.cmd(
        "python3",
        [@pty, answers, "mix", "cmdc.tools", "call", "launch", ~s({"target": "moon"}), dir],
        cd: @root,
        env: [{"MIX_ENV", "test"}]
      )

    [_, status] = Regex.run(~r/EXIT=(-?\d+)\s*$/, out)
    # the terminal gets colours
    {String.replace(out, ~r/\e\[[0-9;]*m/, ""), String.to_integer(status)}
  end

  test "on a terminal: shows tool, summary, arguments and result, and runs on y" do
    {out, status} = on_pty("y,y", guarded_dir())
    assert out =~ "approval needed for launch"
    assert out =~ ~s(arguments: {"target":"moon"})
    assert out =~ "Run it? [y/N]"
    assert out =~ "result: launched moon"
    assert out =~ "Show this result to the model? [y/N]"
    assert status == 0, out
  end

  test "on a terminal: n means not run" do
    {out, status} = on_pty("n", guarded_dir())
    assert out =~ "launch was not approved: declined at the terminal"
    refute out =~ "result: launched"
    assert status == 1, out
  end

  test "off a terminal: refused with a message naming --yes; --yes runs it" do
    dir = guarded_dir()

    out =
      capture_io(fn ->
        capture_io(:stderr, fn ->
          send(self(), {:status, Commands.call(["launch", ~s({"target": "moon"}), dir], [])})
        end)
      end)

    assert_received {:status, 1}
    assert out =~ "needs approval and this is not an interactive terminal; pass --yes"

    out =
      capture_io(fn ->
        capture_io(:stderr, fn ->
          send(
            self(),
            {:status, Commands.call(["launch", ~s({"target": "moon"}), dir], yes: true)}
          )
        end)
      end)

    assert_received {:status, 0}
    assert out =~ "launched moon"

    # --allow NAME runs that one tool without asking (its result approval still applies).
    out =
      capture_io(fn ->
        capture_io(:stderr, fn ->
          send(
            self(),
            {:status, Commands.call(["launch", ~s({"target": "moon"}), dir], allow: "launch")}
          )
        end)
      end)

    assert_received {:status, 1}
    assert out =~ "the result of launch was not approved"
    refute out =~ "launched moon"
  end
end
