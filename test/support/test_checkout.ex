defmodule CMDC.Tool.TestCheckout do
  @moduledoc false
  # Copies of this checkout and throwaway projects depending on one by path, built by real
  # `mix` subprocesses: the tests of the native compiler in mix.exs and of cmdc_tool as a
  # dependency. Nothing here touches the checkout's own build.
  #
  # A copy is made cheap to build: it keeps the sources' mtimes and can take the testing
  # library this suite's `MIX_ENV=test mix compile` installed (with its manifest, so it is not
  # rebuilt under `MIX_ENV=dev CMDC_NIF_TESTING=1`, the same features). Where the native
  # compiler itself is tested, a tiny checkout (`tiny!/2`) stands for the real one.

  @root Path.expand("../..", __DIR__)
  # The testing library this environment builds (its name carries the features: `embedder`
  # unless CMDC_TOOL_EMBEDDER=0, then `testing`).
  defp lib, do: "priv/native/" <> CMDC.Tool.Native.Build.library() <> ".so"

  @doc "The checkout the suite runs in."
  def root, do: @root

  @doc "The testing library's path, relative to a checkout."
  def testing_library, do: lib()

  @doc """
  Copies the sources into `dir/cmdc_tool` and returns that path. Options: `library: true`
  (default) installs the checkout's testing library and manifest.
  """
  def copy!(dir, opts \\ []) do
    copy = Path.join(dir, "cmdc_tool")

    for entry <- ~w(mix.exs Cargo.toml Cargo.lock lib native priv/python priv/powershell),
        do: copy_keeping_times!(Path.join(@root, entry), Path.join(copy, entry))

    File.mkdir_p!(Path.join(copy, "priv/native"))

    if Keyword.get(opts, :library, true) do
      for file <- [lib(), lib() <> ".sources"] do
        unless File.exists?(Path.join(@root, file)),
          do: raise("#{file} is missing: run `MIX_ENV=test mix compile` first")

        copy_keeping_times!(Path.join(@root, file), Path.join(copy, file))
      end
    end

    copy
  end

  # mix.exs names it as the application's module.
  @tiny_application """
  defmodule CMDC.Tool.Application do
    @moduledoc false
    use Application
    def start(_type, _args), do: Supervisor.start_link([], strategy: :one_for_one)
  end
  """

  @tiny_testing """
  defmodule CMDC.Tool.Native.Testing do
    @moduledoc false
    defmacro __using__(_opts) do
      quote do
        def term_layout, do: err()
      end
    end
  end
  """

  @tiny_names_rs """
  #[rustler::nif]
  fn tool_name_for(name: String, _format: rustler::Term) -> String {
      name
  }
  """

  @tiny_lib_rs """
  mod names;

  #[rustler::nif]
  fn module_schema_drop(modules: Vec<rustler::Term>) -> usize {
      modules.len()
  }

  #[cfg(feature = "testing")]
  mod atoms {
      rustler::atoms! { direct }
  }

  #[cfg(feature = "testing")]
  #[rustler::nif]
  fn term_layout() -> rustler::Atom {
      atoms::direct()
  }

  rustler::init!("Elixir.CMDC.Tool.Native");
  """

  @doc """
  A throwaway checkout in `dir/cmdc_tool` for the tests of the native compiler: this
  checkout's `mix.exs` and `CMDC.Tool.Native.Build` as they are, `CMDC.Tool.Native` as it is
  up to its stubs, and in place of the real NIF crate a tiny one of the same name, on the same
  rustler, whose table is `tool_name_for/2`, `module_schema_drop/1` and, with `testing`,
  `term_layout/0` (stubs of the same names). The build machinery runs for real; cargo compiles
  a few lines instead of the real crate (minutes on a busy 2-core machine), and Mix a few
  modules instead of the library.

  Options: `from: tiny` takes the library another tiny checkout built (with its manifest, so
  it is not rebuilt); `target: true` seeds cargo's build directory with rustler and its graph,
  built once in the test cache, so only the tiny crate compiles (removed when the test ends).
  """
  def tiny!(dir, opts \\ []) do
    tiny = Path.join(dir, "cmdc_tool")
    copy_keeping_times!(Path.join(@root, "mix.exs"), Path.join(tiny, "mix.exs"))

    copy_keeping_times!(
      Path.join(@root, "lib/cmdc/tool/native/build.ex"),
      Path.join(tiny, "lib/cmdc/tool/native/build.ex")
    )

    write!(tiny, "lib/cmdc/tool/native/native.ex", tiny_native())
    write!(tiny, "lib/cmdc/tool/native/testing.ex", @tiny_testing)
    write!(tiny, "lib/cmdc/tool/application.ex", @tiny_application)
    write!(tiny, "Cargo.toml", tiny_workspace())
    copy_keeping_times!(Path.join(@root, "Cargo.lock"), Path.join(tiny, "Cargo.lock"))
    write!(tiny, "native/cmdc_tool_nif/Cargo.toml", tiny_crate())
    write!(tiny, "native/cmdc_tool_nif/src/lib.rs", @tiny_lib_rs)
    write!(tiny, "native/cmdc_tool_nif/src/names.rs", @tiny_names_rs)
    prune_lock!(tiny)
    File.mkdir_p!(Path.join(tiny, "priv/native"))

    if from = opts[:from] do
      for file <- [lib(), lib() <> ".sources"],
          do: copy_keeping_times!(Path.join(from, file), Path.join(tiny, file))
    end

    if Keyword.get(opts, :target, false) do
      target = seed_target!(tiny, tiny_target!())
      ExUnit.Callbacks.on_exit(fn -> File.rm_rf(target) end)
    end

    tiny
  end

  # Cargo's build directory of a tiny checkout built once, in the test cache (outside the
  # checkout: the next run, another clone or worktree reuse it): the registry crates (rustler
  # and its graph) a tiny build finds fresh. Keyed by what decides them: the tiny crate's
  # manifest, the pruned lock and the compiler.
  defp tiny_target! do
    {rustc, 0} = System.cmd("rustc", ["-vV"])
    probe = Path.join(System.tmp_dir!(), "cmdc_tiny_probe_#{System.unique_integer([:positive])}")
    tiny = tiny!(probe)
    lock = File.read!(Path.join(tiny, "Cargo.lock"))
    File.rm_rf!(probe)
    key = :crypto.hash(:sha256, [tiny_crate(), lock, rustc]) |> Base.url_encode64(padding: false)
    name = "tiny-nif-target-" <> binary_part(key, 0, 16)
    dir = CMDC.Tool.TestCache.dir(name)
    target = Path.join(dir, "cmdc_tool/target")

    unless File.exists?(Path.join(dir, "ready")) do
      CMDC.Tool.TestCache.with_lock(name, fn ->
        unless File.exists?(Path.join(dir, "ready")), do: build_tiny_target!(dir)
      end)
    end

    target
  end

  defp build_tiny_target!(dir) do
    File.rm_rf!(dir)
    tiny = tiny!(dir)

    # As the native compiler runs cargo (build directory `target`, artifacts per feature set).
    for features <- [[], ["--features", "testing"]] do
      args =
        ~w(build --release -p cmdc_tool_nif --manifest-path) ++
          [Path.join(tiny, "Cargo.toml"), "--target-dir", Path.join(tiny, "target/features/x")] ++
          ["--config", ~s(build.build-dir="#{Path.join(tiny, "target")}")] ++ features

      case System.cmd(System.get_env("CARGO") || "cargo", args, stderr_to_stdout: true) do
        {_, 0} -> :ok
        {out, status} -> raise "the tiny crate did not build (#{status}):\n#{out}"
      end
    end

    File.write!(Path.join(dir, "ready"), "")
  end

  # The real lock, pruned to the tiny crate's dependencies by cargo now: the first build would
  # do it, and the library's manifest would see the lock changed under it (a second build).
  defp prune_lock!(tiny) do
    cargo = System.get_env("CARGO") || System.find_executable("cargo")
    args = ~w(metadata --offline --format-version 1 --manifest-path) ++ [tiny <> "/Cargo.toml"]

    case System.cmd(cargo, args, stderr_to_stdout: true) do
      {_, 0} -> :ok
      {out, status} -> raise "cargo metadata failed (#{status}) in #{tiny}: #{out}"
    end
  end

  defp write!(root, rel, text) do
    path = Path.join(root, rel)
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, text)
  end

  # The real module up to its stubs (the library's loading, its warnings and fixes, the
  # `testing` switch), then the tiny crate's stubs.
  defp tiny_native do
    text = File.read!(Path.join(@root, "lib/cmdc/tool/native/native.ex"))

    case Regex.run(~r/\A.*?\n  defp err do\n.*?\n  end\n/s, text) do
      [head] ->
        head <>
          """

            def tool_name_for(_name, _format), do: err()
            def module_schema_drop(_modules), do: err()
          end
          """

      nil ->
        raise "lib/cmdc/tool/native/native.ex has no `defp err do … end` before its stubs: " <>
                "update CMDC.Tool.TestCheckout.tiny!/2"
    end
  end

  # The real workspace's release profile: the seeded registry crates were built with it.
  defp tiny_workspace do
    real = File.read!(Path.join(@root, "Cargo.toml"))
    [profile] = Regex.run(~r/^\[profile\.release\].*?(?=^\[|\z)/ms, real)
    "[workspace]\nresolver = \"2\"\nmembers = [\"native/cmdc_tool_nif\"]\n\n" <> profile
  end

  # The real crate's rustler dependency line, so the seeded rustler build is fresh.
  defp tiny_crate do
    real = File.read!(Path.join(@root, "native/cmdc_tool_nif/Cargo.toml"))
    [rustler] = Regex.run(~r/^rustler = .*$/m, real)

    """
    [package]
    name = "cmdc_tool_nif"
    version = "0.1.0"
    edition = "2021"
    publish = false

    [lib]
    crate-type = ["cdylib"]

    [features]
    testing = []
    embedder = []

    [dependencies]
    #{rustler}
    """
  end

  # Gives a tiny checkout cargo's release build directory `from`'s registry crates, so cargo
  # finds them fresh. Their files (never rewritten while fresh) are hard links; what cargo
  # rewrites in place (its lock, its caches) is copied, so building never changes `from`.
  defp seed_target!(tiny, from) do
    to = Path.join(tiny, "target")

    for rel <- files(from, "release") ++ top_files(from),
        not String.contains?(rel, "cmdc_tool") do
      File.mkdir_p!(Path.dirname(Path.join(to, rel)))

      if linkable?(rel),
        do: File.ln!(Path.join(from, rel), Path.join(to, rel)),
        else: copy_keeping_times!(Path.join(from, rel), Path.join(to, rel))
    end

    to
  end

  defp linkable?(rel) do
    match?(["release", dir | _] when dir in ~w(deps build .fingerprint), Path.split(rel)) and
      not String.contains?(rel, "cmdc_tool")
  end

  defp top_files(dir) do
    dir |> File.ls!() |> Enum.filter(&File.regular?(Path.join(dir, &1)))
  end

  defp files(root, rel) do
    path = Path.join(root, rel)

    case File.lstat!(path) do
      %{type: :directory} -> path |> File.ls!() |> Enum.flat_map(&files(root, Path.join(rel, &1)))
      %{type: :regular} -> [rel]
      _ -> []
    end
  end

  @doc "Copies a file or a tree, each file keeping its mtime (cargo and the manifest compare them)."
  def copy_keeping_times!(from, to) do
    File.mkdir_p!(Path.dirname(to))

    for file <- File.cp_r!(from, to), File.regular?(file) do
      source = if file == to, do: from, else: Path.join(from, Path.relative_to(file, to))
      File.touch!(file, File.stat!(source, time: :posix).mtime)
    end

    to
  end

  @doc """
  Writes a throwaway project in `dir` depending on `dependency` by path, with one tool
  (`tool: false`: none, for a dependency without `CMDC.Tool`, such as `tiny!/2`).
  """
  def throwaway!(dir, dependency \\ @root, opts \\ []) do
    File.mkdir_p!(Path.join(dir, "lib"))

    File.write!(Path.join(dir, "mix.exs"), """
    defmodule Throwaway.MixProject do
      use Mix.Project
      def project, do: [app: :throwaway, version: "0.0.1", deps: [{:cmdc_tool, path: #{inspect(dependency)}}]]
    end
    """)

    if Keyword.get(opts, :tool, true), do: hello_tool!(dir)
    dir
  end

  defp hello_tool!(dir) do
    File.write!(Path.join(dir, "lib/hello_tool.ex"), """
    defmodule HelloTool do
      @behaviour CMDC.Tool
      def name, do: "hello"
      def description, do: "Say hello."
      def parameters, do: %{"type" => "object", "properties" => %{"who" => %{"type" => "string"}}}
      def execute(%{"who" => who}, _ctx), do: {:ok, "hello " <> who}
    end
    """)

    dir
  end

  @doc """
  Runs `mix args` in `dir` under `MIX_ENV=dev CMDC_NIF_TESTING=1` (the testing library's
  features: the one this suite built), without this run's Mix and cargo settings; `env`
  overrides (a `nil` value unsets); `opts` go to `System.cmd/3` (e.g. `into:`). Returns
  `{output, exit status}`, stderr included.
  """
  def mix(dir, args, env \\ [], opts \\ []) do
    base = %{
      "MIX_ENV" => "dev",
      "CMDC_NIF_TESTING" => "1",
      "MIX_EXS" => nil,
      "MIX_BUILD_PATH" => nil,
      "MIX_DEPS_PATH" => nil,
      "CARGO" => nil,
      "CARGO_TARGET_DIR" => nil,
      "CARGO_BUILD_BUILD_DIR" => nil
    }

    System.cmd(
      "mix",
      args,
      [cd: dir, env: Enum.to_list(Map.merge(base, Map.new(env))), stderr_to_stdout: true] ++
        opts
    )
  end
end
