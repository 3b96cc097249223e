defmodule Mix.Tasks.Compile.CmdcNativeLockingTest do
  # Native builds running at once in one checkout (`mix test` here, `mix compile` in another
  # shell, projects depending on it by path), in a throwaway checkout over a tiny NIF crate
  # (`TestCheckout.tiny!/2`: this checkout's mix.exs, cargo's build directory seeded with the
  # registry crates, so only the tiny crate compiles).
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually
  import CMDC.Tool.TestCheckout, only: [mix: 2, mix: 3, mix: 4]
  alias CMDC.Tool.TestCheckout

  @lib TestCheckout.testing_library()
  @rebuild "==> cmdc_tool: cargo build --release --features " <>
             Enum.join(CMDC.Tool.Native.Build.features(), ",")

  # A lock left by a build that is gone (killed, or a zombie nobody reaped) is taken over; one
  # held by a running process is waited for, and taken when that process ends. The build runs
  # cargo for real, made to fail at once (an unknown target triple): the lock is released
  # whatever the build's outcome.
  @tag :tmp_dir
  test "a dead or zombie holder's lock is taken over; a live holder's is waited for", %{
    tmp_dir: dir
  } do
    copy = TestCheckout.tiny!(dir)
    lock = Path.join(copy, @lib <> ".lock")
    failing = [{"CARGO_BUILD_TARGET", "no-such-target-triple"}]

    {exited, 0} = System.cmd("sh", ["-c", "echo $$"])
    # The subshell exits once its parent is `sleep` (by exec), which never reaps it. (Had it
    # exited at once, the shell could have reaped it before the exec.)
    zombie =
      Port.open({:spawn, "sh -c '(sleep 0.3; exit 0) & echo $!; exec sleep 30'"}, [:binary])

    assert_receive {^zombie, {:data, zombie_pid}}

    zombie? = fn ->
      case File.read("/proc/#{String.trim(zombie_pid)}/stat") do
        {:ok, stat} -> stat =~ ~r/\) Z /
        {:error, _} -> false
      end
    end

    eventually(zombie?)

    for holder <- [exited, zombie_pid] do
      File.write!(lock, String.trim(holder))
      {out, status} = mix(copy, ["compile.cmdc_native"], failing)
      assert status != 0 and out =~ @rebuild, out
      refute out =~ "waiting", out
      refute File.exists?(lock)
    end

    Port.close(zombie)

    # A live holder: the build says so, waits, and goes on once the holder has ended.
    holder = Port.open({:spawn, "sh -c 'echo $$; exec sleep 600'"}, [:binary])
    assert_receive {^holder, {:data, holder_pid}}
    File.write!(lock, String.trim(holder_pid))
    log = Path.join(dir, "build.log")

    build =
      Task.async(fn -> mix(copy, ["compile.cmdc_native"], failing, into: File.stream!(log)) end)

    waiting =
      "waiting for another build of #{Path.basename(CMDC.Tool.TestCheckout.testing_library())} (OS process #{String.trim(holder_pid)};"

    wait_until!(fn -> File.exists?(log) and File.read!(log) =~ waiting end, build)
    refute File.read!(log) =~ @rebuild
    System.cmd("kill", [String.trim(holder_pid)])
    {_, status} = Task.await(build, 60_000)
    assert status != 0
    assert File.read!(log) =~ @rebuild
    refute File.exists?(lock)
  end

  # Two builds of different feature sets at once used to copy whichever library cargo wrote
  # last (target/release/ is one file for both), and nothing stopped two builds of one library
  # from installing it and its manifest interleaved. The race is made certain: build A (the
  # testing library) is held by its CARGO, a wrapper running the real cargo, right where it
  # had finished cargo and not yet copied; meanwhile build B (the default library, another
  # Mix environment) runs cargo for real, and build C (the testing library again, another Mix
  # environment) starts.
  @tag :tmp_dir
  @tag timeout: 600_000
  test "builds of two feature sets at once install each its own library; one library builds once",
       %{tmp_dir: dir} do
    copy = TestCheckout.tiny!(dir, target: true)
    gate = Path.join(dir, "gate")
    File.mkdir_p!(gate)
    cargo = Path.join(dir, "cargo-gate")

    File.write!(cargo, """
    #!/bin/sh
    "$CMDC_REAL_CARGO" "$@"
    status=$?
    touch "$CMDC_GATE/built"
    while [ ! -e "$CMDC_GATE/go" ]; do sleep 0.1; done
    exit $status
    """)

    File.chmod!(cargo, 0o755)
    # Never leave build A waiting, whatever happens here.
    on_exit(fn -> File.write(Path.join(gate, "go"), "") end)
    # Built by A; cargo finds rustler fresh.
    env_a = [{"CARGO", cargo}, {"CMDC_GATE", gate}, {"CMDC_REAL_CARGO", find_cargo()}]
    a = Task.async(fn -> mix(copy, ["compile.cmdc_native"], env_a) end)
    wait_until!(fn -> File.exists?(Path.join(gate, "built")) end, a)

    lock = Path.join(copy, @lib <> ".lock")
    holder = File.read!(lock)
    c = Task.async(fn -> mix(copy, ["compile.cmdc_native"], [{"MIX_ENV", "test"}]) end)

    default = [{"MIX_ENV", "prod"}, {"CMDC_NIF_TESTING", nil}]
    {out_b, status} = mix(copy, ["compile.cmdc_native"], default)
    assert status == 0, out_b
    assert out_b =~ ~r/==> cmdc_tool: cargo build --release( --features embedder)?$/m, out_b
    refute out_b =~ "waiting", out_b

    File.write!(Path.join(gate, "go"), "")
    {out_a, status} = Task.await(a, :infinity)
    assert status == 0, out_a
    {out_c, status} = Task.await(c, :infinity)
    assert status == 0, out_c

    assert out_c =~
             "waiting for another build of #{Path.basename(CMDC.Tool.TestCheckout.testing_library())} (OS process #{holder};",
           out_c

    refute out_c =~ "cargo build", out_c
    refute File.exists?(lock)
    refute File.exists?(Path.join(copy, "target/features/testing.lock"))

    # Each library is its own feature set's: the testing NIFs answer under the testing stubs,
    # and the default library loads into stubs without them (a NIF without a stub is refused).
    probe =
      "Code.ensure_loaded!(CMDC.Tool.Native); " <>
        "IO.inspect(function_exported?(CMDC.Tool.Native, :term_layout, 0))"

    {out, status} =
      mix(copy, ["run", "-e", probe <> "; IO.inspect(CMDC.Tool.Native.term_layout())"])

    assert status == 0, out
    refute out =~ "could not be loaded", out
    assert out =~ ~r/^true\n:(direct|api)$/m, out

    {out, status} =
      mix(
        copy,
        ["run", "-e", probe <> "; IO.puts(CMDC.Tool.Native.module_schema_drop([1]))"],
        default
      )

    assert status == 0, out
    refute out =~ "could not be loaded", out
    assert out =~ ~r/^false\n1$/m, out
  end

  defp find_cargo, do: System.get_env("CARGO") || System.find_executable("cargo")

  # Not an assertion (which `eventually/2` would try again): the build is over, nothing to wait for.
  defp wait_until!(done?, task) do
    eventually(
      fn ->
        done?.() or ((Process.alive?(task.pid) or raise("the build ended first")) && false)
      end,
      within: 600_000
    )
  end
end
