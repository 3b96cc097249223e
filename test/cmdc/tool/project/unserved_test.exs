defmodule CMDC.Tool.Project.UnservedTest do
  # A project laid out as Mix builds one (its own app, an umbrella app, a dependency, cmdc_tool)
  # with real .beam files on the code path: which modules count as the project's tools, that
  # finding them loads nothing, and that `name/0` runs bounded.
  use ExUnit.Case, async: false

  alias CMDC.Tool.Project.Unserved

  doctest Unserved
  doctest CMDC.Tool.Project

  @moduletag :tmp_dir

  # Doctests get no tmp_dir.
  setup context do
    dir = context[:tmp_dir] || "/nonexistent"

    on_exit(fn ->
      for path <- :code.get_path(), String.starts_with?(to_string(path), dir) do
        :code.del_path(path)
      end
    end)

    :ok
  end

  test "finds the tool modules of the project's own and umbrella apps, loading none", %{
    tmp_dir: dir
  } do
    beam!(dir, "my_app", "lib/my_app/weather.ex", "UnsT.Weather", tool("weather"))
    beam!(dir, "my_app", "lib/my_app/plain.ex", "UnsT.Plain", "def hello, do: :world")
    beam!(dir, "my_app", "lib/my_app/served.ex", "UnsT.Served", tool("served"))
    beam!(dir, "other", "apps/other/lib/clock.ex", "UnsT.Clock", tool("clock"))
    beam!(dir, "a_dep", "deps/a_dep/lib/dep_tool.ex", "UnsT.DepTool", tool("dep"))
    beam!(dir, "cmdc_tool", "lib/cmdc/example.ex", "UnsT.Example", tool("example"))

    assert Unserved.find([UnsT.Served], dir) == [UnsT.Clock, UnsT.Weather]

    assert Enum.map(Unserved.ebins(dir), &Path.basename(Path.dirname(&1))) |> Enum.sort() ==
             ["my_app", "other"]

    # Read from the files, never loaded.
    for m <- [UnsT.Weather, UnsT.Clock, UnsT.Served], do: refute(:code.is_loaded(m))

    # Nothing outside the project counts.
    assert Unserved.find([], Path.join(dir, "elsewhere")) == []
  end

  test "name/0 answers bounded: a raising, a stuck and a greedy one count as no answer", %{
    tmp_dir: dir
  } do
    beam!(dir, "my_app", "lib/raises.ex", "UnsT.Raises", tool(quote(do: raise("no"))))
    beam!(dir, "my_app", "lib/stuck.ex", "UnsT.Stuck", tool(quote(do: Process.sleep(:infinity))))

    beam!(
      dir,
      "my_app",
      "lib/greedy.ex",
      "UnsT.Greedy",
      tool(quote(do: Enum.to_list(1..100_000_000)))
    )

    beam!(dir, "my_app", "lib/forecast.ex", "UnsT.Forecast", tool("forecast"))

    File.cd!(dir, fn ->
      modules = Unserved.find([], dir)
      assert modules == [UnsT.Forecast, UnsT.Greedy, UnsT.Raises, UnsT.Stuck]

      started = System.monotonic_time(:millisecond)
      assert Unserved.defining(modules, "forecast", 300) == UnsT.Forecast
      assert Unserved.defining(modules, "nothing", 300) == nil
      # Both calls return, bounded, though UnsT.Stuck's name/0 never does (the 300 ms bound
      # itself is what `defining/3` is given; a busy machine adds its own delays).
      assert System.monotonic_time(:millisecond) - started < 60_000

      hint = Unserved.call_hint(modules, "forecast", [Existing], "config/config.exs")

      assert hint ==
               "UnsT.Forecast defines it but is not served: add it to config/config.exs: " <>
                 "config :cmdc_tool, tools: [Existing, UnsT.Forecast]"
    end)
  end

  test "a module of the same name elsewhere on the code path is not run", %{tmp_dir: dir} do
    beam!(dir, "my_app", "lib/twin.ex", "UnsT.Twin", tool("twin"))
    # A beam of the same module earlier on the code path, outside the project's build.
    other = Path.join(dir, "other_ebin")
    File.mkdir_p!(other)

    File.cp!(
      Path.join(dir, "_build/dev/lib/my_app/ebin/Elixir.UnsT.Twin.beam"),
      Path.join(other, "Elixir.UnsT.Twin.beam")
    )

    :code.add_patha(~c"#{other}")

    File.cd!(dir, fn ->
      assert Unserved.find([], dir) == [UnsT.Twin]
      assert Unserved.defining([UnsT.Twin], "twin", 300) == nil
      refute :code.is_loaded(UnsT.Twin)
    end)
  end

  test "a project reached through a symlink is the same project", %{tmp_dir: dir} do
    real = Path.join(dir, "real")
    link = Path.join(dir, "link")
    File.mkdir_p!(real)
    File.ln_s!(real, link)
    # Built through the link (as `bin/cmdc-mcp` puts a logical path on the code path), asked
    # for by the real path (what `File.cwd!/0` answers), and the other way round.
    beam!(link, "my_app", "lib/sym.ex", "UnsT.Sym", tool("sym"))

    assert Unserved.find([], real) == [UnsT.Sym]
    assert Unserved.find([], link) == [UnsT.Sym]
  end

  test "config_file/1: the file setting config :cmdc_tool, else runtime.exs (started if missing)",
       %{tmp_dir: dir} do
    assert Unserved.config_file(dir) ==
             "config/runtime.exs (a new file; its first line: import Config)"

    File.mkdir_p!(Path.join(dir, "config"))
    File.write!(Path.join(dir, "config/config.exs"), "import Config\n")
    assert Unserved.config_file(dir) =~ "config/runtime.exs (a new file"

    File.write!(
      Path.join(dir, "config/config.exs"),
      "import Config\nconfig :cmdc_tool, tools: []\n"
    )

    assert Unserved.config_file(dir) == "config/config.exs"

    assert CMDC.Tool.Project.compile_time_config(dir) ==
             "config/config.exs sets `config :cmdc_tool, tools: ...`: Mix recompiles all of " <>
               "cmdc_tool after each edit of it; move it to config/runtime.exs (read when the " <>
               "VM starts: an edit there recompiles nothing)"

    File.write!(
      Path.join(dir, "config/runtime.exs"),
      "import Config\nconfig :cmdc_tool, tools: []\n"
    )

    File.write!(Path.join(dir, "config/config.exs"), "import Config\n")
    assert Unserved.config_file(dir) == "config/runtime.exs"
    assert CMDC.Tool.Project.compile_time_config(dir) == nil
  end

  defp tool(name) do
    """
    @behaviour CMDC.Tool
    def name, do: #{if is_binary(name), do: inspect(name), else: Macro.to_string(name)}
    def description, do: "A tool."
    def parameters, do: %{"type" => "object", "properties" => %{}}
    def execute(_args, _ctx), do: {:ok, "done"}
    """
  end

  # Compiles `body` as `module` from `source` (relative to the project) into the app's ebin,
  # as Mix would, then unloads it: only the file remains.
  defp beam!(dir, app, source, module, body) do
    ebin = Path.join(dir, "_build/dev/lib/#{app}/ebin")
    File.mkdir_p!(ebin)
    file = Path.join(dir, source)

    [{mod, binary}] = Code.compile_string("defmodule #{module} do\n#{body}\nend\n", file)

    File.write!(Path.join(ebin, "#{mod}.beam"), binary)
    :code.purge(mod)
    :code.delete(mod)
    :code.purge(mod)
    :code.add_pathz(~c"#{ebin}")
  end
end
