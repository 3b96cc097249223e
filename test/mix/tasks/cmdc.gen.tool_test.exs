defmodule Mix.Tasks.Cmdc.Gen.ToolTest do
  # The generator's usage; what it writes is run in a generated app by
  # test/cmdc/tool/cli/project_app_test.exs (the tool, and its test with `mix test`).
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  alias Mix.Tasks.Cmdc.Gen.Tool

  test "--help and -h print the usage" do
    for flag <- ["--help", "-h"] do
      assert capture_io(fn -> Tool.run([flag]) end) =~ "mix cmdc.gen.tool NAME [--python]"
    end
  end

  test "usage errors exit 2 with a message: bad name, unknown option, no name" do
    for {argv, expected} <- [
          {["Get-Weather"], "is not a tool name: snake_case"},
          {["x", "--pyton"], "unknown option --pyton (did you mean --python?)"},
          {[], "expected one tool NAME"}
        ] do
      err = capture_io(:stderr, fn -> assert catch_exit(Tool.run(argv)) == {:shutdown, 2} end)
      assert err =~ expected
    end
  end
end
