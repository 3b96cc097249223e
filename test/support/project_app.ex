defmodule CMDC.Tool.ProjectApp do
  @moduledoc false
  # A user's application, made the way a new user makes one: `mix new my_agent` in a temp dir,
  # `{:cmdc_tool, path: <this checkout>}`, a tool module in lib/, its config, and Python tools
  # in .cmdc/tools/. Used by the CLI/MCP end-to-end test and bench/mcp.exs.
  #
  # Its first compile reuses this checkout's built native library: with CMDC_NIF_TESTING=1 the
  # dependency's native compiler wants `libcmdc_tool_nif_testing.so`, which `MIX_ENV=test mix
  # compile` of this checkout installed in the shared priv/native (a path dependency's priv is
  # a symlink to the checkout's), matching its manifest: cargo does not run. HOME and
  # CMDC_HOME point into the temp dir, so the user's own tool folders, MCP configs and trust
  # list stay out of it (cargo and rustup keep theirs).

  @root Path.expand("../..", __DIR__)

  @doc "The checkout's root."
  def root, do: @root

  @doc "The environment every command of the app runs with."
  def env(dir) do
    home = Path.join(dir, "home")

    [
      {"MIX_ENV", "dev"},
      {"HOME", home},
      {"CMDC_HOME", Path.join(home, ".cmdc")},
      {"CMDC_NIF_TESTING", "1"},
      {"CARGO_HOME", System.get_env("CARGO_HOME") || Path.expand("~/.cargo")},
      {"RUSTUP_HOME", System.get_env("RUSTUP_HOME") || Path.expand("~/.rustup")},
      {"MIX_HOME", System.get_env("MIX_HOME") || Path.expand("~/.mix")},
      {"MIX_EXS", nil},
      {"MIX_BUILD_PATH", nil},
      {"MIX_DEPS_PATH", nil}
    ]
  end

  @doc "Generates and compiles the app under `dir`; returns its folder."
  def generate!(dir), do: make!(dir, &write_tools!/1)

  @doc """
  `mix new my_agent` with the dependency (this checkout, or the copy at `root`) and nothing
  else, compiled; returns its folder.
  """
  def bare!(dir, root \\ @root), do: make!(dir, fn _app -> :ok end, root)

  defp make!(dir, fill, root \\ @root) do
    File.mkdir_p!(Path.join(dir, "home"))

    {out, 0} =
      System.cmd("mix", ["new", "my_agent"], cd: dir, env: env(dir), stderr_to_stdout: true)

    app = Path.join(dir, "my_agent")
    true = File.dir?(app) || raise out
    add_dependency!(app, root)
    fill.(app)
    {out, status} = mix(app, ["compile"])
    if status != 0, do: raise("compiling the generated app failed:\n" <> out)
    app
  end

  @doc "Runs `mix ARGS` in the app: `{output, status}` (stdout and stderr apart)."
  def mix(app, args, opts \\ []) do
    System.cmd("mix", args,
      cd: app,
      env:
        Enum.reduce(Keyword.get(opts, :env, []), env(Path.dirname(app)), fn {k, v}, acc ->
          List.keystore(acc, k, 0, {k, v})
        end),
      stderr_to_stdout: Keyword.get(opts, :stderr_to_stdout, true)
    )
  end

  defp add_dependency!(app, root) do
    mix_exs = Path.join(app, "mix.exs")
    text = File.read!(mix_exs)
    dep = "{:cmdc_tool, path: #{inspect(root)}}"
    text = String.replace(text, ~r/defp deps do\n\s*\[/, "defp deps do\n    [\n      #{dep},")
    true = String.contains?(text, dep) || raise "could not add the dependency to #{mix_exs}"
    File.write!(mix_exs, text)
  end

  defp write_tools!(app) do
    File.mkdir_p!(Path.join(app, "lib/my_agent/tools"))

    File.write!(Path.join(app, "lib/my_agent/tools/weather.ex"), ~S'''
    defmodule MyAgent.Tools.Weather do
      @behaviour CMDC.Tool

      @impl true
      def name, do: "get_weather"

      @impl true
      def description, do: "Current weather for a city."

      @impl true
      def parameters do
        %{
          "type" => "object",
          "properties" => %{
            "city" => %{"type" => "string", "minLength" => 1},
            "unit" => %{"enum" => ["celsius", "fahrenheit"]}
          },
          "required" => ["city"],
          "additionalProperties" => false
        }
      end

      @impl true
      def execute(%{"city" => city} = args, _ctx),
        do: {:ok, "#{city}: 21 degrees #{Map.get(args, "unit", "celsius")}"}
    end
    ''')

    File.mkdir_p!(Path.join(app, "config"))

    File.write!(Path.join(app, "config/config.exs"), """
    import Config
    config :cmdc_tool, tools: [MyAgent.Tools.Weather]
    """)

    File.mkdir_p!(Path.join(app, ".cmdc/tools"))

    # `read_file` is also the name of a library example: the app's own wins (examples are not
    # served unless asked for).
    File.write!(Path.join(app, ".cmdc/tools/notes.py"), ~S'''
    """Notes kept in the project."""
    from pathlib import Path


    # A script tool runs in its own folder: paths are resolved from the project's root.
    PROJECT = Path(__file__).resolve().parents[2]


    def read_file(path: str) -> str:
        """Read a text file of the project.

        Args:
            path: path relative to the project
        """
        return "notes: " + (PROJECT / path).read_text()


    read_file.executionPolicy = "auto"


    def delete_note(name: str) -> str:
        """Delete a note (asks first: the default policy).

        Args:
            name: the note's name
        """
        return "deleted " + name
    ''')

    File.write!(Path.join(app, "NOTES.txt"), "buy milk")
  end
end
