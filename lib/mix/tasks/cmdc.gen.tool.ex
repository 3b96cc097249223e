defmodule Mix.Tasks.Cmdc.Gen.Tool do
  @shortdoc "Generates a tool (Elixir module or Python script) and its test"
  @moduledoc """
  Writes a working tool and its test into your application.

      mix cmdc.gen.tool NAME [--python] [--force]

  `NAME` is the tool's name in snake_case (`get_weather`), a letter first.

    * Elixir (default): `lib/APP/tools/NAME.ex` defining `App.Tools.Name` (`@behaviour
      CMDC.Tool`) and `test/APP/tools/NAME_test.exs`, which validates arguments and runs the
      tool through `CMDC.Tool.Runner`. Add the module to `config :cmdc_tool, tools: [...]` to
      serve it (the task prints the line).
    * `--python`: `.cmdc/tools/NAME.py`, a function whose type hints and docstring describe the
      tool, and `test/cmdc_tools/NAME_test.exs`, which loads it with `CMDC.Tool.Script` and
      calls it. Project tool folders load once the project is trusted (`mix cmdc.tools trust`).

  Existing files are never overwritten without `--force`. `-h`/`--help` prints this text.

  ## Exit status

  `0` done, `2` usage error (bad name, unknown option, file exists without `--force`).
  """
  use Mix.Task

  @switches [python: :boolean, force: :boolean, help: :boolean]

  @impl true
  def run(argv) do
    case OptionParser.parse(argv, strict: @switches, aliases: [h: :help]) do
      {opts, args, []} ->
        cond do
          opts[:help] -> IO.write(@moduledoc)
          match?([_], args) -> generate(hd(args), opts)
          true -> usage_error("expected one tool NAME")
        end

      {_, _, [{switch, _} | _]} ->
        usage_error("unknown option #{switch}#{hint(switch)}")
    end
  end

  defp hint(switch) do
    known = for {name, _} <- @switches, do: "--#{name}"

    case CMDC.Tool.Options.suggest(switch, known) do
      [best | _] -> " (did you mean #{best}?)"
      [] -> ""
    end
  end

  defp usage_error(message) do
    IO.puts(
      :stderr,
      "mix cmdc.gen.tool: #{message}\n\nUsage: mix cmdc.gen.tool NAME [--python] [--force]"
    )

    exit({:shutdown, 2})
  end

  defp generate(name, opts) do
    unless Regex.match?(~r/^[a-z][a-z0-9_]{0,63}$/, name) do
      usage_error("#{inspect(name)} is not a tool name: snake_case, a letter first (get_weather)")
    end

    files = if opts[:python], do: python_files(name), else: elixir_files(name)

    force? = opts[:force] == true

    case Enum.filter(files, fn {path, _} -> File.exists?(path) end) do
      [{path, _} | _] when not force? ->
        usage_error("#{path} exists; pass --force to overwrite it")

      _ ->
        for {path, text} <- files do
          File.mkdir_p!(Path.dirname(path))
          File.write!(path, text)
          Mix.shell().info("* creating #{path}")
        end

        Mix.shell().info(next_steps(name, opts))
    end
  end

  defp next_steps(name, opts) do
    if opts[:python] do
      """

      Trust the project once so its .cmdc/tools load: mix cmdc.tools trust
      Then: mix cmdc.tools call #{name} '{"text": "hi", "times": 2}' --yes
      (Python tools ask before running; over MCP allow it with --allow #{name}, or set
      #{name}.executionPolicy = "auto" in the script.) Its test: mix test #{python_test_path(name)}
      """
    else
      """

      Serve it: add #{inspect(module(name))} to config/runtime.exs (create it if needed; an edit
      there recompiles nothing, while each edit of `config :cmdc_tool` in config/config.exs
      recompiles all of cmdc_tool):

          import Config
          config :cmdc_tool, tools: [#{inspect(module(name))}]

      Then: mix cmdc.tools call #{name} '{"text": "hi", "times": 2}'
      Its test: mix test #{elixir_test_path(name)}
      """
    end
  end

  defp app, do: Mix.Project.config()[:app] || raise(Mix.Error, "run it inside a Mix project")
  defp app_module, do: Macro.camelize(to_string(app()))
  defp module(name), do: Module.concat([app_module(), "Tools", Macro.camelize(name)])

  defp elixir_files(name) do
    mod = inspect(module(name))

    [
      {Path.join(["lib", to_string(app()), "tools", name <> ".ex"]), elixir_tool(name, mod)},
      {elixir_test_path(name), elixir_test(name, mod)}
    ]
  end

  defp elixir_test_path(name),
    do: Path.join(["test", to_string(app()), "tools", name <> "_test.exs"])

  defp python_test_path(name), do: Path.join(["test", "cmdc_tools", name <> "_test.exs"])

  defp python_files(name) do
    [
      {Path.join([".cmdc", "tools", name <> ".py"]), python_tool(name)},
      {python_test_path(name), python_test(name)}
    ]
  end

  # The template passes `mix cmdc.tools doctor` and `CMDC.Tool.Test.schemas!/1`: every keyword
  # it uses means the same for every provider (no `minLength`, which OpenAI strict mode drops).
  defp elixir_tool(name, mod) do
    """
    defmodule #{mod} do
      @moduledoc "The #{name} tool: repeats `text` `times` times (replace with your own)."
      @behaviour CMDC.Tool

      @impl true
      def name, do: #{inspect(name)}

      @impl true
      def description, do: "Repeat a text a number of times."

      @impl true
      def parameters do
        %{
          "type" => "object",
          "properties" => %{
            "text" => %{"type" => "string", "description" => "What to repeat"},
            "times" => %{
              "type" => "integer",
              "minimum" => 1,
              "maximum" => 10,
              "description" => "How many times (1 when not given)"
            }
          },
          "required" => ["text"],
          "additionalProperties" => false
        }
      end

      # Arguments arrive validated, with string keys. Return {:ok, text} or {:error, text}:
      # the model reads either.
      @impl true
      def execute(%{"text" => text} = args, _context) do
        {:ok, text |> List.duplicate(Map.get(args, "times", 1)) |> Enum.join(" ")}
      end
    end
    """
  end

  defp elixir_test(name, mod) do
    """
    defmodule #{mod}Test do
      use ExUnit.Case, async: true
      import CMDC.Tool.Test

      alias #{mod}, as: Tool

      test "a valid call runs" do
        assert call!([Tool], #{inspect(name)}, %{"text" => "hi", "times" => 2}) == "hi hi"
      end

      test "an invalid call is refused with a message the model can act on" do
        result = call([Tool], #{inspect(name)}, %{"times" => 0})
        assert result.reason == :invalid
        assert result.content =~ ~s("text" is a required property)
        assert result.content =~ "less than the minimum of 1"
      end

      test "every provider takes the schema as written" do
        assert %{openai_strict: [_], gemini: [_], mcp: [_]} = schemas!([Tool])
      end
    end
    """
  end

  defp python_tool(name) do
    ~s'''
    """Tools of this project (the module docstring is the group's rule prompt)."""


    def #{name}(text: str, times: int = 1) -> str:
        """Repeat a text a number of times.

        Args:
            text: what to repeat
            times: how many times (1 by default)
        """
        if times < 1:
            raise ValueError("times must be at least 1")
        return " ".join([text] * times)
    '''
  end

  defp python_test(name) do
    """
    defmodule CmdcTools.#{Macro.camelize(name)}Test do
      use ExUnit.Case, async: true
      import CMDC.Tool.Test

      @script Path.expand("../../.cmdc/tools/#{name}.py", __DIR__)

      setup_all do
        {:ok, %{tools: [tool]}} = CMDC.Tool.Script.load(@script)
        %{tool: tool}
      end

      # A Python tool asks before running (its default policy): a test allows it.
      test "the script describes and runs the tool", %{tool: tool} do
        assert tool.name() == #{inspect(name)}
        args = %{"text" => "hi", "times" => 2}
        assert call!([tool], #{inspect(name)}, args, policies: %{#{inspect(name)} => :auto}) == "hi hi"
      end

      test "every provider takes the schema as written", %{tool: tool} do
        assert %{openai_strict: [_], gemini: [_], mcp: [_]} = schemas!([tool])
      end
    end
    """
  end
end
