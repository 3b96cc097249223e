defmodule Mix.Tasks.Compile.CmdcNativeTest do
  # The native compiler of mix.exs, run by `mix` in a copy of this checkout (so nothing here
  # touches the checkout's own build): when it rebuilds the library, and that the first command
  # after the library changed loads it. The copy reuses the library this suite's
  # `MIX_ENV=test mix compile` installed, with its manifest, under `MIX_ENV=dev
  # CMDC_NIF_TESTING=1` (the same features): an unchanged copy must not run cargo. Where a
  # rebuild is expected, cargo runs for real and is made to fail at once (an unknown target
  # triple), which shows the compiler decided to build without a 2-minute compile.
  use ExUnit.Case, async: true

  @root Path.expand("../../..", __DIR__)
  @lib "priv/native/libcmdc_tool_nif_testing.so"
  @rebuild "==> cmdc_tool: cargo build --release --features testing"

  setup_all do
    so = Path.join(@root, @lib)

    if File.exists?(so <> ".sources"),
      do: :ok,
      else: raise("#{so}.sources is missing: run `MIX_ENV=test mix compile` first")
  end

  @tag :tmp_dir
  test "an unchanged tree is not rebuilt, whatever its files' times", %{tmp_dir: dir} do
    copy = copy!(dir)

    {out, 0} = mix(copy, ["compile.cmdc_native"])
    refute out =~ @rebuild

    # A fresh checkout or a copy: every file newer than the library, the same contents.
    for path <- Path.wildcard(Path.join(copy, "native/**/*.rs")), do: File.touch!(path)
    {out, 0} = mix(copy, ["compile.cmdc_native"])
    refute out =~ @rebuild
  end

  @tag :tmp_dir
  test "an edited, removed or added source rebuilds even when older than the library", %{
    tmp_dir: dir
  } do
    copy = copy!(dir)
    old = {{2001, 1, 1}, {0, 0, 0}}
    lib_rs = Path.join(copy, "native/cmdc_tool_nif/src/lib.rs")
    text = File.read!(lib_rs)

    # Edited while the last build ran, or restored by a tool that keeps times.
    File.write!(lib_rs, text <> "\n// edited\n")
    File.touch!(lib_rs, old)
    assert_rebuilds(copy)

    File.write!(lib_rs, text)
    {out, 0} = mix(copy, ["compile.cmdc_native"])
    refute out =~ @rebuild

    moved = Path.join(copy, "native/cmdc_tool_nif/src/names.rs")
    File.rename!(moved, moved <> ".away")
    assert_rebuilds(copy)
    File.rename!(moved <> ".away", moved)

    added = Path.join(copy, "native/cmdc_tool_nif/src/added.rs")
    File.write!(added, "")
    File.touch!(added, old)
    assert_rebuilds(copy)
  end

  @tag :tmp_dir
  test "a library replaced by another build (another checkout's, an older one's) is rebuilt",
       %{tmp_dir: dir} do
    copy = copy!(dir)
    so = Path.join(copy, @lib)
    File.write!(so, File.read!(so) <> "x")
    assert_rebuilds(copy)

    File.rm!(so)
    assert_rebuilds(copy)
  end

  # The failure this guards: Mix loads modules from the previous build to ask their
  # `__mix_recompile__?/0` before compiling; when that loaded `CMDC.Tool.Native`, its `@on_load`
  # ran the library just installed against the previous stubs, and the first command printed
  # `bad_lib: Function not found 'Elixir.CMDC.Tool.Native':module_schema_drop/1`.
  @tag :tmp_dir
  @tag timeout: 600_000
  test "the first command after the library gained a NIF loads it, without a bad_lib warning",
       %{tmp_dir: dir} do
    copy = copy!(dir)
    native_ex = Path.join(copy, "lib/cmdc/tool/native.ex")
    text = File.read!(native_ex)
    stub = "  def module_schema_drop(_modules), do: err()\n"
    assert text =~ stub

    # The previous build: stubs without the NIF the library now has.
    File.write!(native_ex, String.replace(text, stub, ""))
    {out, _} = mix(copy, ["compile"])
    assert out =~ "Function not found 'Elixir.CMDC.Tool.Native':module_schema_drop/1"

    # The change lands (here the stub; the library already has the NIF): one command.
    File.write!(native_ex, text)
    {out, status} = mix(copy, ["run", "-e", "IO.puts(CMDC.Tool.Native.module_schema_drop([]))"])

    assert status == 0, out
    refute out =~ "could not be loaded", out
    assert out |> String.split("\n") |> Enum.member?("0"), out
  end

  defp assert_rebuilds(copy) do
    {out, status} =
      mix(copy, ["compile.cmdc_native"], [{"CARGO_BUILD_TARGET", "no-such-target-triple"}])

    assert status != 0, out
    assert out =~ @rebuild
    assert out =~ "no-such-target-triple"
  end

  # The sources and the installed library with its manifest, as the checkout has them (the
  # library keeps its mtime, which its manifest records).
  defp copy!(dir) do
    copy = Path.join(dir, "cmdc_tool")
    File.mkdir_p!(copy)

    for entry <- ~w(mix.exs Cargo.toml Cargo.lock lib native priv/python priv/powershell) do
      File.mkdir_p!(Path.dirname(Path.join(copy, entry)))
      File.cp_r!(Path.join(@root, entry), Path.join(copy, entry))
    end

    File.mkdir_p!(Path.join(copy, "priv/native"))

    for file <- [@lib, @lib <> ".sources"] do
      File.cp!(Path.join(@root, file), Path.join(copy, file))
      %{mtime: mtime} = File.stat!(Path.join(@root, file), time: :posix)
      File.touch!(Path.join(copy, file), mtime)
    end

    copy
  end

  defp mix(dir, args, env \\ []) do
    base = [
      {"MIX_ENV", "dev"},
      {"CMDC_NIF_TESTING", "1"},
      {"MIX_EXS", nil},
      {"MIX_BUILD_PATH", nil},
      {"MIX_DEPS_PATH", nil},
      {"CARGO", nil},
      {"CARGO_TARGET_DIR", nil}
    ]

    System.cmd("mix", args, cd: dir, env: base ++ env, stderr_to_stdout: true)
  end
end
