defmodule CMDC.Tool.CLI.CommandsTest do
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  alias CMDC.Tool.CLI.Commands

  @examples [examples: true, mcp: false]

  # Runs a command, returning {status, stdout, stderr}.
  defp run(fun) do
    err =
      capture_io(:stderr, fn ->
        out = capture_io(fn -> send(self(), {:status, fun.()}) end)
        send(self(), {:out, out})
      end)

    assert_received {:status, status}
    assert_received {:out, out}
    {status, out, err}
  end

  defp broken_dir(dir) do
    File.write!(Path.join(dir, "broken.ex"), "defmodule Broken do\n  def oops(, do: 1\nend\n")
    dir
  end

  test "list: the examples only when asked for; what each tool is and where it comes from" do
    {0, out, _} = run(fn -> Commands.list([], mcp: false) end)
    assert out =~ ~r/NAME\s+KIND\s+SOURCE\s+DESCRIPTION/
    refute out =~ "countdown"

    {0, out, _} = run(fn -> Commands.list([], @examples) end)
    assert out =~ ~r/countdown\s+elixir\s+built-in example\s+Count down/
    assert out =~ ~r/count_slowly\s+python\s+explicit: \S*examples\/tools\/text_tools.py/
  end

  @tag :tmp_dir
  test "list: configured tools come first; a broken tool file exits 4, named on stderr", %{
    tmp_dir: dir
  } do
    broken_dir(dir)
    {status, out, err} = run(fn -> Commands.list([dir], mcp: false) end)
    assert status == Commands.statuses().load_failed
    assert out =~ "load errors (1)"
    assert out =~ "broken.ex"
    assert err =~ "1 tool file(s) failed to load (exit status 4)"
  end

  # Discovery's compiler VM, then the Python SDK server's start: on a loaded machine the two
  # outlast ExUnit's default 60 s, which here would only turn slowness into a failure.
  @tag timeout: 300_000
  test "list shows MCP tools with their server; a broken server is reported, not fatal" do
    dir = Path.join(System.tmp_dir!(), "cmdc-cli-mcp-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    {:ok, %{command: python, args: args}} = CMDC.Tool.MCPServers.python_stdio()

    File.write!(
      Path.join(dir, ".mcp.json"),
      CMDC.Tool.JSON.encode!(%{
        "mcpServers" => %{
          "calc" => %{"command" => python, "args" => args},
          "bad" => %{"type" => "carrier-pigeon"}
        }
      })
    )

    {status, out, _} =
      run(fn ->
        ExUnit.CaptureLog.capture_log(fn ->
          send(self(), {:st, Commands.list([], cwd: dir, trust: true, examples: true)})
        end)

        assert_received {:st, status}
        status
      end)

    assert status == 4
    assert out =~ ~r/calc__add\s+mcp\s+mcp server calc: \S*\.mcp\.json\s+Add two integers/
    assert out =~ ~r/countdown\s+elixir\s+built-in example/
    assert out =~ ~s|server "bad": unknown transport "carrier-pigeon"|
  end

  test "schema prints the provider's JSON and the rewriting warnings on stderr" do
    {0, out, err} = run(fn -> Commands.schema([], [format: "gemini"] ++ @examples) end)
    assert [%{"functionDeclarations" => decls}] = CMDC.Tool.JSON.decode!(out)
    assert "countdown" in Enum.map(decls, & &1["name"])
    assert err =~ "additionalProperties"

    {0, out, _} =
      run(fn -> Commands.schema([], [format: "openai", strict: true] ++ @examples) end)

    [echo | _] = CMDC.Tool.JSON.decode!(out)
    assert echo["function"]["parameters"]["additionalProperties"] == false

    {2, "", err} = run(fn -> Commands.schema([], [format: "antropic"] ++ @examples) end)
    assert err =~ ~s(unknown format "antropic"; use one of:)
  end

  test "validate: the errors the model would see (1), valid (0), unknown tool (3, stderr)" do
    {1, out, _} = run(fn -> Commands.validate(["read_file", ~s({"path": 1})], @examples) end)
    assert out =~ "at /path: 1 is not of type"

    {0, out, _} = run(fn -> Commands.validate(["echo", ~s({"text": "a"})], @examples) end)
    assert out =~ "valid"

    {3, "", err} = run(fn -> Commands.validate(["ech", "{}"], @examples) end)
    assert err =~ "Did you mean: echo"
  end

  test "call streams partial results, prints the result and the time, fails with status 1" do
    {0, out, err} =
      run(fn -> Commands.call(["countdown", ~s({"n": 2, "delay_ms": 1})], @examples) end)

    assert out =~ ~r/2\.\.\..*1\.\.\..*liftoff after 2 steps/s
    assert err =~ ~r/ok in \d+\.\d ms/

    {1, out, _} = run(fn -> Commands.call(["echo", ~s({"text": 5})], @examples) end)
    assert out =~ "Invalid arguments"
  end

  @tag :tmp_dir
  test "call and validate of a tool whose file failed to load: status 3, the file and why", %{
    tmp_dir: dir
  } do
    broken_dir(dir)

    for command <- [:call, :validate] do
      {3, "", err} =
        run(fn -> apply(Commands, command, [["broken", "{}", dir], [mcp: false]]) end)

      assert err =~ "Unknown tool: broken."
      assert err =~ ~r/broken\.ex failed to load, so broken is not available: .*/
    end
  end

  @tag :tmp_dir
  test "doctor reports stale and corrupt script caches", %{tmp_dir: dir} do
    script = Path.join(dir, "t.py")
    File.write!(script, "def f(x: int) -> int:\n    \"\"\"Double.\"\"\"\n    return 2 * x\n")
    File.write!(Path.join(dir, "t.tool.json"), "{broken")
    {_, out, _} = run(fn -> Commands.doctor([dir], mcp: false) end)
    assert out =~ "t.py: its cache t.tool.json is corrupt"
  end

  @tag :tmp_dir
  test "doctor reports what would surprise a user, and exits 4 when a file failed", %{
    tmp_dir: dir
  } do
    {0, out, _} = run(fn -> Commands.doctor([], @examples) end)
    assert out =~ "echo: OpenAI strict mode"
    # Gemini dropping `additionalProperties: false` is no finding: the runner refuses other keys.
    refute out =~ "Gemini: `additionalProperties`"
    assert out =~ "pwsh not found" or System.find_executable("pwsh")

    {4, out, _} = run(fn -> Commands.doctor([broken_dir(dir)], mcp: false) end)
    assert out =~ "broken.ex"
  end

  describe "parse" do
    test "--help and -h on the task and every subcommand print the usage" do
      assert {:help, text} = Commands.parse(["--help"])
      assert {:help, ^text} = Commands.parse(["-h"])
      assert {:help, ^text} = Commands.parse([])

      for %{name: name} <- Commands.commands(), flag <- ["--help", "-h"] do
        assert {:help, usage} = Commands.parse([name, flag])
        assert usage =~ "Usage: mix cmdc.tools #{name}"
        assert text =~ "mix cmdc.tools #{name}"
      end

      # One flag name everywhere: --trust, in every usage of a command that loads tools.
      {:help, usage} = Commands.parse(["call", "-h"])
      assert usage =~ "--trust"
      assert usage =~ "--allow NAME"
    end

    test "a misspelled subcommand or option gets a did-you-mean; a missing argument the usage" do
      assert {:error, message} = Commands.parse(["lsit"])
      assert message =~ ~s(unknown command "lsit". Did you mean: list?)

      assert {:error, message} = Commands.parse(["list", "--turst"])
      assert message =~ "list: unknown option --turst (did you mean --trust?)"

      assert {:error, message} = Commands.parse(["call", "echo"])
      assert message =~ "call needs a tool name and JSON arguments"
      assert message =~ "Usage: mix cmdc.tools call NAME JSON"

      assert {:run, %{name: "call"}, ["echo", "{}"], [allow: "a", allow: "b"]} =
               Commands.parse(["call", "echo", "{}", "--allow", "a", "--allow", "b"])
    end
  end
end
