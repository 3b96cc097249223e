defmodule CMDC.Tool.DiscoveryTest do
  # Loading modules and compiling in a separate VM are global effects: run alone.
  use ExUnit.Case, async: false
  doctest CMDC.Tool.Discovery

  alias CMDC.Tool.Discovery

  # A test-only stand-in for `%CMDC.Tool.Registry{}` (issue 3, built elsewhere): the same calls
  # (`list/1`, `register/3`, `replace/2`, `put_settings/3`, `settings/2`), atomic, refusing
  # reserved names and duplicates with `{:error, {:conflict, name, module}}`.
  defmodule Registry do
    defstruct [:pid]

    def new(opts \\ []) do
      state = %{modules: [], settings: %{}, reserved: Keyword.get(opts, :reserved, [])}
      {:ok, pid} = Agent.start_link(fn -> state end)
      %__MODULE__{pid: pid}
    end

    def list(%__MODULE__{pid: pid}), do: Agent.get(pid, & &1.modules)
    def names(reg), do: reg |> list() |> Enum.map(& &1.name()) |> Enum.sort()
    def settings(%__MODULE__{pid: pid}, name), do: Agent.get(pid, &Map.get(&1.settings, name))

    def register(%__MODULE__{pid: pid}, modules, _opts \\ []) do
      Agent.get_and_update(pid, fn state ->
        case check(state.modules ++ List.wrap(modules), state.reserved) do
          :ok -> {:ok, %{state | modules: state.modules ++ List.wrap(modules)}}
          error -> {error, state}
        end
      end)
    end

    def replace(%__MODULE__{pid: pid}, modules) do
      Agent.get_and_update(pid, fn state ->
        case check(modules, state.reserved) do
          :ok -> {:ok, %{state | modules: modules}}
          error -> {error, state}
        end
      end)
    end

    def put_settings(%__MODULE__{pid: pid}, name, map) do
      Agent.update(pid, &put_in(&1, [:settings, name], map))
    end

    defp check(modules, reserved) do
      Enum.reduce_while(modules, MapSet.new(reserved), fn module, seen ->
        name = module.name()

        if MapSet.member?(seen, name),
          do: {:halt, {:error, {:conflict, name, module}}},
          else: {:cont, MapSet.put(seen, name)}
      end)
      |> case do
        {:error, _} = error -> error
        _ -> :ok
      end
    end
  end

  setup do
    root =
      Path.join(System.tmp_dir!(), "cmdc_discovery_test_#{System.unique_integer([:positive])}")

    File.mkdir_p!(Path.join(root, "proj"))
    File.mkdir_p!(Path.join(root, "home"))
    on_exit(fn -> File.rm_rf!(root) end)
    # A module prefix unique to the test: modules are global to the VM. The random part keeps
    # sources unique across runs too (the compile cache is keyed by the source's hash).
    prefix = "DiscT#{System.unique_integer([:positive])}R#{:rand.uniform(1_000_000_000)}"
    home = Path.join(root, "home")
    cwd = Path.join(root, "proj")
    opts = [home: home, cwd: cwd, cmdc_home: nil, trust_project: true]
    %{root: root, home: home, cwd: cwd, prefix: prefix, opts: opts}
  end

  defp write(root, rel, text) do
    path = Path.join(root, rel)
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, text)
    path
  end

  defp tool(module, name, extra \\ "") do
    """
    defmodule #{module} do
      @behaviour CMDC.Tool
      def name, do: #{inspect(name)}
      def description, do: #{inspect(name <> " tool")}
      def parameters, do: %{"type" => "object", "properties" => %{"x" => %{"type" => "string"}}}
      def execute(_args, _ctx), do: {:ok, #{inspect(name)}}
      #{extra}
    end
    """
  end

  defp names(report), do: Enum.map(report.tools, & &1.name)
  defp by_name(report, name), do: Enum.find(report.tools, &(&1.name == name))
  defp types(entries), do: Enum.map(entries, & &1.type)

  test "every source, in precedence order, with its provider and path", c do
    p = c.prefix
    write(c.root, "extra/a.ex", tool("#{p}.A", "#{p}_explicit"))
    write(c.cwd, ".cmdc/tools/b.ex", tool("#{p}.B", "#{p}_project_cmdc"))
    write(c.cwd, ".claude/tools/c.exs", tool("#{p}.C", "#{p}_project_claude"))
    write(c.cwd, ".codex/tools/d.ex", tool("#{p}.D", "#{p}_project_codex"))
    write(c.root, "cmdc_home/tools/e.ex", tool("#{p}.E", "#{p}_cmdc_home"))
    write(c.home, ".cmdc/tools/f.ex", tool("#{p}.F", "#{p}_user_cmdc"))
    write(c.home, ".claude/tools/nested/g.ex", tool("#{p}.G", "#{p}_user_claude"))
    write(c.home, ".codex/tools/h.ex", tool("#{p}.H", "#{p}_user_codex"))

    write(c.home, ".cmdc/plugins/pk/cmdc-plugin.json", ~s({"name": "pk", "version": "0.2.0",
      "tools": ["lib/tools"]}))

    write(c.home, ".cmdc/plugins/pk/lib/tools/i.ex", tool("#{p}.I", "#{p}_plugin"))
    # Plugin folders without a manifest, or with a broken one, or a disabled one.
    write(c.home, ".cmdc/plugins/no_manifest/tools/j.ex", tool("#{p}.J", "#{p}_j"))
    write(c.home, ".cmdc/plugins/off/cmdc-plugin.json", ~s({"name": "off", "disabled": true}))
    write(c.home, ".cmdc/plugins/off/tools/k.ex", tool("#{p}.K", "#{p}_k"))

    opts = Keyword.merge(c.opts, paths: ["../extra"], cmdc_home: Path.join(c.root, "cmdc_home"))
    report = Discovery.discover(opts)
    assert report.errors == []
    assert types(report.ignored) == [:no_manifest, :plugin_disabled]

    assert names(report) ==
             Enum.map(
               ~w(explicit project_cmdc project_claude project_codex cmdc_home user_cmdc
                  user_claude user_codex plugin),
               &"#{p}_#{&1}"
             )

    sources = Enum.map(report.tools, &{&1.source, &1.provider})

    assert sources == [
             {:explicit, "explicit"},
             {:project, "cmdc"},
             {:project, "claude"},
             {:project, "codex"},
             {:user, "cmdc"},
             {:user, "cmdc"},
             {:user, "claude"},
             {:user, "codex"},
             {:plugin, "plugin:pk"}
           ]

    a = by_name(report, "#{p}_explicit")
    assert a.path == Path.join(c.root, "extra/a.ex")
    assert a.module == Module.concat([p, "A"])
    assert a.kind == :elixir
    assert a.module.execute(%{}, nil) == {:ok, "#{p}_explicit"}
    assert by_name(report, "#{p}_plugin").plugin == %{name: "pk", version: "0.2.0"}
    # A plugin's name is its tools' namespace (OpenAI Responses `namespaces: true`).
    assert by_name(report, "#{p}_plugin").settings == %{"namespace" => "pk"}
    # Served as it is: the namespace alone makes no wrapper module.
    assert by_name(report, "#{p}_plugin").module == Module.concat([p, "I"])
  end

  test "a broken plugin manifest is an error naming the manifest", c do
    write(c.home, ".cmdc/plugins/bad/cmdc-plugin.json", ~s({"name": 3}))
    write(c.home, ".cmdc/plugins/esc/cmdc-plugin.json", ~s({"name": "esc", "tools": ["/etc"]}))
    report = Discovery.discover(c.opts)
    assert [bad, esc] = report.errors
    assert {bad.type, bad.source, bad.provider} == {:bad_manifest, :plugin, "plugin"}
    assert bad.path == Path.join(c.home, ".cmdc/plugins/bad/cmdc-plugin.json")
    assert bad.reason =~ ~s("name" must be a non-empty string)
    assert esc.provider == "plugin:esc"
    assert esc.reason =~ "leaves the plugin folder"
  end

  test "each source can be switched off", c do
    p = c.prefix
    write(c.root, "extra/a.ex", tool("#{p}.A", "#{p}_a"))
    write(c.cwd, ".cmdc/tools/b.ex", tool("#{p}.B", "#{p}_b"))
    write(c.home, ".cmdc/tools/c.ex", tool("#{p}.C", "#{p}_c"))
    write(c.home, ".cmdc/plugins/x/cmdc-plugin.json", ~s({"name": "x", "version": "1"}))
    write(c.home, ".cmdc/plugins/x/tools/d.ex", tool("#{p}.D", "#{p}_d"))
    opts = Keyword.put(c.opts, :paths, [Path.join(c.root, "extra")])

    assert names(Discovery.discover(opts)) == ["#{p}_a", "#{p}_b", "#{p}_c", "#{p}_d"]
    assert names(Discovery.discover([sources: [:user, :plugins]] ++ opts)) == ["#{p}_c", "#{p}_d"]

    assert names(Discovery.discover([sources: [:explicit, :project]] ++ opts)) == [
             "#{p}_a",
             "#{p}_b"
           ]

    assert_raise ArgumentError, ~r/unknown discovery sources/, fn ->
      Discovery.discover([sources: [:nope]] ++ opts)
    end
  end

  test "precedence: the first tool with a name wins, the others are refused and say who won",
       c do
    p = c.prefix
    name = "#{p}_same"
    write(c.root, "extra/x.ex", tool("#{p}.X", name))
    write(c.cwd, ".cmdc/tools/p.ex", tool("#{p}.P", name))
    write(c.home, ".cmdc/tools/u.ex", tool("#{p}.U", name))
    write(c.home, ".cmdc/plugins/z/cmdc-plugin.json", ~s({"name": "z", "version": "1"}))
    write(c.home, ".cmdc/plugins/z/tools/g.ex", tool("#{p}.G", name))
    # A built-in and a tool of the same name in the user folder: the built-in wins.
    write(c.home, ".cmdc/tools/v.ex", tool("#{p}.V", "echo"))

    opts = Keyword.merge(c.opts, paths: ["~/../extra/x.ex"], reserved: [CMDC.Tool.Examples.Echo])
    report = Discovery.discover(opts)

    assert names(report) == [name]
    assert hd(report.tools).source == :explicit
    assert types(report.errors) == [:conflict, :conflict, :conflict, :conflict]

    [project, user, builtin, plugin] = report.errors
    assert {project.source, user.source, plugin.source} == {:project, :user, :plugin}
    assert project.winner.path == Path.join(c.root, "extra/x.ex")
    assert project.winner.source == :explicit
    assert project.reason =~ "refused"
    assert project.reason =~ ~s("name": "other_name")
    assert builtin.name == "echo"
    assert builtin.winner == :reserved
    assert builtin.reason =~ "built-in"

    # Explicit paths win over the project even when they point into the user folder.
    report = Discovery.discover(Keyword.put(opts, :paths, ["~/.cmdc/tools/u.ex"]))
    assert by_name(report, name).path == Path.join(c.home, ".cmdc/tools/u.ex")
  end

  test "the same file reached twice through symlinks or overlapping paths loads once", c do
    p = c.prefix
    real = write(c.home, ".cmdc/tools/a.ex", tool("#{p}.A", "#{p}_a"))
    File.mkdir_p!(Path.join(c.cwd, ".cmdc/tools"))
    File.ln_s!(real, Path.join(c.cwd, ".cmdc/tools/link.ex"))
    File.mkdir_p!(Path.join(c.cwd, ".codex"))
    File.ln_s!(Path.join(c.home, ".cmdc/tools"), Path.join(c.cwd, ".codex/tools"))

    report = Discovery.discover(Keyword.put(c.opts, :paths, ["~/.cmdc/tools"]))
    assert report.errors == []
    assert [%{name: name, source: :explicit, real_path: ^real}] = report.tools
    assert name == "#{p}_a"

    dups = Enum.filter(report.ignored, &(&1.type == :duplicate))

    assert Enum.map(dups, &{&1.source, &1.provider}) == [
             project: "cmdc",
             project: "codex",
             user: "cmdc"
           ]

    assert Enum.all?(dups, &(&1.reason =~ "loaded once"))
  end

  test "metadata: rename, describe, disable, settings; renaming settles a conflict", c do
    p = c.prefix
    dir = ".cmdc/tools"
    # Two files define the same name; the second is renamed by its metadata.
    write(c.home, "#{dir}/a.ex", tool("#{p}.A", "#{p}_dup"))
    write(c.home, "#{dir}/b.ex", tool("#{p}.B", "#{p}_dup"))
    write(c.home, "#{dir}/b.json", ~s({"name": "#{p}_renamed", "timeout": 30000}))
    write(c.home, "#{dir}/b.md", "---\ntitle: B\n---\nRenamed and re-described.\n")

    # A file with two tools: one disabled, one with settings; file-level settings merge.
    write(c.home, "#{dir}/multi.ex", tool("#{p}.M1", "#{p}_m1") <> tool("#{p}.M2", "#{p}_m2"))

    write(c.home, "#{dir}/multi.json", ~s({"permission": "ask",
      "tools": {"#{p}_m1": {"disabled": true}, "#{p}_m2": {"settings": {"timeout": 5}}}}))

    # Invalid metadata skips its tool file, with the reason.
    write(c.home, "#{dir}/bad.ex", tool("#{p}.Bad", "#{p}_bad"))
    write(c.home, "#{dir}/bad.json", ~s({"disabled": "yes"}))
    # Orphan metadata is never executed nor reported.
    write(c.home, "#{dir}/README.md", "# my tools")

    report = Discovery.discover(c.opts)
    assert names(report) == ["#{p}_dup", "#{p}_renamed", "#{p}_m2"]

    renamed = by_name(report, "#{p}_renamed")
    assert renamed.original_name == "#{p}_dup"
    assert renamed.settings == %{"timeout" => 30000}
    assert renamed.module.name() == "#{p}_renamed"
    assert renamed.module.description() == "Renamed and re-described."
    assert renamed.module.execute(%{}, nil) == {:ok, "#{p}_dup"}
    assert CMDC.Tool.validate(renamed.module, %{"x" => 1}) |> elem(0) == :error
    assert [_, _] = renamed.metadata

    assert by_name(report, "#{p}_m2").settings == %{"permission" => "ask", "timeout" => 5}
    assert by_name(report, "#{p}_dup").module == Module.concat([p, "A"])

    assert [%{type: :disabled, name: disabled}] = report.ignored
    assert disabled == "#{p}_m1"

    assert [%{type: :bad_metadata, path: bad_path, reason: reason}] = report.errors
    assert bad_path == Path.join(c.home, "#{dir}/bad.ex")
    assert reason =~ "disabled"
  end

  test "metadata sets a tool's title and annotations; a bad one is that tool's error", c do
    p = c.prefix
    dir = ".cmdc/tools"
    write(c.home, "#{dir}/shown.ex", tool("#{p}.Shown", "#{p}_shown"))

    write(c.home, "#{dir}/shown.json", ~s({"title": "Shown", "timeout": 5,
      "annotations": {"read_only_hint": true, "openWorldHint": false}}))

    write(c.home, "#{dir}/odd.ex", tool("#{p}.Odd", "#{p}_odd"))
    write(c.home, "#{dir}/odd.json", ~s({"annotations": {"readOnly": true}}))

    report = Discovery.discover(c.opts)
    assert names(report) == ["#{p}_shown"]
    shown = by_name(report, "#{p}_shown")
    assert shown.settings == %{"timeout" => 5}
    assert shown.module.execute(%{}, nil) == {:ok, "#{p}_shown"}

    assert CMDC.Tool.Structured.mcp_fields(shown.module) == %{
             "title" => "Shown",
             "annotations" => %{"readOnlyHint" => true, "openWorldHint" => false}
           }

    assert [%{type: :bad_metadata, name: odd, reason: reason}] = report.errors
    assert odd == "#{p}_odd"
    assert reason =~ ~s(unknown hint "readOnly"; the hints are destructiveHint)
  end

  test "a .md's front matter sets its tool's title and hints; the .json wins; a bad hint names the file",
       c do
    p = c.prefix
    dir = ".cmdc/tools"
    write(c.home, "#{dir}/doc.ex", tool("#{p}.Doc", "#{p}_doc"))

    write(c.home, "#{dir}/doc.md", """
    ---
    title: "Read the docs"
    readOnlyHint: true
    idempotent_hint: true
    layout: ignored
    ---
    Reads the docs.
    """)

    write(c.home, "#{dir}/both.ex", tool("#{p}.Both", "#{p}_both"))
    write(c.home, "#{dir}/both.md", "---\ntitle: From md\nreadOnlyHint: true\n---\nBoth.\n")
    write(c.home, "#{dir}/both.json", ~s({"title": "From json"}))

    write(c.home, "#{dir}/bad.ex", tool("#{p}.BadHint", "#{p}_badhint"))
    write(c.home, "#{dir}/bad.md", "---\nreadOnlyHint: maybe\n---\nBad.\n")

    report = Discovery.discover(c.opts)
    assert names(report) == ["#{p}_both", "#{p}_doc"]
    doc = by_name(report, "#{p}_doc")
    assert doc.settings == %{}
    assert doc.module.description() == "Reads the docs."

    assert CMDC.Tool.Structured.mcp_fields(doc.module) == %{
             "title" => "Read the docs",
             "annotations" => %{"readOnlyHint" => true, "idempotentHint" => true}
           }

    assert CMDC.Tool.Structured.mcp_fields(by_name(report, "#{p}_both").module) == %{
             "title" => "From json",
             "annotations" => %{"readOnlyHint" => true}
           }

    assert [%{type: :bad_metadata, name: bad, reason: reason}] = report.errors
    assert bad == "#{p}_badhint"
    assert reason =~ Path.join(c.home, "#{dir}/bad.md")
    assert reason =~ "readOnlyHint"
  end

  test "a broken file among good ones is reported and skipped; the others load", c do
    p = c.prefix
    dir = Path.join(c.home, ".cmdc/tools")
    write(dir, "good.ex", tool("#{p}.Good", "#{p}_good"))
    write(dir, "compile_error.ex", "defmodule #{p}.CE do\n  def x, do: nope()\nend\n")
    write(dir, "syntax.ex", "defmodule #{p}.Syn do\n  def x(, do: 1\nend\n")
    write(dir, "raises.exs", "raise \"boom at top level\"\n")
    write(dir, "helper_only.ex", "defmodule #{p}.Helper do\n def x, do: 1\nend\n")

    write(dir, "no_execute.ex", """
    defmodule #{p}.NoExec do
      @behaviour CMDC.Tool
      def name, do: "#{p}_noexec"
      def description, do: "x"
      def parameters, do: %{}
    end
    """)

    bad_schema = ~s|def parameters, do: %{"type" => "strnig"}|

    write(
      dir,
      "bad_schema.ex",
      tool("#{p}.BadSchema", "#{p}_bad_schema")
      |> String.replace(~r/def parameters.*\n/, bad_schema <> "\n")
    )

    write(dir, "steals_module.ex", tool("CMDC.Tool.Examples.Echo", "#{p}_steal"))

    write(
      dir,
      "on_load.ex",
      tool("#{p}.OnLoad", "#{p}_on_load", "@on_load :hook\ndef hook, do: :ok")
    )

    write(dir, "loops.ex", "defmodule #{p}.Loop do\n  Process.sleep(:infinity)\nend\n")

    write(
      dir,
      "reads_stdin.exs",
      "IO.gets(\"?\")\nIO.read(:all)\nIO.puts(\"hi\")\n" <> tool("#{p}.Stdin", "#{p}_stdin")
    )

    write(dir, "halts.exs", "System.halt(7)\n")
    write(dir, "zz_after_halt.ex", tool("#{p}.After", "#{p}_after"))
    # Defines the module good.ex already defined (good.ex comes first in path order).
    write(dir, "zzz_same_module.ex", tool("#{p}.Good", "#{p}_other"))

    write(dir, "slow_name.ex", """
    defmodule #{p}.SlowName do
      @behaviour CMDC.Tool
      def name, do: Process.sleep(:infinity)
      def description, do: "x"
      def parameters, do: %{}
      def execute(_, _), do: {:ok, ""}
    end
    """)

    write(dir, "empty.exs", "1 + 1\n")

    opts = Keyword.merge(c.opts, compile_timeout: 3_000, call_timeout: 1_000)
    report = Discovery.discover(opts)
    assert Enum.sort(names(report)) == Enum.sort(["#{p}_good", "#{p}_stdin", "#{p}_after"])

    errors = Map.new(report.errors, &{Path.basename(&1.path), &1})
    assert errors["compile_error.ex"].type == :compile
    assert errors["compile_error.ex"].reason =~ "undefined function nope/0"
    assert errors["syntax.ex"].type == :compile
    assert errors["raises.exs"].reason =~ "boom at top level"
    assert errors["helper_only.ex"].type == :no_tool
    assert errors["no_execute.ex"].type == :invalid_tool
    assert errors["no_execute.ex"].reason =~ "execute/2"
    assert errors["bad_schema.ex"].type == :schema
    assert errors["steals_module.ex"].type == :module_conflict
    assert errors["on_load.ex"].reason =~ "@on_load"
    assert errors["loops.ex"].reason =~ "timed out after 3000 ms"
    assert errors["halts.exs"].reason =~ "System.halt"
    assert errors["zzz_same_module.ex"].type == :module_conflict
    assert errors["zzz_same_module.ex"].reason =~ "good.ex"
    assert errors["slow_name.ex"].reason =~ "timed out after 1000 ms"
    assert errors["empty.exs"].reason =~ "defines no module"
    assert map_size(errors) == 13
    assert Module.concat([p, "Good"]).name() == "#{p}_good"

    # The module of the built-in is untouched.
    assert CMDC.Tool.Examples.Echo.name() == "echo"
    refute Code.ensure_loaded?(Module.concat([p, "OnLoad"]))
  end

  test "untrusted project folders are skipped with the reason; trust list and options", c do
    p = c.prefix
    write(c.cwd, ".cmdc/tools/a.ex", tool("#{p}.A", "#{p}_a"))
    write(c.cwd, ".claude/tools/b.ex", tool("#{p}.B", "#{p}_b"))
    opts = Keyword.delete(c.opts, :trust_project)

    report = Discovery.discover(opts)
    assert report.tools == []
    assert [%{type: :untrusted} = u1, %{type: :untrusted}] = report.ignored
    assert u1.path == Path.join(c.cwd, ".cmdc/tools")
    assert u1.reason =~ "not trusted"
    assert u1.reason =~ Path.join(c.home, ".cmdc/trusted.json")

    write(c.home, ".cmdc/trusted.json", ~s({"trusted": ["#{c.root}"]}))
    assert names(Discovery.discover(opts)) == ["#{p}_a", "#{p}_b"]
    assert Discovery.discover([trust_project: false] ++ opts).tools == []

    write(c.home, ".cmdc/trusted.json", "not json")
    report = Discovery.discover(opts)
    assert report.tools == []
    assert [%{type: :bad_trust_list}] = report.errors

    assert names(Discovery.discover([trusted: ["."]] ++ opts)) == ["#{p}_a", "#{p}_b"]
  end

  test "~ and relative paths; a missing explicit path is an error", c do
    p = c.prefix
    write(c.home, "mine/a.ex", tool("#{p}.A", "#{p}_a"))
    write(c.cwd, "local/b.ex", tool("#{p}.B", "#{p}_b"))
    write(c.cwd, "local/b.md", "B from the md file.")

    File.cd!(c.root, fn ->
      opts = Keyword.merge(c.opts, cwd: "proj", paths: ["~/mine", "local/b.ex", "nope.ex", "~"])
      report = Discovery.discover(Keyword.put(opts, :sources, [:explicit]))
      assert names(report) == ["#{p}_a", "#{p}_b"]
      assert by_name(report, "#{p}_a").path == Path.join(c.home, "mine/a.ex")
      assert by_name(report, "#{p}_b").module.description() == "B from the md file."
      assert [%{type: :not_found, path: missing}] = report.errors
      assert missing == Path.join(c.cwd, "nope.ex")
      # "~" (the whole home) reaches a.ex again: loaded once.
      assert [%{type: :duplicate}] = report.ignored
    end)
  end

  test "scripts are listed until a loader is given, then handed to it", c do
    p = c.prefix
    write(c.home, ".cmdc/tools/s.py", "def hello():\n    return 1\n")
    write(c.home, ".cmdc/tools/s.tool.json", "{}")
    write(c.home, ".cmdc/tools/t.ps1", "function Get-X {}")

    report = Discovery.discover([script_loader: false] ++ c.opts)
    assert report.tools == []

    assert [%{kind: :script, status: "script, not loaded"} = s, %{type: :script}] = report.ignored

    assert s.path == Path.join(c.home, ".cmdc/tools/s.py")

    Code.compile_string(tool("#{p}.Py", "#{p}_py"))
    parent = self()

    loader = fn
      path ->
        send(parent, {:loaded, path})

        if String.ends_with?(path, ".py"),
          do: {:ok, [Module.concat([p, "Py"])]},
          else: {:error, :nope}
    end

    report = Discovery.discover([script_loader: loader] ++ c.opts)
    assert [%{name: name, kind: :script}] = report.tools
    assert name == "#{p}_py"
    assert [%{type: :load, reason: reason}] = report.errors
    assert reason =~ ":nope"
    assert_received {:loaded, _}
    assert_received {:loaded, _}
  end

  test "Python scripts load by default, with CMDC.Tool.Script", c do
    write(
      c.home,
      ".cmdc/tools/default_loaded.py",
      ~s|def twice(x: int) -> int:\n    """Twice x."""\n    return 2 * x\n|
    )

    report = Discovery.discover(c.opts)
    assert [%{name: "twice", kind: :script, module: module}] = report.tools
    assert {:ok, %{value: 4}} = CMDC.Tool.Script.call(module, %{"x" => 2})
  end

  describe "load_into/2 and refresh/2 (against a test stand-in registry)" do
    test "registers, then picks up edits, additions and removals; unchanged files are not recompiled",
         c do
      p = c.prefix
      dir = Path.join(c.home, ".cmdc/tools")
      counter = Path.join(c.root, "compiles.log")
      # Each compile of a file appends its name to the counter file (from the compiler VM).
      counted = fn file, module, name ->
        write(
          dir,
          file,
          ~s|File.write!(#{inspect(counter)}, "#{file}\\n", [:append])\n| <> tool(module, name)
        )
      end

      compiles = fn -> counter |> File.read!() |> String.split() |> Enum.sort() end
      counted.("a.ex", "#{p}.A", "#{p}_a")
      counted.("b.ex", "#{p}.B", "#{p}_b")
      registry = Registry.new(reserved: ["echo"])
      :ok = Registry.register(registry, [CMDC.Tool.Examples.ReadFile])

      {:ok, state} = Discovery.load_into(registry, c.opts)
      assert Registry.names(registry) == Enum.sort(["read_file", "#{p}_a", "#{p}_b"])
      assert state.changes.added == ["#{p}_a", "#{p}_b"]
      assert compiles.() == ~w(a.ex b.ex)

      # Nothing changed: nothing recompiled, registry unchanged.
      {:ok, state} = Discovery.refresh(registry, state)
      assert compiles.() == ~w(a.ex b.ex)
      assert state.changes == %{added: [], removed: [], changed: [], recompiled: []}

      # Edit a, add c, delete b.
      counted.("a.ex", "#{p}.A", "#{p}_a2")
      counted.("c.ex", "#{p}.C", "#{p}_c")
      File.rm!(Path.join(dir, "b.ex"))
      {:ok, state} = Discovery.refresh(registry, state)
      assert compiles.() == ~w(a.ex a.ex b.ex c.ex)
      assert Registry.names(registry) == Enum.sort(["read_file", "#{p}_a2", "#{p}_c"])
      assert state.changes.added == ["#{p}_a2", "#{p}_c"]
      assert state.changes.removed == ["#{p}_a", "#{p}_b"]
      assert Module.concat([p, "A"]).name() == "#{p}_a2"
      # The removed file's module is gone from the VM.
      refute :erlang.module_loaded(Module.concat([p, "B"]))

      # Metadata changes apply without recompiling; settings reach the registry.
      write(dir, "c.json", ~s({"timeout": 100}))
      {:ok, state} = Discovery.refresh(registry, state)
      assert state.changes.recompiled == []
      assert Registry.settings(registry, "#{p}_c") == %{"timeout" => 100}
      File.rm!(Path.join(dir, "c.json"))
      {:ok, state} = Discovery.refresh(registry, state)
      assert Registry.settings(registry, "#{p}_c") == %{}

      # A file that breaks is dropped from the registry and reported; fixing it restores it.
      write(dir, "c.ex", "defmodule #{p}.C do\n  def x(, do: 1\nend\n")
      {:ok, state} = Discovery.refresh(registry, state)
      assert Registry.names(registry) == Enum.sort(["read_file", "#{p}_a2"])
      assert [%{type: :compile}] = state.report.errors
      assert state.changes.removed == ["#{p}_c"]

      counted.("c.ex", "#{p}.C", "#{p}_c")
      {:ok, state} = Discovery.refresh(registry, state)
      assert Registry.names(registry) == Enum.sort(["read_file", "#{p}_a2", "#{p}_c"])
      assert state.report.errors == []
    end

    test "an unchanged script is not handed to the loader again", c do
      p = c.prefix
      script = write(c.home, ".cmdc/tools/s.py", "def hello():\n    return 1\n")
      Code.compile_string(tool("#{p}.Py", "#{p}_py"))
      parent = self()

      loader = fn path ->
        send(parent, {:loaded, path})
        {:ok, [Module.concat([p, "Py"])]}
      end

      registry = Registry.new()
      {:ok, state} = Discovery.load_into(registry, [script_loader: loader] ++ c.opts)
      assert_received {:loaded, ^script}
      assert Registry.names(registry) == ["#{p}_py"]

      write(c.home, ".cmdc/tools/other.txt", "a change elsewhere")
      {:ok, state} = Discovery.refresh(registry, state)
      refute_received {:loaded, _}

      File.write!(script, "def hello():\n    return 2\n")
      {:ok, _state} = Discovery.refresh(registry, state)
      assert_received {:loaded, ^script}
    end

    test "registry names win; a name the registry reserves is refused, the rest load", c do
      p = c.prefix
      write(c.home, ".cmdc/tools/a.ex", tool("#{p}.A", "read_file"))
      write(c.home, ".cmdc/tools/b.ex", tool("#{p}.B", "echo"))
      write(c.home, ".cmdc/tools/c.ex", tool("#{p}.C", "#{p}_c"))
      registry = Registry.new(reserved: ["echo"])
      :ok = Registry.register(registry, [CMDC.Tool.Examples.ReadFile])

      {:ok, state} = Discovery.refresh(registry, c.opts)
      assert Registry.names(registry) == Enum.sort(["read_file", "#{p}_c"])

      assert [%{winner: :registry, name: "read_file"}, %{winner: :registry, name: "echo"}] =
               Enum.sort_by(state.report.errors, & &1.path)

      assert Enum.all?(state.report.errors, &(&1.type == :conflict))
    end
  end
end
