defmodule CMDC.Tool.CLITest do
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  alias CMDC.Tool.CLI

  test "list shows every tool with its kind, source and description" do
    out = capture_io(fn -> assert :ok = CLI.list([], []) end)
    assert out =~ ~r/NAME\s+KIND\s+SOURCE\s+DESCRIPTION/
    assert out =~ ~r/countdown\s+elixir\s+built-in\s+Count down/
  end

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

    out =
      capture_io(fn ->
        ExUnit.CaptureLog.capture_log(fn -> assert :ok = CLI.list([], cwd: dir, trust: true) end)
      end)

    assert out =~ ~r/calc__add\s+mcp\s+mcp server calc: \S*\.mcp\.json\s+Add two integers/
    assert out =~ ~r/countdown\s+elixir\s+built-in/
    assert out =~ ~s|server "bad": unknown transport "carrier-pigeon"|
  end

  test "schema prints the provider's JSON and the rewriting warnings on stderr" do
    err =
      capture_io(:stderr, fn ->
        out = capture_io(fn -> assert :ok = CLI.schema([], format: "gemini") end)
        assert [%{"functionDeclarations" => decls}] = CMDC.Tool.JSON.decode!(out)
        assert "countdown" in Enum.map(decls, & &1["name"])
      end)

    assert err =~ "additionalProperties"

    out =
      capture_io(fn ->
        capture_io(:stderr, fn ->
          send(
            self(),
            {:out, capture_io(fn -> CLI.schema([], format: "openai", strict: true) end)}
          )
        end)
      end)

    out = if out == "", do: receive(do: ({:out, o} -> o)), else: out
    [echo | _] = CMDC.Tool.JSON.decode!(out)
    assert echo["function"]["parameters"]["additionalProperties"] == false
  end

  test "validate: the errors the model would see, and a non-zero status" do
    out =
      capture_io(fn -> assert {:error, 1} = CLI.validate("read_file", ~s({"path": 1}), [], []) end)

    assert out =~ "at /path: 1 is not of type"

    assert capture_io(fn -> assert :ok = CLI.validate("echo", ~s({"text": "a"}), [], []) end) =~
             "valid"

    assert capture_io(:stderr, fn -> assert {:error, 2} = CLI.validate("ech", "{}", [], []) end) =~
             "did you mean: echo"
  end

  test "call streams partial results, prints the result and the time, fails with status 1" do
    err =
      capture_io(:stderr, fn ->
        out =
          capture_io(fn ->
            assert :ok = CLI.call("countdown", ~s({"n": 2, "delay_ms": 1}), [], [])
          end)

        assert out =~ ~r/2\.\.\..*1\.\.\..*liftoff after 2 steps/s
      end)

    assert err =~ ~r/ok in \d+\.\d ms/

    capture_io(:stderr, fn ->
      out = capture_io(fn -> assert {:error, 1} = CLI.call("echo", ~s({"text": 5}), [], []) end)
      assert out =~ "Invalid arguments"
    end)
  end

  @tag :tmp_dir
  test "doctor reports stale and corrupt script caches", %{tmp_dir: dir} do
    script = Path.join(dir, "t.py")
    File.write!(script, "def f(x: int) -> int:\n    \"\"\"Double.\"\"\"\n    return 2 * x\n")
    File.write!(Path.join(dir, "t.tool.json"), "{broken")
    out = capture_io(fn -> capture_io(:stderr, fn -> CLI.doctor([dir], []) end) end)
    assert out =~ "t.py: its cache t.tool.json is corrupt"
  end

  test "doctor reports what would surprise a user" do
    out = capture_io(fn -> capture_io(:stderr, fn -> assert :ok = CLI.doctor([], []) end) end)
    assert out =~ "Gemini"
    assert out =~ "pwsh not found" or System.find_executable("pwsh")
  end
end
