defmodule CMDC.Tool.CLI.ProjectAppTest do
  # The library as a new user meets it: a freshly generated mix app depending on this checkout
  # by path, a tool module in its lib/ (declared in config), Python tools in .cmdc/tools/; the
  # CLI and the MCP server (bin/cmdc-mcp, started from the documented .mcp.json entry by the
  # official MCP Python client) run from that app and serve only the app's tools.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, ProjectApp}

  @moduletag timeout: 900_000

  setup_all do
    dir = Path.join(System.tmp_dir!(), "cmdc_project_app_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf(dir) end)
    {:ok, app: ProjectApp.generate!(dir)}
  end

  defp mix(app, args), do: ProjectApp.mix(app, args)

  test "the CLI serves the app's tools, the project folder once trusted, never the examples", %{
    app: app
  } do
    # Before trust: the app's configured tool; the project folder is skipped, saying how.
    mix(app, ["cmdc.tools", "untrust"])
    {out, 0} = mix(app, ["cmdc.tools", "list"])
    assert out =~ ~r/get_weather\s+elixir\s+config\s+Current weather/
    refute out =~ "countdown"
    refute out =~ "echo"
    assert out =~ "untrusted folders (skipped)"
    assert out =~ "run `mix cmdc.tools trust` in the project"
    # Every tool module of the app is served: nothing more to say.
    refute out =~ "not served"
    {out, 3} = mix(app, ["cmdc.tools", "call", "read_file", "{}"])
    assert out =~ "not loaded, the project not being trusted: .cmdc/tools"

    {out, 0} = mix(app, ["cmdc.tools", "trust"])
    assert out =~ "trusted #{app}"
    {out, 0} = mix(app, ["cmdc.tools", "trusted"])
    assert out =~ app

    {out, 0} = mix(app, ["cmdc.tools", "list"])
    assert out =~ ~r/read_file\s+python\s+cmdc: .cmdc\/tools\/notes.py/
    assert out =~ ~r/delete_note\s+python/
    refute out =~ "refused"

    {out, 0} = mix(app, ["cmdc.tools", "call", "get_weather", ~s({"city": "Oslo"})])
    assert out =~ "Oslo: 21 degrees celsius"
    {out, 0} = mix(app, ["cmdc.tools", "call", "read_file", ~s({"path": "NOTES.txt"})])
    assert out =~ "notes: buy milk"

    # Unknown tool: status 3, stderr, did you mean; a misspelled command: did you mean.
    {out, 3} = mix(app, ["cmdc.tools", "call", "get_wether", "{}"])
    assert out =~ "Unknown tool: get_wether. Did you mean: get_weather?"
    {out, 2} = mix(app, ["cmdc.tools", "lst"])
    assert out =~ "Did you mean: list?"
    {out, 0} = mix(app, ["cmdc.tools", "call", "--help"])
    assert out =~ "Usage: mix cmdc.tools call NAME JSON"

    # A broken tool file: list and doctor exit 4, call says why the tool is missing.
    broken = Path.join(app, ".cmdc/tools/broken.ex")
    File.write!(broken, "defmodule Broken do\n  def oops(, do: 1\nend\n")
    on_exit(fn -> File.rm(broken) end)
    {out, 4} = mix(app, ["cmdc.tools", "list"])
    assert out =~ ".cmdc/tools/broken.ex"
    {_out, 4} = mix(app, ["cmdc.tools", "doctor"])
    {out, 3} = mix(app, ["cmdc.tools", "call", "broken", "{}"])
    assert out =~ ".cmdc/tools/broken.ex failed to load, so broken is not available"

    # The MCP server says so on stderr (the client's log) when it starts; stdin at end of
    # input, so it exits at once.
    server = Path.join(ProjectApp.root(), "bin/cmdc-mcp")

    {err, 0} =
      System.cmd("sh", ["-c", "#{server} --cwd #{app} </dev/null 2>&1 >/dev/null"],
        env: ProjectApp.env(Path.dirname(app))
      )

    assert err =~ "cmdc-mcp: 1 tool file(s) failed to load; serving the other 3 tools:"
    refute err =~ "not served"
    assert err =~ ~r/- \.cmdc\/tools\/broken\.ex: .+/

    # With --watch, a rescan that changes what failed says so too.
    port = watch(server, app)
    await_line(port, "1 tool file(s) failed to load")
    File.rm!(broken)
    await_line(port, "cmdc-mcp: every tool file loads now (3 tools)")
    Port.close(port)

    # A tool module of the app's own lib/ given as a path: the app's build of that very file,
    # not a module that "already exists".
    clock = Path.join(app, "lib/my_agent/tools/clock.ex")
    on_exit(fn -> File.rm(clock) end)

    File.write!(clock, """
    defmodule MyAgent.Tools.Clock do
      @behaviour CMDC.Tool
      def name, do: "clock"
      def description, do: "The time."
      def parameters, do: %{"type" => "object", "properties" => %{}}
      def execute(_args, _ctx), do: {:ok, "noon"}
    end
    """)

    {out, 0} = mix(app, ["cmdc.tools", "list", "lib/my_agent/tools/clock.ex"])
    assert out =~ ~r/clock\s+elixir\s+explicit: lib\/my_agent\/tools\/clock.ex/
    refute out =~ "already exists"
    refute out =~ "not served"
    File.rm!(clock)

    {out, 0} = mix(app, ["cmdc.tools", "untrust"])
    assert out =~ "no longer trusted"
  end

  test "the app's tool modules nothing serves are named, with the config line that serves them",
       %{app: app} do
    file = Path.join(app, "lib/my_agent/tools/unserved.ex")
    on_exit(fn -> File.rm(file) end)

    # Three tool modules the config does not name; one's name/0 raises, one's never returns.
    File.write!(file, """
    for {module, name} <- [
          {MyAgent.Tools.Forecast, quote(do: "forecast")},
          {MyAgent.Tools.Raises, quote(do: raise("no name today"))},
          {MyAgent.Tools.Stuck, quote(do: Process.sleep(:infinity))}
        ] do
      defmodule module do
        @behaviour CMDC.Tool
        def name, do: unquote(name)
        def description, do: "Not served."
        def parameters, do: %{"type" => "object", "properties" => %{}}
        def execute(_args, _ctx), do: {:ok, "done"}
      end
    end
    """)

    modules = "MyAgent.Tools.Forecast, MyAgent.Tools.Raises, MyAgent.Tools.Stuck"
    config = "config :cmdc_tool, tools: [MyAgent.Tools.Weather, #{modules}]"
    hint = "#{modules} implement CMDC.Tool but are not served: add them to config/config.exs: "

    {out, 0} = mix(app, ["cmdc.tools", "list"])
    assert out =~ ~r/get_weather\s+elixir\s+config/
    assert out =~ hint <> config
    # The declared one is not reported.
    refute out =~ "MyAgent.Tools.Weather implements"

    {out, 0} = mix(app, ["cmdc.tools", "doctor"])
    assert out =~ "  - " <> hint <> config

    {out, 3} = mix(app, ["cmdc.tools", "call", "forecast", ~s({"city": "Oslo"})])

    assert out =~
             "Unknown tool: forecast. MyAgent.Tools.Forecast defines it but is not served: " <>
               "add it to config/config.exs: " <>
               "config :cmdc_tool, tools: [MyAgent.Tools.Weather, MyAgent.Tools.Forecast]"

    # No module defines it: the usual message; the raising and the stuck name/0 cost at most
    # the bound and print nothing.
    {out, 3} = mix(app, ["cmdc.tools", "call", "get_wether", "{}"])
    assert out =~ "Unknown tool: get_wether. Did you mean: get_weather?"
    refute out =~ "defines it"
    refute out =~ "no name today"

    # The MCP server logs it on stderr at start; stdout (the protocol stream) stays empty.
    server = Path.join(ProjectApp.root(), "bin/cmdc-mcp")
    out_file = Path.join(Path.dirname(app), "unserved.stdout")

    {err, 0} =
      System.cmd("sh", ["-c", "#{server} --cwd #{app} </dev/null 2>&1 >#{out_file}"],
        env: ProjectApp.env(Path.dirname(app))
      )

    assert err =~ "cmdc-mcp: " <> hint <> config
    assert File.read!(out_file) == ""

    # The same inside Mix (`mix cmdc.mcp`).
    {err, 0} =
      System.cmd("sh", ["-c", "mix cmdc.mcp </dev/null 2>&1 >#{out_file}"],
        cd: app,
        env: ProjectApp.env(Path.dirname(app))
      )

    assert err =~ "cmdc-mcp: " <> hint <> config
    assert File.read!(out_file) == ""
  end

  test "the documented .mcp.json entry, started by the official MCP Python client", %{app: app} do
    {out, 0} = mix(app, ["cmdc.tools", "trust"])
    assert out =~ "trusted"

    # The entry README.md and `mix help cmdc.mcp` document, for a path dependency, in Claude
    # Desktop's file (outside the project: a project's .mcp.json naming its own server would
    # have the server start itself as one of the project's MCP servers).
    server = Path.join(ProjectApp.root(), "bin/cmdc-mcp")
    entry = %{"command" => server, "args" => ["--cwd", app]}
    config = Path.join(Path.dirname(app), "claude_desktop_config.json")
    File.write!(config, JSON.encode!(%{"mcpServers" => %{"my_agent" => entry}}))

    calls = [
      ["get_weather", %{"city" => "Lisbon", "unit" => "fahrenheit"}],
      ["read_file", %{"path" => "NOTES.txt"}],
      ["delete_note", %{"name" => "milk"}],
      ["echo", %{"text" => "hi"}]
    ]

    report = client(app, config, calls)
    assert report["tools"] == ["delete_note", "get_weather", "read_file"]

    [weather, read, delete, echo] = report["calls"]
    assert weather == %{"is_error" => false, "text" => "Lisbon: 21 degrees fahrenheit"}
    assert read == %{"is_error" => false, "text" => "notes: buy milk"}
    # Headless refusal: says exactly how to allow the tool.
    assert delete["is_error"]
    assert delete["text"] =~ "no one can approve here"
    assert delete["text"] =~ "--allow delete_note"
    assert delete["text"] =~ ~s(delete_note.executionPolicy = "auto")
    assert delete["text"] =~ ".cmdc/tools/notes.py"
    # The library's examples are not served.
    assert echo["is_error"]
    assert echo["text"] =~ "Unknown tool: echo"

    # Nothing changed: the next start compiles nothing (the build stamp stays as it was).
    stamp = Path.join(app, "_build/dev/.cmdc-mcp-built")
    built = File.stat!(stamp).mtime
    File.write!(config, JSON.encode!(%{"mcpServers" => %{"my_agent" => allow(entry)}}))
    report = client(app, config, [["delete_note", %{"name" => "milk"}]])
    assert File.stat!(stamp).mtime == built
    assert [%{"is_error" => false, "text" => "deleted milk"}] = report["calls"]

    IO.puts(
      "\ngenerated app: first tools/list #{report["first_list_ms"]} ms (bin/cmdc-mcp --cwd)"
    )
  end

  test "mix cmdc.gen.tool writes working tools and tests the app's `mix test` passes", %{
    app: app
  } do
    on_exit(fn ->
      for path <- ~w(.cmdc/tools/shout.py .cmdc/tools/shout.tool.json test/cmdc_tools
                     lib/my_agent/tools/repeat_words.ex test/my_agent/tools),
          do: File.rm_rf(Path.join(app, path))
    end)

    {out, 0} = mix(app, ["cmdc.gen.tool", "repeat_words"])
    assert out =~ "lib/my_agent/tools/repeat_words.ex"
    assert out =~ "config :cmdc_tool, tools: [MyAgent.Tools.RepeatWords]"
    {out, 0} = mix(app, ["cmdc.gen.tool", "shout", "--python"])
    assert out =~ ".cmdc/tools/shout.py"
    {out, 2} = mix(app, ["cmdc.gen.tool", "shout", "--python"])
    assert out =~ "exists; pass --force"

    {out, 0} =
      mix(app, ["cmdc.tools", "call", "shout", ~s({"text": "hi", "times": 2}), "--trust", "--yes"])

    assert out =~ "hi hi"

    {out, status} = ProjectApp.mix(app, ["test"], env: [{"MIX_ENV", "test"}])
    assert status == 0, out
    assert out =~ "6 tests, 0 failures"
  end

  # The server with stderr and the protocol on one pipe (its lines are all we read here).
  defp watch(server, app) do
    env =
      for {k, v} <- ProjectApp.env(Path.dirname(app)),
          do: {~c"#{k}", if(v, do: ~c"#{v}", else: false)}

    opts = [:binary, :stderr_to_stdout, {:line, 100_000}, {:env, env}]
    Port.open({:spawn_executable, server}, opts ++ [args: ["--cwd", app, "--watch", "100"]])
  end

  defp await_line(port, text) do
    receive do
      {^port, {:data, {_, line}}} -> if line =~ text, do: :ok, else: await_line(port, text)
    after
      120_000 -> flunk("the server never printed #{inspect(text)}")
    end
  end

  defp allow(entry), do: %{entry | "args" => entry["args"] ++ ["--allow", "delete_note"]}

  defp client(app, config, calls) do
    {:ok, python} = CMDC.Tool.PythonEnv.python()
    script = Path.join(ProjectApp.root(), "test/support/mcp_project_client.py")

    {out, status} =
      System.cmd(python, [script, config, "my_agent", JSON.encode!(calls)],
        env: ProjectApp.env(Path.dirname(app)),
        stderr_to_stdout: true
      )

    assert status == 0, out
    out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
  end
end
