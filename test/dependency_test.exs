defmodule CMDC.Tool.DependencyTest do
  # cmdc_tool used the way users use it: as a `path:` dependency of a throwaway project, built
  # from a fresh _build (the compiler task in mix.exs runs cargo and installs the library), and
  # what such a user sees when the build or the library goes wrong.
  use ExUnit.Case, async: true

  import CMDC.Tool.TestCheckout, only: [mix: 2, mix: 3, throwaway!: 1, throwaway!: 2]
  alias CMDC.Tool.TestCheckout

  # The dependency is built with the `testing` feature (CMDC_NIF_TESTING=1): the library this
  # suite's own build installed serves it, so no test here waits minutes for a cargo build of
  # another feature set (the build without it is checked by `cargo clippy --workspace` and run
  # by `make demo`). What is tested is the user's side: a path dependency compiles, loads and
  # answers.
  @so "_build/dev/lib/cmdc_tool/priv/native/" <> CMDC.Tool.Native.Build.library() <> ".so"
  # The production build, where the test stops before cargo compiles anything.
  @default [{"CMDC_NIF_TESTING", nil}]

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

    {out, status} = mix(dir, ["run", "-e", code])

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

    {out, status} = mix(dir, ["compile"], [{"PATH", Enum.join(path, ":")} | @default])

    assert status != 0
    assert out =~ "cmdc_tool: `cargo` was not found on PATH"
    assert out =~ "Fix: install Rust (https://rustup.rs), or set CARGO=/path/to/cargo"

    {out, status} = mix(dir, ["compile"], [{"CARGO", Path.join(dir, "no-cargo")} | @default])
    assert status != 0
    assert out =~ "CARGO=#{Path.join(dir, "no-cargo")} is not an executable"
  end

  @tag timeout: 600_000
  @tag :tmp_dir
  test "a failing cargo build stops compiling with one message naming the fix", %{tmp_dir: dir} do
    throwaway!(dir, copy!(dir))
    # A real cargo run that fails: asked for a target triple that does not exist.
    {out, status} =
      mix(dir, ["compile"], [{"CARGO_BUILD_TARGET", "no-such-target-triple"} | @default])

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
    # This checkout's library with its manifest (so not rebuilt), then broken in a way the
    # compiler cannot see (same size and mtime), like a build for another Erlang/OTP.
    copy = TestCheckout.copy!(dir)
    throwaway!(dir, copy)
    so = Path.join(copy, TestCheckout.testing_library())
    %{mtime: mtime} = File.stat!(so, time: :posix)
    {:ok, io} = :file.open(so, [:read, :write, :binary])
    :ok = :file.pwrite(io, 0, "not ELF")
    :ok = File.close(io)
    File.touch!(so, mtime)

    {out, status} = mix(dir, ["run", "-e", "CMDC.Tool.JSON.encode(%{})"])

    assert status != 0
    assert out =~ "cmdc_tool: the native library"
    assert out =~ "could not be loaded"
    assert out =~ "Fix: run `mix compile`"
    assert out =~ "cmdc_tool's native library is not loaded"
  end

  # A copy of this project's sources without its built library: compiling it must build one
  # (the checkout's own priv/native is shared by every project depending on it by path).
  defp copy!(dir), do: TestCheckout.copy!(dir, library: false)

  defp cargo_in?(dir), do: File.exists?(Path.join(dir, "cargo"))
end
