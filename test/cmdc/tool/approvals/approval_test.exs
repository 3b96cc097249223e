defmodule CMDC.Tool.ApprovalTest do
  # Issue 15: tools keep their authors' permissions. One normalizer for every spelling
  # (docs/PERMISSIONS.md), fail-safe; result approval enforced by the runner for every tool kind.
  use ExUnit.Case, async: true
  import CMDC.Tool.ScriptCase
  import ExUnit.CaptureLog

  alias CMDC.Tool.{Registry, Runner}

  defmodule Secret do
    @behaviour CMDC.Tool
    def name, do: "secret"
    def description, do: "Reads a secret."
    def parameters, do: %{"type" => "object", "properties" => %{"fail" => %{"type" => "boolean"}}}
    def tool_options, do: [policy: :auto, result_approval: :always]
    def execute(%{"fail" => true}, _ctx), do: {:error, "no secret"}
    def execute(_args, _ctx), do: {:ok, "s3cr3t"}
  end

  defmodule Flaky do
    @behaviour CMDC.Tool
    def name, do: "flaky"
    def description, do: "Sometimes fails."
    def parameters, do: %{"type" => "object", "properties" => %{"fail" => %{"type" => "boolean"}}}
    def tool_options, do: %{"resultApprovalPolicy" => "on-error", "executionPolicy" => "auto"}
    def execute(%{"fail" => true}, _ctx), do: {:error, "it broke: password=hunter2"}
    def execute(_args, _ctx), do: {:ok, "fine"}
  end

  @ctx %CMDC.Context{session_id: "approval"}

  defp call(name, args \\ %{}), do: %{id: "c1", name: name, arguments: args}

  describe "result approval (every tool kind)" do
    test "headless: a result marked :always is withheld with a clear error, never shown" do
      result = Runner.run([Secret], call("secret"), @ctx)
      assert result.is_error
      assert result.reason == :withheld
      assert result.content =~ "needs approval before the model may see it"
      refute result.content =~ "s3cr3t"
    end

    test "the approver sees tool, args, call id and the result; its answer decides" do
      me = self()

      allow = fn req ->
        send(me, {:asked, req})
        :allow
      end

      result = Runner.run([Secret], call("secret"), @ctx, approver: allow)
      assert {result.content, result.is_error} == {"s3cr3t", false}
      assert_received {:asked, %{tool: "secret", args: %{}, call_id: "c1", result: seen}}
      assert seen.content == "s3cr3t"

      denied =
        Runner.run([Secret], call("secret"), @ctx, approver: fn _ -> {:deny, "private"} end)

      assert denied.content == "the result of secret was not approved: private"
      assert denied.reason == :withheld

      plain_no = Runner.run([Secret], call("secret"), @ctx, approver: fn _ -> :deny end)
      assert plain_no.content == "the result of secret was not approved."
    end

    test ":on_error reviews error results only (string spellings from tool_options)" do
      assert Runner.run([Flaky], call("flaky"), @ctx).content == "fine"

      withheld = Runner.run([Flaky], call("flaky", %{"fail" => true}), @ctx)
      assert withheld.reason == :withheld
      refute withheld.content =~ "hunter2"
    end

    test "registry settings in any spelling apply, and the stricter of conflicting ones wins" do
      reg = Registry.new()
      Registry.register(reg, [CMDC.Tool.Examples.Echo])

      Registry.put_settings(reg, "echo", %{
        "permissionLevel" => "public",
        "requireResultApproval" => true
      })

      result = Runner.run(reg, call("echo", %{"text" => "hi"}), @ctx)
      assert result.reason == :withheld

      Registry.put_settings(reg, "echo", %{
        "permissionLevel" => "sensitive",
        "requireExecutionApproval" => false
      })

      # sensitive + false: stricter wins, ask every time (and headless means not run)
      result = Runner.run(reg, call("echo", %{"text" => "hi"}), @ctx)
      assert result.reason == :denied
      assert result.content =~ "needs approval"
    end

    test "an unknown registry value is the strictest, with a warning naming tool and setting" do
      reg = Registry.new()
      Registry.register(reg, [CMDC.Tool.Examples.Echo])

      Registry.put_settings(reg, "echo", %{
        "resultApprovalPolicy" => "sometimes",
        "policy" => "auto"
      })

      log =
        capture_log(fn ->
          assert Runner.run(reg, call("echo", %{"text" => "hi"}), @ctx).reason == :withheld
        end)

      assert log =~
               ~s(settings of echo: resultApprovalPolicy = "sometimes" is not never, on-error or always)
    end

    test "the MCP server has no one to approve: the result is withheld as an isError result" do
      alias CMDC.Test.MCPIO
      {:ok, out} = StringIO.open("")
      input = MCPIO.feeder()
      me = self()

      spawn_link(fn ->
        CMDC.Tool.MCP.Server.serve([Secret, Flaky], input: input, output: out)
        send(me, :stopped)
      end)

      MCPIO.feed(input, %{"jsonrpc" => "2.0", "id" => 1, "method" => "initialize"})

      for {id, name, args} <- [{2, "secret", %{}}, {3, "flaky", %{"fail" => true}}] do
        params = %{"name" => name, "arguments" => args}

        MCPIO.feed(input, %{
          "jsonrpc" => "2.0",
          "id" => id,
          "method" => "tools/call",
          "params" => params
        })
      end

      frames = MCPIO.await_frames(out, 3)
      MCPIO.eof(input)
      assert_receive :stopped

      for id <- [2, 3] do
        %{"result" => %{"isError" => true, "content" => [%{"text" => text}]}} =
          Enum.find(frames, &(&1["id"] == id))

        assert text =~ "needs approval before the model may see it"
        refute text =~ "s3cr3t" or text =~ "hunter2"
      end
    end
  end

  describe "script permissions (sy-f-misc's spellings)" do
    test "legacy attributes: requireResultApproval, conflicts, unknown levels" do
      dir = tmp_dir("perm_legacy")

      path =
        write!(dir, "legacy.py", ~S'''
        def wipe(path: str) -> str:
            """Deletes a file."""
            return "wiped " + path


        wipe.permissionLevel = "sensitive"
        wipe.requireExecutionApproval = False


        def peek(path: str) -> str:
            """Reads a file."""
            return "secret in " + path


        peek.permissionLevel = "public"
        peek.requireResultApproval = True


        def odd() -> str:
            return "odd"


        odd.permissionLevel = "dangerous"


        def computed() -> str:
            return "x"


        computed.executionPolicy = "a" + "uto"
        ''')

      {{group, tools}, log} = with_log(fn -> load!(path, cache: false) end)

      assert tools["wipe"].__tool_settings__().policy == :ask_always
      assert tools["peek"].__tool_settings__().policy == :auto
      assert tools["peek"].__tool_settings__().result_approval == :always
      assert tools["odd"].__tool_settings__().policy == :ask_always
      assert tools["computed"].__tool_settings__().policy == :ask_always
      assert Enum.any?(group.warnings, &(&1 =~ ~s(legacy.py: odd: permissionLevel = "dangerous")))
      assert log =~ "permissionLevel = \"dangerous\""
      assert log =~ ~s(legacy.py: computed: executionPolicy = "<not a literal: 'a' + 'uto'>")

      # enforced: the result of peek is withheld when no one can approve
      result = Runner.run(group.tools, call("peek", %{"path" => "/etc"}), @ctx)
      assert result.reason == :withheld
      refute result.content =~ "secret in"
    end

    test "a .tool.json written by sy-f-misc keeps its per-tool permissions where stricter" do
      dir = tmp_dir("perm_syf")

      path =
        write!(dir, "files.py", ~S'''
        def rm(path: str) -> str:
            return "removed"


        def ls(path: str) -> list:
            return []
        ''')

      # py2tool.py's layout: permission fields at each tool's top level, no scriptStamp.
      cache = %{
        "type" => "PythonModule",
        "name" => "files",
        "scriptPath" => path,
        "rulePrompt" => "",
        "tools" => [
          %{
            "type" => "function",
            "function" => %{
              "name" => "rm",
              "description" => "rm",
              "parameters" => %{
                "type" => "object",
                "properties" => %{"path" => %{"type" => "string"}}
              }
            },
            "permissionLevel" => "sensitive",
            "requireResultApproval" => true
          },
          %{
            "type" => "function",
            "function" => %{
              "name" => "ls",
              "description" => "ls",
              "parameters" => %{
                "type" => "object",
                "properties" => %{"path" => %{"type" => "string"}}
              }
            },
            "permissionLevel" => "public"
          }
        ]
      }

      cache_path = Path.join(dir, "files.tool.json")
      File.write!(cache_path, CMDC.Tool.JSON.encode!(cache))
      later = System.os_time(:second) + 5
      File.touch!(cache_path, later)

      # Not the script's word (no tag of ours): the script is read, and the cache may only
      # tighten it: rm's stricter settings stay, ls's looser `public` does not.
      {group, tools} = load!(path)
      assert group.status == :rebuilt
      assert tools["rm"].__tool_settings__().policy == :ask_always
      assert tools["rm"].__tool_settings__().result_approval == :always
      assert tools["ls"].__tool_settings__().policy == :ask_once
      assert tools["ls"].__tool_settings__().result_approval == :never
    end
  end
end
