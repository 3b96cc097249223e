defmodule CMDC.Tool.CLI.NewUserTest do
  # A new user's second hour (issue 40), on a freshly generated `mix new` app depending on this
  # checkout: the story of docs/GETTING_STARTED.md run as written, in order (generator, config,
  # CLI, doctor, the generated tests, trust, a Python tool, a settings-file hook guarding the
  # app's own `Runner.run/4`), then a config edit that must recompile nothing of cmdc_tool.
  use ExUnit.Case, async: true

  alias CMDC.Tool.ProjectApp

  @moduletag timeout: 900_000
  @guide Path.expand("../../../../docs/GETTING_STARTED.md", __DIR__)

  setup_all do
    dir = Path.join(System.tmp_dir!(), "cmdc_new_user_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf(dir) end)
    {:ok, app: ProjectApp.bare!(dir)}
  end

  # As a user's shell runs it: no MIX_ENV (`mix test` picks test, the rest dev).
  defp sh(app, command) do
    System.cmd("sh", ["-c", command],
      cd: app,
      env: List.keystore(ProjectApp.env(Path.dirname(app)), "MIX_ENV", 0, {"MIX_ENV", nil}),
      stderr_to_stdout: true
    )
  end

  # The guide's story: its code blocks between the markers, in order.
  defp story do
    [_, rest] = String.split(File.read!(@guide), "<!-- story -->")
    [story, _] = String.split(rest, "<!-- /story -->")

    for [_, lang, body] <- Regex.scan(~r/```(\w+)\n(.*?)```/s, story) do
      case {lang, String.split(body, "\n", parts: 2)} do
        {"sh", _} ->
          for line <- String.split(body, "\n"),
              line = line |> String.replace(~r/\s+#\s.*$/, "") |> String.trim(),
              line != "" and not String.starts_with?(line, "#"),
              do: {:run, line}

        {"elixir", ["# " <> file, text]} ->
          [{:write, file, text}]

        {"json", _} ->
          [{:write, ".claude/settings.json", body}]
      end
    end
    |> List.flatten()
  end

  test "the getting-started story works copied in order; a config edit recompiles nothing", %{
    app: app
  } do
    steps = story()
    commands = for {:run, c} <- steps, do: c

    # The story is the one the README's lines tell.
    assert "mix cmdc.gen.tool repeat" in commands
    assert ~s(mix cmdc.tools call repeat '{"text": "hi", "times": 2}') in commands

    outputs =
      Enum.reduce(steps, %{}, fn
        {:write, file, text}, acc ->
          path = Path.join(app, file)
          File.mkdir_p!(Path.dirname(path))
          File.write!(path, text)
          acc

        {:run, command}, acc ->
          {out, status} = sh(app, command)
          assert status == 0, "`#{command}` exited #{status}:\n#{out}"
          Map.put(acc, command, out)
      end)

    out = fn prefix ->
      Enum.find_value(outputs, fn {c, o} -> if String.starts_with?(c, prefix), do: o end)
    end

    assert out.("mix cmdc.gen.tool repeat") =~
             "config/runtime.exs (create it if needed"

    assert out.("mix cmdc.gen.tool repeat") =~ "config :cmdc_tool, tools: [MyAgent.Tools.Repeat]"
    assert out.("mix cmdc.tools list") =~ ~r/repeat\s+elixir\s+config\s+Repeat a text/
    assert out.("mix cmdc.tools call repeat") =~ "hi hi"
    assert out.("mix cmdc.tools schema --format mcp") =~ ~s("name": "repeat")

    # The generated tools are doctor-clean (a machine's missing pwsh may still be named).
    doctor = out.("mix cmdc.tools doctor")
    refute doctor =~ "repeat:"
    refute doctor =~ "OpenAI strict mode"
    refute doctor =~ "Gemini"
    refute doctor =~ "config/config.exs sets"

    assert out.("mix test") =~ ~r/\d+ tests?, 0 failures/
    assert out.("mix cmdc.tools call shout") =~ "hi hi"

    # The trusted project's hook guards the app's own Runner.run/4 (no option, no attach).
    guarded = out.("mix run -e")
    assert guarded =~ "repeat was denied by"
    assert guarded =~ "no repeating today"

    # A misspelled module in the config: did you mean, a config line without the typo, and
    # counted as a configured tool, not a file.
    runtime = Path.join(app, "config/runtime.exs")
    File.write!(runtime, "import Config\nconfig :cmdc_tool, tools: [MyAgent.Tools.Repaet]\n")
    {typo, 4} = sh(app, "mix cmdc.tools list")

    assert typo =~
             "MyAgent.Tools.Repaet is not a compiled module (did you mean MyAgent.Tools.Repeat?)"

    assert typo =~
             "MyAgent.Tools.Repeat implements CMDC.Tool but is not served: add it to " <>
               "config/runtime.exs: config :cmdc_tool, tools: [MyAgent.Tools.Repeat]"

    assert typo =~ "1 configured tool(s) failed to load"
    refute typo =~ "tool file(s)"

    # A config edit (the documented opt-out of the settings files' hooks, beside tools:)...
    File.write!(
      runtime,
      "import Config\nconfig :cmdc_tool, tools: [MyAgent.Tools.Repeat], settings_hooks: false\n"
    )

    # ...recompiles nothing of cmdc_tool (no more than the typo's edits did), and the app's
    # calls are no longer guarded.
    refute typo =~ ~r/==> cmdc_tool\nCompiling/
    {listed, 0} = sh(app, "mix cmdc.tools list")
    refute listed =~ ~r/==> cmdc_tool\nCompiling/
    assert listed =~ "repeat"

    run = Enum.find(commands, &String.starts_with?(&1, "mix run -e"))
    {unguarded, 0} = sh(app, run)
    assert String.trim(unguarded) =~ ~r/(^|\n)hi$/
    refute unguarded =~ "Compiling"
  end
end
