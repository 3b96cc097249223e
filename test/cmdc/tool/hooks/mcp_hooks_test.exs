defmodule CMDC.Tool.Hooks.MCPHooksTest do
  # bin/cmdc-mcp as a client runs it (the official Python SDK): the project's trusted
  # .claude/settings.json hooks apply to its calls, and a pending action is previewed, listed
  # with `resolve` and applied.
  use ExUnit.Case, async: true

  @moduletag timeout: 600_000
  @root Path.expand("../../../..", __DIR__)

  test "official Python client: hooks and the pending-action flow through cmdc-mcp" do
    {:ok, python} = CMDC.Tool.PythonEnv.python()
    dir = Path.join(System.tmp_dir!(), "cmdc_mcp_hooks_#{System.unique_integer([:positive])}")
    home = Path.join(dir, "home")
    project = Path.join(dir, "project")
    File.mkdir_p!(Path.join(home, ".cmdc"))
    File.mkdir_p!(Path.join(project, ".claude"))
    on_exit(fn -> File.rm_rf!(dir) end)

    File.write!(
      Path.join(home, ".cmdc/trusted.json"),
      CMDC.Tool.JSON.encode!(%{"trusted" => [project]})
    )

    File.write!(Path.join(project, "notes.txt"), "alpha\nbeta\n")

    File.write!(Path.join(project, "edit_tool.ex"), """
    defmodule MCPHooksTest.EditFile do
      @behaviour CMDC.Tool
      alias CMDC.Tool.Examples.EditFile
      defdelegate name, to: EditFile
      defdelegate description, to: EditFile
      defdelegate parameters, to: EditFile
      defdelegate execute(args, ctx), to: EditFile
    end
    """)

    File.write!(Path.join(project, "guard.py"), """
    import json, sys
    call = json.load(sys.stdin)
    if "rm -rf" in call["tool_input"].get("text", ""):
        print("no deleting here", file=sys.stderr)
        sys.exit(2)
    if call["tool_name"] == "resolve":
        # The hook sees what is being applied.
        print(json.dumps({"hookSpecificOutput": {"additionalContext": "applied: " + call["pending_action"]["label"]}}))
    """)

    File.write!(
      Path.join(project, ".claude/settings.json"),
      CMDC.Tool.JSON.encode!(%{
        "hooks" => %{
          "PreToolUse" => [
            %{
              "matcher" => "echo|resolve",
              "hooks" => [
                %{"type" => "command", "command" => "python3 \"$CLAUDE_PROJECT_DIR/guard.py\""}
              ]
            }
          ]
        }
      })
    )

    env = [{"MIX_ENV", "test"}, {"HOME", home}, {"CMDC_HOME", Path.join(home, ".cmdc")}]
    client = Path.join(@root, "test/support/mcp_hooks_client.py")

    {out, 0} =
      System.cmd(
        python,
        [
          client,
          Path.join(@root, "bin/cmdc-mcp"),
          "--examples",
          Path.join(project, "edit_tool.ex")
        ],
        cd: project,
        env: env,
        stderr_to_stdout: false
      )

    report = out |> String.split("\n", trim: true) |> List.last() |> CMDC.Tool.JSON.decode!()

    assert report["echo"] == %{"is_error" => false, "text" => "plain"}
    assert %{"is_error" => true, "text" => denied} = report["denied"]
    assert denied =~ "echo was denied by" and denied =~ "no deleting here"
    assert report["preview"]["text"] =~ "- beta\n+ BETA"
    refute "resolve" in report["tools_before"]
    assert "resolve" in report["tools_pending"]

    assert report["resolve"] == %{
             "is_error" => false,
             "text" => "notes.txt: 1 replacement written\n\napplied: edit notes.txt"
           }

    refute "resolve" in report["tools_after"]
    assert File.read!(Path.join(project, "notes.txt")) == "alpha\nBETA\n"
  end
end
