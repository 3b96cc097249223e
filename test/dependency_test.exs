defmodule CMDC.Tool.DependencyTest do
  # cmdc_tool used the way users use it: as a `path:` dependency of a throwaway project, built
  # from a fresh _build (the compiler task in mix.exs runs cargo and installs the library).
  use ExUnit.Case, async: true

  @root Path.expand("../", __DIR__)

  @tag timeout: 600_000
  @tag :tmp_dir
  test "a project depending on cmdc_tool by path compiles it and calls to_schema/2", %{
    tmp_dir: dir
  } do
    File.write!(Path.join(dir, "mix.exs"), """
    defmodule Throwaway.MixProject do
      use Mix.Project
      def project, do: [app: :throwaway, version: "0.0.1", deps: [{:cmdc_tool, path: #{inspect(@root)}}]]
    end
    """)

    File.mkdir_p!(Path.join(dir, "lib"))

    File.write!(Path.join(dir, "lib/hello_tool.ex"), """
    defmodule HelloTool do
      @behaviour CMDC.Tool
      def name, do: "hello"
      def description, do: "Say hello."
      def parameters, do: %{"type" => "object", "properties" => %{"who" => %{"type" => "string"}}}
      def execute(%{"who" => who}, _ctx), do: {:ok, "hello " <> who}
    end
    """)

    code = """
    [tool] = CMDC.Tool.to_schema([HelloTool], %{})
    IO.puts(CMDC.Tool.JSON.encode!(tool))
    {:error, [e]} = CMDC.Tool.validate(HelloTool, %{"who" => 1})
    IO.puts("invalid at " <> e.path)
    """

    env = [{"MIX_ENV", "dev"}, {"MIX_EXS", nil}, {"MIX_BUILD_PATH", nil}, {"MIX_DEPS_PATH", nil}]

    {out, status} =
      System.cmd("mix", ["run", "-e", code], cd: dir, env: env, stderr_to_stdout: true)

    assert status == 0, out
    assert out =~ ~s({"function":{"description":"Say hello.","name":"hello")
    assert out =~ "invalid at /who"

    assert File.exists?(
             Path.join(dir, "_build/dev/lib/cmdc_tool/priv/native/libcmdc_tool_nif.so")
           )
  end
end
