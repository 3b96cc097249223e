defmodule CMDC.Tool.ErrorShapesTest do
  # The error shapes users get from each public function family (documented in each module's
  # @moduledoc and in docs/DEVELOPING.md, "Errors users get"). Errors are made in one place per
  # crate (error.rs); these tests pin what reaches Elixir. Not async: one test sets CMDC_MCP_FD.
  use ExUnit.Case, async: false

  import CMDC.Tool.ScriptCase
  import ExUnit.CaptureLog

  alias CMDC.Tool.{Discovery, Exec, Permissions, Registry, RoundTrip, Schema, Script}

  describe "scripts" do
    test "a file that is not a script, and a missing script, are {:error, message}" do
      dir = tmp_dir("shapes_files")
      notes = write!(dir, "notes.rb", "puts 1\n")

      assert {:error, message} = Script.load(notes)
      assert message == "#{notes} is not a script tool: expected a .py or .ps1 file"

      missing = Path.join(dir, "gone.py")
      assert {:error, "cannot read the script " <> rest} = Script.load(missing)
      assert rest =~ "gone.py: No such file or directory"
    end

    test "a script that does not parse is {:error, message} naming the problem" do
      dir = tmp_dir("shapes_syntax")
      path = write!(dir, "broken.py", "def f(:\n    pass\n")
      assert {:error, message} = Script.load(path)
      assert is_binary(message)
      assert message =~ "SyntaxError" or message =~ "syntax"
    end

    test "a failed call is {:error, %{kind, message, log}} with binaries" do
      dir = tmp_dir("shapes_call")

      path =
        write!(dir, "fails.py", """
        def boom(x: int) -> int:
            \"\"\"Fails.\"\"\"
            print("about to fail")
            raise ValueError("x must be positive")
        """)

      {_group, tools} = load!(path)
      module = tools["boom"]

      assert {:error, %{kind: "exception", message: message, log: log}} =
               Script.call(module, %{"x" => 1})

      assert message =~ "ValueError: x must be positive"
      assert log =~ "about to fail"

      File.rm!(path)
      assert {:error, %{kind: "missing", message: message, log: ""}} = Script.call(module, %{})
      assert message =~ "cannot read the script"
    end
  end

  describe "schemas" do
    test "a schema that does not compile, and an unknown draft, are {:error, message}" do
      assert {:error, message} = Schema.compile(%{"type" => "strnig"})
      assert message =~ "invalid schema"

      assert {:error, message} = Schema.compile(%{"type" => "object"}, draft: "5")
      assert message =~ ~s(unknown draft "5")
    end

    test "arguments that break the schema are {:error, [failure]} with binaries" do
      schema =
        Schema.compile!(%{
          "type" => "object",
          "properties" => %{"n" => %{"type" => "integer"}},
          "required" => ["n"]
        })

      assert {:error, [%{path: "/n", keyword: "type", message: m, schema_path: sp}]} =
               Schema.validate(schema, %{"n" => "one"})

      assert is_binary(m) and is_binary(sp)

      assert {:error, [%{path: "/n", keyword: "json"}]} =
               Schema.validate(schema, %{"n" => self()})
    end
  end

  describe "discovery" do
    test "a root that does not exist is an entry of report.errors, not a crash" do
      dir = tmp_dir("shapes_discovery")
      missing = Path.join(dir, "nowhere")

      report =
        Discovery.discover(
          paths: [missing],
          sources: [:explicit],
          cwd: dir,
          home: dir,
          cmdc_home: Path.join(dir, "cmdc_home")
        )

      assert [%{type: :not_found, source: :explicit, path: ^missing, reason: reason}] =
               report.errors

      assert is_binary(reason)
    end

    test "an unknown source raises ArgumentError listing the sources" do
      assert_raise ArgumentError, ~r/unknown discovery sources \[:nope\]/, fn ->
        Discovery.discover(sources: [:nope])
      end
    end

    test "options of the wrong shape reach the NIF as {:error, message}, never badarg" do
      assert {:error, message} = CMDC.Tool.Native.discovery_scan(%{cwd: 1}, nil)
      assert message =~ "discovery_scan: expected a map with cwd, home (strings)"
      assert message =~ "got: \#{cwd => 1}"
    end
  end

  describe "permissions" do
    test "an unknown spelling is the strictest setting, with a warning naming tool and setting" do
      log =
        capture_log(fn ->
          assert Permissions.normalize(%{"executionPolicy" => "sometimes"}, "rm") ==
                   %{policy: :ask_always}
        end)

      assert log =~ "settings of rm"
      assert log =~ ~s(executionPolicy = "sometimes")
    end
  end

  describe "tool names" do
    defmodule BadName do
      @behaviour CMDC.Tool
      def name, do: "read file"
      def description, do: "Reads a file."
      def parameters, do: %{"type" => "object"}
      def execute(_args, _context), do: {:ok, ""}
    end

    defmodule NoDescription do
      @behaviour CMDC.Tool
      def name, do: "quiet"
      def description, do: "  "
      def parameters, do: %{"type" => "object"}
      def execute(_args, _context), do: {:ok, ""}
    end

    test "the registry refuses a bad name or an empty description as {:invalid_tool, module, message}" do
      reg = Registry.new()

      assert {:error, {:invalid_tool, BadName, message}} = Registry.register(reg, BadName)
      assert message =~ ~s(name "read file" contains ' ' at position 4)
      assert message =~ "^[A-Za-z0-9_.-]{1,128}$"

      assert {:error, {:invalid_tool, NoDescription, message}} =
               Registry.register(reg, NoDescription)

      assert message =~ "the description is empty"
    end

    test "a name no tool was given is :error" do
      assert RoundTrip.original_name(["fs.read"], "fs_read") == {:ok, "fs.read"}
      assert RoundTrip.original_name(["fs.read"], "other") == :error
    end

    test "the name NIFs answer {:ok, _} or {:error, message}" do
      assert {:ok, "fs.read"} = CMDC.Tool.Native.tool_name_check("fs.read")
      assert {:error, "the name is empty; " <> _} = CMDC.Tool.Native.tool_name_check("")
      assert {:ok, "fs_read"} = CMDC.Tool.Native.tool_name_for("fs.read", :openai)
      assert {:error, message} = CMDC.Tool.Native.tool_name_for("fs.read", :nope)
      assert message =~ "unknown format nope; expected one of :openai"
    end
  end

  describe "exec" do
    test "a missing working folder and writes to a closed stdin are {:error, message}" do
      assert {:error, message} = Exec.run("true", [], cwd: "/nonexistent/#{System.pid()}")
      assert is_binary(message)

      {:ok, exec} = Exec.start("cat", [], stdin: :pipe)
      # over the normal scheduler's budget: the dirty twin copies it
      big = :binary.copy("x", 200_000)
      assert :ok = Exec.write(exec, big)
      assert :ok = Exec.close_stdin(exec)
      assert {:error, "stdin is closed" <> _} = Exec.write(exec, "more")
      assert {:ok, result} = Exec.await(exec)
      assert result.stdout == big
    end
  end

  describe "MCP stdio" do
    test "a descriptor that cannot be the protocol channel is {:error, message}, nothing changed" do
      System.put_env("CMDC_MCP_FD", "2")
      assert {:error, message} = CMDC.Tool.MCP.Stdio.open()
      assert message =~ "descriptor 2 cannot be the protocol channel"
      assert System.get_env("CMDC_MCP_FD") == nil
    end
  end

  describe "hooks and pending actions" do
    test "a bad hook or action is {:error, message}; settings problems are entries, never a crash" do
      assert {:error, "the hook's after_call must be a function of arity 3"} =
               CMDC.Tool.Hooks.new([[after_call: fn _ -> :ok end]])

      assert {:error, "not a hook: 42"} = CMDC.Tool.Hooks.attach(:global, [42])

      assert {:error, "a pending action needs :apply" <> _} =
               CMDC.Context.push_pending_action(%CMDC.Context{session_id: "e"}, label: "x")

      dir = Path.join(System.tmp_dir!(), "shapes_hooks_#{System.unique_integer([:positive])}")
      File.mkdir_p!(Path.join(dir, ".claude"))
      File.write!(Path.join(dir, ".claude/settings.json"), "[1,")
      config = CMDC.Tool.Hooks.load(cwd: dir, home: dir)
      File.rm_rf!(dir)
      assert [%{path: path, hook: nil, reason: "not valid JSON: " <> _}] = config.errors
      assert path =~ ".claude/settings.json"
    end
  end
end
