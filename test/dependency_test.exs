defmodule CMDC.Tool.DependencyTest do
  # cmdc_tool used the way users use it: as a `path:` dependency of a throwaway project, built
  # from a fresh _build (the compiler task in mix.exs runs cargo and installs the library), and
  # what such a user sees when the build or the library goes wrong.
  use ExUnit.Case, async: true

  @root Path.expand("../", __DIR__)
  # The dependency is built with the `testing` feature (CMDC_NIF_TESTING=1): the library this
  # suite's own build installed serves it, so no test here waits minutes for a cargo build of
  # another feature set (the build without it is checked by `cargo clippy --workspace` and run
  # by `make demo`). What is tested is the user's side: a path dependency compiles, loads and
  # answers.
  @so "_build/dev/lib/cmdc_tool/priv/native/libcmdc_tool_nif_testing.so"

  @tag timeout: 600_000
  @tag :tmp_dir
  test "a project depending on cmdc_tool by path compiles it and calls to_schema/2", %{
    tmp_dir: dir
  } do
    throwaway!(dir)

    code = """
    [tool] = CMDC.Tool.to_schema([HelloTool], %{})
    IO.puts(CMDC.Tool.JSON.encode!(tool))
    {:error, [e]} = CMDC.Tool.validate(HelloTool, %{"who" => 1})
    IO.puts("invalid at " <> e.path)
    """

    {out, status} = mix(dir, ["run", "-e", code], [{"CMDC_NIF_TESTING", "1"}])

    assert status == 0, out
    refute out =~ "cargo build", out
    assert out =~ ~s({"function":{"description":"Say hello.","name":"hello")
    assert out =~ "invalid at /who"
    assert File.exists?(Path.join(dir, @so))
  end

  @tag :tmp_dir
  test "without cargo on PATH, compiling says so and names the fix", %{tmp_dir: dir} do
    throwaway!(dir, copy!(dir))
    path = System.get_env("PATH") |> String.split(":") |> Enum.reject(&cargo_in?/1)

    {out, status} = mix(dir, ["compile"], [{"PATH", Enum.join(path, ":")}])

    assert status != 0
    assert out =~ "cmdc_tool: `cargo` was not found on PATH"
    assert out =~ "Fix: install Rust (https://rustup.rs), or set CARGO=/path/to/cargo"

    {out, status} = mix(dir, ["compile"], [{"CARGO", Path.join(dir, "no-cargo")}])
    assert status != 0
    assert out =~ "CARGO=#{Path.join(dir, "no-cargo")} is not an executable"
  end

  @tag timeout: 600_000
  @tag :tmp_dir
  test "a failing cargo build stops compiling with one message naming the fix", %{tmp_dir: dir} do
    throwaway!(dir, copy!(dir))
    # A real cargo run that fails: asked for a target triple that does not exist.
    {out, status} = mix(dir, ["compile"], [{"CARGO_BUILD_TARGET", "no-such-target-triple"}])

    assert status != 0
    assert out =~ "no-such-target-triple"
    assert out =~ "cmdc_tool: `cargo build --release` failed (exit status 101)"
    assert out =~ "Fix: correct the Rust error shown"
    refute File.exists?(Path.join(dir, "cmdc_tool/priv/native/libcmdc_tool_nif.so"))
  end

  @tag timeout: 600_000
  @tag :tmp_dir
  test "a broken shared library gives a warning and a clear error on every call", %{
    tmp_dir: dir
  } do
    copy = copy!(dir)
    throwaway!(dir, copy)
    # This checkout's library with its manifest (so not rebuilt), then broken in a way the
    # compiler cannot see (same size and mtime), like a build for another Erlang/OTP.
    lib = "priv/native/libcmdc_tool_nif_testing.so"

    for file <- [lib, lib <> ".sources"] do
      %{mtime: mtime} = File.stat!(Path.join(@root, file), time: :posix)
      File.cp!(Path.join(@root, file), Path.join(copy, file))
      File.touch!(Path.join(copy, file), mtime)
    end

    so = Path.join(copy, lib)
    %{mtime: mtime} = File.stat!(so, time: :posix)
    {:ok, io} = :file.open(so, [:read, :write, :binary])
    :ok = :file.pwrite(io, 0, "not ELF")
    :ok = File.close(io)
    File.touch!(so, mtime)

    {out, status} =
      mix(dir, ["run", "-e", "CMDC.Tool.JSON.encode(%{})"], [{"CMDC_NIF_TESTING", "1"}])

    assert status != 0
    assert out =~ "cmdc_tool: the native library"
    assert out =~ "could not be loaded"
    assert out =~ "Fix: run `mix compile`"
    assert out =~ "cmdc_tool's native library is not loaded"
  end

  # A copy of this project's sources without its built library: compiling it must build one
  # (the checkout's own priv/native is shared by every project depending on it by path).
  defp copy!(dir) do
    copy = Path.join(dir, "cmdc_tool")
    File.mkdir_p!(copy)

    for entry <- ~w(mix.exs Cargo.toml Cargo.lock lib native priv) do
      File.cp_r!(Path.join(@root, entry), Path.join(copy, entry))
    end

    File.rm_rf!(Path.join(copy, "priv/native"))
    File.mkdir_p!(Path.join(copy, "priv/native"))
    copy
  end

  defp throwaway!(dir, dependency \\ @root) do
    File.write!(Path.join(dir, "mix.exs"), """
    defmodule Throwaway.MixProject do
      use Mix.Project
      def project, do: [app: :throwaway, version: "0.0.1", deps: [{:cmdc_tool, path: #{inspect(dependency)}}]]
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
  end

  defp mix(dir, args, env \\ []) do
    base = [
      {"MIX_ENV", "dev"},
      {"MIX_EXS", nil},
      {"MIX_BUILD_PATH", nil},
      {"MIX_DEPS_PATH", nil},
      {"CARGO", nil}
    ]

    System.cmd("mix", args, cd: dir, env: base ++ env, stderr_to_stdout: true)
  end

  defp cargo_in?(dir), do: File.exists?(Path.join(dir, "cargo"))
end
