defmodule Mix.Tasks.Compile.CmdcNativeTest do
  # The native compiler of mix.exs, run by `mix` in a throwaway checkout (`TestCheckout.tiny!/2`:
  # this checkout's mix.exs, `CMDC.Tool.Native.Build` and `CMDC.Tool.Native` up to its stubs,
  # over a tiny NIF crate of the same name), so nothing here touches the checkout's own build
  # and no test compiles the real crate or the whole library: when it rebuilds the library,
  # that the first command after the library changed loads it, and that an upgrade adding a NIF
  # compiles without a load warning. The checkouts are `MIX_ENV=dev CMDC_NIF_TESTING=1` (the
  # testing features); each starts with the library `setup_all` built once, with its manifest,
  # so an unchanged one must not run cargo. Where only the decision to rebuild is tested, cargo
  # runs for real and is made to fail at once (an unknown target triple).
  use ExUnit.Case, async: true

  import CMDC.Tool.TestCheckout, only: [mix: 2, mix: 3]
  alias CMDC.Tool.TestCheckout

  @lib TestCheckout.testing_library()
  @rebuild "==> cmdc_tool: cargo build --release --features " <>
             Enum.join(CMDC.Tool.Native.Build.features(), ",")

  # Cargo compiles the tiny crate against the registry crates this checkout built.
  @moduletag timeout: 600_000

  setup_all do
    dir = Path.join(System.tmp_dir!(), "cmdc_native_test_#{System.unique_integer([:positive])}")
    built = TestCheckout.tiny!(dir, target: true)
    {out, status} = mix(built, ["compile.cmdc_native"])
    if status != 0, do: raise("the tiny crate did not build:\n#{out}")

    # The seeded build directory is big; the library and its manifest are all tests take.
    File.rm_rf!(Path.join(built, "target"))
    on_exit(fn -> File.rm_rf(dir) end)
    %{built: built}
  end

  defp tiny!(dir, ctx, opts \\ []), do: TestCheckout.tiny!(dir, [from: ctx.built] ++ opts)

  @tag :tmp_dir
  test "an unchanged tree is not rebuilt, whatever its files' times", %{tmp_dir: dir} = ctx do
    copy = tiny!(dir, ctx)

    {out, 0} = mix(copy, ["compile.cmdc_native"])
    refute out =~ @rebuild

    # A fresh checkout or a copy: every file newer than the library, the same contents.
    for path <- Path.wildcard(Path.join(copy, "native/**/*.rs")), do: File.touch!(path)
    {out, 0} = mix(copy, ["compile.cmdc_native"])
    refute out =~ @rebuild
  end

  @tag :tmp_dir
  test "an edited, removed or added source rebuilds even when older than the library",
       %{tmp_dir: dir} = ctx do
    copy = tiny!(dir, ctx)
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
       %{tmp_dir: dir} = ctx do
    copy = tiny!(dir, ctx)
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
  test "the first command after the library gained a NIF loads it, without a bad_lib warning",
       %{tmp_dir: dir} = ctx do
    copy = tiny!(dir, ctx)
    native_ex = Path.join(copy, "lib/cmdc/tool/native/native.ex")
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

  # An upgrade from a build made when `CMDC.Tool.Native` itself exported `__mix_recompile__?/0`
  # (before `CMDC.Tool.Native.Build`; the definition below is that version's): Mix's manifest
  # still says so, and before compiling Mix loaded that module to ask, after the native
  # compiler had installed the new library, so its `@on_load` printed `bad_lib: Function not
  # found` for the NIF the upgrade added. Checked both ways users build: this checkout (the
  # copy, whose compile runs cargo) and a project depending on it by path (its compile finds
  # the new library already installed).
  @tag :tmp_dir
  test "an upgrade that adds a NIF compiles without a load warning, and the NIF answers",
       %{tmp_dir: dir} = ctx do
    copy = tiny!(dir, ctx, target: true)
    app = TestCheckout.throwaway!(Path.join(dir, "app"), copy, tool: false)
    native_ex = Path.join(copy, "lib/cmdc/tool/native/native.ex")
    lib_rs = Path.join(copy, "native/cmdc_tool_nif/src/lib.rs")
    text = File.read!(native_ex)
    load_nif = "  def load_nif do\n"
    stub = "  def tool_name_for(_name, _format), do: err()\n"
    assert text =~ load_nif and text =~ stub

    previous =
      "  def __mix_recompile__?, do: Mix.Tasks.Compile.CmdcNative.features() != @features\n\n"

    File.write!(native_ex, String.replace(text, load_nif, previous <> load_nif))

    for project <- [copy, app] do
      {out, status} = mix(project, ["compile"])
      assert status == 0, out
      refute out =~ "cargo build", out
      refute out =~ "could not be loaded", out
    end

    # The upgrade: a NIF in the Rust table, its stub, and stubs without __mix_recompile__?/0.
    File.write!(
      lib_rs,
      String.replace(
        File.read!(lib_rs),
        "rustler::init!",
        """
        #[rustler::nif]
        fn tool_name_upgrade_probe() -> i64 {
            42
        }

        rustler::init!\
        """
      )
    )

    File.write!(
      native_ex,
      String.replace(text, stub, stub <> "  def tool_name_upgrade_probe, do: err()\n")
    )

    call = ["run", "-e", "IO.puts(CMDC.Tool.Native.tool_name_upgrade_probe())"]

    for {project, cargo?} <- [{copy, true}, {app, false}] do
      {out, status} = mix(project, call)
      assert status == 0, out
      assert out =~ @rebuild == cargo?, out
      refute out =~ "could not be loaded", out
      assert out |> String.split("\n") |> Enum.member?("42"), out
    end
  end

  # `MIX_ENV=test` and `MIX_ENV=bench` want the same features, so they share one library (one
  # cargo output directory, one installed file, built once under its locks); each environment
  # compiles its own stubs. After a change that adds a NIF, a bench build installs the new
  # library first: the first test command after it must load that library under its own
  # recompiled stubs (issue 38 saw "native library is not loaded" there), without cargo.
  @tag :tmp_dir
  test "the first test command after a bench build that added a NIF loads the library",
       %{tmp_dir: dir} = ctx do
    copy = tiny!(dir, ctx, target: true)
    env = fn mix_env -> [{"MIX_ENV", mix_env}, {"CMDC_NIF_TESTING", nil}] end
    call = fn nif -> ["run", "-e", "IO.puts(CMDC.Tool.Native.#{nif})"] end

    {out, status} = mix(copy, call.("module_schema_drop([])"), env.("test"))
    assert status == 0 and out =~ ~r/^0$/m, out

    lib_rs = Path.join(copy, "native/cmdc_tool_nif/src/lib.rs")
    probe = "#[rustler::nif]\nfn bench_added_probe() -> i64 {\n    7\n}\n\nrustler::init!"
    File.write!(lib_rs, String.replace(File.read!(lib_rs), "rustler::init!", probe))
    native_ex = Path.join(copy, "lib/cmdc/tool/native/native.ex")
    stub = "  def module_schema_drop(_modules), do: err()\n"
    text = File.read!(native_ex)

    File.write!(
      native_ex,
      String.replace(text, stub, stub <> "  def bench_added_probe, do: err()\n")
    )

    {out, status} = mix(copy, call.("bench_added_probe()"), env.("bench"))
    assert status == 0 and out =~ @rebuild and out =~ ~r/^7$/m, out

    {out, status} = mix(copy, call.("bench_added_probe()"), env.("test"))
    assert status == 0, out
    refute out =~ "cargo build", out
    refute out =~ "could not be loaded", out
    assert out =~ ~r/^7$/m, out
  end

  # In a running VM (iex), `recompile` after lib/cmdc/tool/native/native.ex changed loads the new
  # module while the previous one holds the library, and the VM cannot swap a NIF library: the
  # warning says to restart, not to run `mix compile` (which would change nothing).
  @tag :tmp_dir
  test "recompiling the stubs in a running VM says to restart it", %{tmp_dir: dir} = ctx do
    copy = tiny!(dir, ctx)

    script = """
    IO.puts(CMDC.Tool.Native.module_schema_drop([1]))
    File.write!("lib/cmdc/tool/native/native.ex", File.read!("lib/cmdc/tool/native/native.ex") <> "# edited\\n")
    IEx.Helpers.recompile()
    """

    {out, status} = mix(copy, ["run", "-e", script])
    assert status == 0, out
    assert out |> String.split("\n") |> Enum.member?("1"), out
    assert out =~ "could not be loaded (upgrade: ", out
    assert out =~ "Fix: restart the VM (leave iex, run `iex -S mix` again)", out
    refute out =~ "Fix: run `mix compile`", out
  end

  defp assert_rebuilds(copy) do
    {out, status} =
      mix(copy, ["compile.cmdc_native"], [{"CARGO_BUILD_TARGET", "no-such-target-triple"}])

    assert status != 0, out
    assert out =~ @rebuild
    assert out =~ "no-such-target-triple"
  end
end
