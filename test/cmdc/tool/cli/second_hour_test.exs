defmodule CMDC.Tool.CLI.SecondHourTest do
  # The CLI's and cmdc-mcp's messages a new user met in their second hour (issue 40, items 4,
  # 5, 12, 14, 15): an option without its value, a --cwd that does not exist, help that
  # matches the errors, a misspelled hook event, a failing hook said once, an untrusted
  # project's hooks said once.
  use ExUnit.Case, async: true

  import ExUnit.CaptureIO

  alias CMDC.Tool.CLI.Commands
  alias CMDC.Tool.JSON

  doctest CMDC.Tool.CLI

  @root Path.expand("../../../..", __DIR__)

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_second_hour_#{System.unique_integer([:positive])}")
    project = Path.join(root, "project")
    home = Path.join(root, "home")
    File.mkdir_p!(Path.join(project, ".claude"))
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf!(root) end)
    %{project: project, home: home}
  end

  defp settings!(project, hooks),
    do:
      File.write!(Path.join(project, ".claude/settings.json"), JSON.encode!(%{"hooks" => hooks}))

  defp command(matcher, command),
    do: [%{"matcher" => matcher, "hooks" => [%{"type" => "command", "command" => command}]}]

  test "an option given without its value says it needs one (CLI and cmdc-mcp)" do
    for {argv, message} <- [
          {["call", "echo", "{}", "--timeout"], "call: --timeout needs a value (an integer)"},
          {["schema", "--format"], "schema: --format needs a value"},
          {["call", "echo", "{}", "--allow"], "call: --allow needs a value"},
          {["call", "echo", "{}", "--tmeout", "5"],
           "unknown option --tmeout (did you mean --timeout?)"}
        ] do
      assert {:error, text} = Commands.parse(argv)
      assert text =~ message
      refute text =~ "unknown option --timeout"
    end

    for {argv, message} <- [
          {["--watch"], "--watch needs a value (an integer)"},
          {["--http"], "--http needs a value (an integer)"},
          {["--allow"], "--allow needs a value"},
          {["--wtach", "5"], "unknown option --wtach (did you mean --watch?)"}
        ] do
      assert CMDC.Tool.MCP.Main.parse(argv) == {:error, message}
    end
  end

  test "bin/cmdc-mcp --cwd with a missing folder is a usage error naming it" do
    missing = "/nonexistent/cmdc_project_#{System.unique_integer([:positive])}"

    {out, status} =
      System.cmd(Path.join(@root, "bin/cmdc-mcp"), ["--cwd", missing],
        env: [{"MIX_ENV", "test"}],
        stderr_to_stdout: true
      )

    assert status == 2
    assert out =~ "cmdc-mcp: --cwd #{missing}: no such folder"
    refute out =~ "cd:"
  end

  test "help: every flag a subcommand lists is in its usage line; schema lists every format" do
    for c <- Commands.commands() do
      {:help, text} = Commands.parse([c.name, "--help"])
      [usage_line | _] = String.split(text, "\n")

      for [flag] <- Regex.scan(~r/^  (--[a-z-]+)/m, text),
          do: assert(usage_line =~ "[" <> flag, "#{c.name}: #{flag} listed, not in #{usage_line}")
    end

    {:help, help} = Commands.parse(["schema", "--help"])
    error = capture_io(:stderr, fn -> assert 2 = Commands.schema([], format: "nope") end)
    [_, listed] = Regex.run(~r/--format ([a-z_|]+)/, help)
    [_, accepted] = Regex.run(~r/use one of: ([a-z_, ]+)/, error)
    assert String.split(listed, "|") == String.split(accepted, ", ")
    assert length(String.split(listed, "|")) == length(CMDC.Tool.Providers.formats())
  end

  test "a misspelled module in config :cmdc_tool, tools gets a did-you-mean" do
    assert %{tools: [], errors: [error]} =
             CMDC.Tool.Project.tools(tools: [CMDC.Tool.Examples.Ehco])

    assert error.reason =~ "is not a compiled module (did you mean CMDC.Tool.Examples.Echo?)"

    assert %{errors: [error]} = CMDC.Tool.Project.tools(tools: [Nowhere.Near.Anything])
    assert error.reason =~ "(is it spelled right and under lib/?)"
  end

  test "a misspelled hook event gets a did-you-mean", %{project: p, home: h} do
    settings!(p, %{"PreTooluse" => command("echo", "true")})
    config = CMDC.Tool.Hooks.load(cwd: p, home: h, trust_project: true)

    assert [%{reason: "unknown event \"PreTooluse\" (did you mean \"PreToolUse\"?)" <> _}] =
             config.errors
  end

  test "call: a failing hook is said once; an untrusted project's hooks are said to be inactive",
       %{project: p, home: h} do
    settings!(p, %{"PreToolUse" => command("echo", "echo broken >&2; exit 7")})
    args = ["echo", ~s({"text": "hi"})]
    opts = [cwd: p, home: h, mcp: false, examples: true]

    {out, err} = both(fn -> assert 0 = Commands.call(args, [trust: true] ++ opts) end)
    assert out =~ "hi"
    all = out <> err
    assert [_] = Regex.scan(~r/exited with status 7/, all), all

    {out, err} = both(fn -> assert 0 = Commands.call(args, opts) end)
    assert out =~ "hi"

    assert [_] =
             Regex.scan(
               ~r/hooks: 1 hook\(s\) of .+\.claude\/settings\.json are not active: the project .+ is not trusted/,
               err
             )
  end

  defp both(fun) do
    me = self()

    err =
      capture_io(:stderr, fn ->
        log = ExUnit.CaptureLog.capture_log(fn -> send(me, {:out, capture_io(fun)}) end)
        IO.write(:stderr, log)
      end)

    assert_received {:out, out}
    {out, err}
  end
end
