defmodule Mix.Tasks.Compile.CmdcNative do
  @moduledoc """
  Builds the Rust NIF crate with cargo (release profile) and installs the shared library under
  `priv/native/` of the `:cmdc_tool` application.

  hex.pm is unreachable where this library is built, so there is no `rustler` mix package: this
  small compiler is defined here, in `mix.exs`, so Mix sees it before compiling anything. It
  works the same when `:cmdc_tool` is a `path:` dependency.

  It rebuilds when the installed library does not match its manifest (`<library>.so.sources`,
  next to it): the crate's files (`native/**/*.{rs,toml}`, `Cargo.toml`, `Cargo.lock`) as they
  were when that build started (path, size, mtime, and a digest read only when size or mtime
  moved), and the library's own size and mtime. So a file added, removed, edited during a
  build or restored with an old mtime, or a library replaced by another build, all rebuild; a
  copied or re-checked-out tree with the same contents does not. Without a manifest (a library
  installed by an older version of this compiler) it rebuilds once; cargo decides what that
  costs.

  The crate's `testing` feature (the test and benchmark NIFs, `CMDC.Tool.Native.Testing`) is
  built for `MIX_ENV=test` and `MIX_ENV=bench`, or with `CMDC_NIF_TESTING=1`; never otherwise.
  That build is installed under its own name (`library/1`): a library is a function of the
  sources and the features, so the environments that want the same features share it, and
  the stubs that must match its table are compiled per environment (`CMDC.Tool.Native.Build`).

  Builds may run at once (`mix test` here, `mix compile` in another shell, projects depending
  on this checkout by path). Cargo compiles one at a time in the shared build directory
  (`target/`, or `CARGO_TARGET_DIR`), but each feature set has its own artifact directory
  (`artifact_dir/1`, cargo's `--target-dir` with `build.build-dir` kept shared), so a build
  copies only its own feature set's library, never one another build just wrote. Building and
  installing one library is exclusive, across OS processes: a build holds the lock of its
  artifact directory (`<dir>.lock`, which two checkouts sharing a `CARGO_TARGET_DIR` share),
  then the installed library's (`<library>.so.lock`); each holds the builder's OS pid, and one
  whose process is gone is taken over. A second build waits, then finds the library installed
  and does nothing.
  """
  use Mix.Task.Compiler

  @crate "cmdc_tool_nif"
  @manifest_vsn 1

  @impl true
  def run(_args) do
    root = Path.expand(__DIR__)
    # `priv/` is linked into the build by `mix compile`; also when this task runs alone.
    Mix.Project.build_structure()
    retire_loading_stubs()
    features = features()
    target = target(features)

    # Checked again under the lock: a build that waited for another one usually has nothing
    # left to do.
    if up_to_date?(root, target) do
      {:noop, []}
    else
      # Cargo's output for these features, then the installed library: every build takes
      # them in this order. (Two checkouts may share a CARGO_TARGET_DIR, two build
      # directories may install into one checkout.)
      with_lock(artifact_dir(root, features) <> ".lock", target, fn ->
        with_lock(target <> ".lock", target, fn ->
          if up_to_date?(root, target), do: {:noop, []}, else: build(root, target, features)
        end)
      end)
    end
  end

  @doc """
  The cargo features of the library this build makes: `embedder` (the native sentence
  embedder of tool search, `CMDC.Tool.Search.Embedder.Native`: candle + tokenizers, a few
  minutes of cold compile) unless `CMDC_TOOL_EMBEDDER=0`, then `testing` for `MIX_ENV=test`
  and `MIX_ENV=bench` or with `CMDC_NIF_TESTING=1`.
  """
  def features do
    embedder = if System.get_env("CMDC_TOOL_EMBEDDER") == "0", do: [], else: ["embedder"]

    testing =
      if Mix.env() in [:test, :bench] or System.get_env("CMDC_NIF_TESTING") == "1",
        do: ["testing"],
        else: []

    embedder ++ testing
  end

  @doc "The installed library's name (no extension) for a set of `features/0`."
  def library([]), do: "lib#{@crate}"
  def library(features), do: Enum.join(["lib#{@crate}" | features], "_")

  @doc "The installed library's path for a set of `features/0`."
  def target(features),
    do: Path.join([Mix.Project.app_path(), "priv", "native", library(features) <> ".so"])

  @doc "The manifest of an installed library: what it was built from."
  def manifest(target), do: target <> ".sources"

  @doc """
  Where cargo puts the library of a set of `features/0` (its `--target-dir`): one directory
  per feature set under the build directory, so no build reads another's output.
  """
  def artifact_dir(root, features) do
    Path.join([build_dir(root), "features", Enum.join(features, "+") |> default_set()])
  end

  defp default_set(""), do: "default"
  defp default_set(set), do: set

  # Cargo's own build directory (every crate's intermediate files), shared by every feature
  # set and by hand-run `cargo` commands.
  defp build_dir(root), do: Path.expand(System.get_env("CARGO_TARGET_DIR") || "target", root)

  # None that Mix should compare times with: the library's manifest is checked by `run/1`.
  @impl true
  def manifests, do: []

  @impl true
  def clean do
    for embedder <- [[], ["embedder"]],
        testing <- [[], ["testing"]],
        features = embedder ++ testing,
        path <- [target(features), manifest(target(features))],
        do: File.rm(path)

    :ok
  end

  # Mix's Elixir compiler loads, before compiling anything, every module its manifest says
  # exports `__mix_recompile__?/0`, from the previous build. `CMDC.Tool.Native` did before
  # `CMDC.Tool.Native.Build` took that over: loading a build from then runs its `@on_load`
  # against the library installed here, and the first compile after an upgrade printed
  # `bad_lib: Function not found` for each NIF added since. Its source has changed since (it
  # no longer defines the function), so the compiler rebuilds it anyway: the old module is
  # removed first, so nothing can load it against the new library.
  defp retire_loading_stubs do
    beam = Path.join(Mix.Project.compile_path(), "Elixir.CMDC.Tool.Native.beam")

    with {:ok, {_, [exports: exports]}} <- :beam_lib.chunks(to_charlist(beam), [:exports]),
         true <- {:__mix_recompile__?, 0} in exports do
      File.rm(beam)
    end
  end

  # One build and install of a library at a time, across OS processes: the lock is a file
  # holding the builder's OS pid, made whole under a private name and linked into place (a
  # link fails if the lock exists). A lock whose process is gone (killed mid-build) is moved
  # aside and taken.
  defp with_lock(lock, target, fun) do
    File.mkdir_p!(Path.dirname(lock))
    mine = "#{lock}.#{System.pid()}"
    File.write!(mine, System.pid())

    try do
      acquire(lock, mine, {Path.basename(target), nil})
      fun.()
    after
      with {:ok, pid} <- File.read(lock), true <- pid == System.pid(), do: File.rm(lock)
      File.rm(mine)
    end
  end

  defp acquire(lock, mine, {library, told}) do
    case File.ln(mine, lock) do
      :ok ->
        :ok

      {:error, :eexist} ->
        told =
          case File.read(lock) do
            {:ok, holder} -> wait_on(lock, holder, library, told)
            # Released meanwhile: tried again at once.
            {:error, :enoent} -> told
            {:error, reason} -> Mix.raise("cmdc_tool: cannot read #{lock}: #{reason}")
          end

        acquire(lock, mine, {library, told})

      # A file system without hard links: built as before there were locks.
      {:error, reason} ->
        IO.puts(:stderr, "==> cmdc_tool: building without the lock #{lock} (#{reason})")
    end
  end

  # Says once per holder that this build waits; returns the holder it told of.
  defp wait_on(lock, holder, library, told) do
    cond do
      holder == System.pid() or not os_process_alive?(holder) ->
        take_over(lock, holder)

      told != holder ->
        IO.puts(:stderr, """
        ==> cmdc_tool: waiting for another build of #{library} \
        (OS process #{holder}; if none runs, delete #{lock})\
        """)

      true ->
        Process.sleep(100)
    end

    holder
  end

  # Moved aside, then checked: if another waiter took it over first, what was moved is its
  # lock, linked back unless a third one holds the name by now.
  defp take_over(lock, holder) do
    aside = "#{lock}.stale.#{System.pid()}"

    with :ok <- File.rename(lock, aside),
         {:ok, moved} <- File.read(aside),
         false <- moved == holder do
      File.ln(aside, lock)
    end

    File.rm(aside)
  end

  # `kill -0` answers for a zombie too (a killed build whose parent never reaped it), so on
  # Linux /proc says whether the process still runs.
  defp os_process_alive?(pid) do
    cond do
      not Regex.match?(~r/\A[0-9]+\z/, pid) ->
        false

      File.dir?("/proc/self") ->
        case File.read("/proc/#{pid}/stat") do
          # "pid (command) state ...": the command may hold ") ".
          {:ok, stat} ->
            not (stat |> String.split(") ") |> List.last() |> String.starts_with?("Z"))

          {:error, _} ->
            false
        end

      true ->
        match?({_, 0}, System.cmd("kill", ["-0", pid], stderr_to_stdout: true))
    end
  end

  defp up_to_date?(root, target) do
    with {:ok, binary} <- File.read(manifest(target)),
         %{vsn: @manifest_vsn, library: library, sources: sources} <- decode(binary),
         {:ok, %{size: size, mtime: mtime}} <- File.stat(target, time: :posix),
         true <- library == {size, mtime} do
      same_sources?(root, sources)
    else
      _ -> false
    end
  end

  defp decode(binary) do
    :erlang.binary_to_term(binary, [:safe])
  rescue
    ArgumentError -> :unreadable
  end

  # Size and mtime equal: unchanged (a stat per file, the usual case). Otherwise the digest
  # decides, so a copy or a fresh checkout of the same files is not a rebuild.
  defp same_sources?(root, recorded) do
    paths = sources(root)

    Enum.sort(paths) == Enum.sort(Map.keys(recorded)) and
      Enum.all?(paths, fn rel ->
        {size, mtime, digest} = Map.fetch!(recorded, rel)

        case File.stat(Path.join(root, rel), time: :posix) do
          {:ok, %{size: ^size, mtime: ^mtime}} -> true
          {:ok, %{size: ^size}} -> digest(Path.join(root, rel)) == digest
          _ -> false
        end
      end)
  end

  # Paths relative to the crate's root, so a manifest holds for a copy of the tree.
  defp sources(root) do
    (Path.wildcard(Path.join(root, "native/**/*.{rs,toml}")) ++
       Enum.filter(
         [Path.join(root, "Cargo.toml"), Path.join(root, "Cargo.lock")],
         &File.exists?/1
       ))
    |> Enum.map(&Path.relative_to(&1, root))
  end

  # Taken before cargo starts: a file edited while it builds no longer matches, so the next
  # command rebuilds.
  defp snapshot(root) do
    Map.new(sources(root), fn rel ->
      path = Path.join(root, rel)
      %{size: size, mtime: mtime} = File.stat!(path, time: :posix)
      {rel, {size, mtime, digest(path)}}
    end)
  end

  defp digest(path) do
    case File.read(path) do
      {:ok, data} -> :erlang.md5(data)
      {:error, _} -> nil
    end
  end

  defp build(root, target, features) do
    cargo = find_cargo(System.get_env("CARGO"))
    feature_args = if features == [], do: [], else: ["--features", Enum.join(features, ",")]
    sources = snapshot(root)

    # Build output goes to stderr: stdout may be a protocol channel (`mix cmdc.mcp`).
    IO.puts(
      :stderr,
      "==> cmdc_tool: " <> Enum.join(["cargo build --release" | feature_args], " ")
    )

    args =
      ["build", "--release", "--manifest-path", Path.join(root, "Cargo.toml"), "-p", @crate] ++
        feature_args ++ ["--target-dir", artifact_dir(root, features)] ++ build_dir_args(root)

    case System.cmd(cargo, args,
           cd: root,
           into: IO.stream(:standard_error, :line),
           stderr_to_stdout: true
         ) do
      {_, 0} ->
        install(artifact_dir(root, features), target, sources)

      {_, status} ->
        Mix.raise("""
        cmdc_tool: `cargo build --release` failed (exit status #{status}); the errors are above.
        Fix: correct the Rust error shown, or update Rust (`rustup update`), then run `mix compile`.
        """)
    end
  end

  defp find_cargo(nil) do
    System.find_executable("cargo") ||
      Mix.raise("""
      cmdc_tool: `cargo` was not found on PATH, so the native library cannot be built.
      Fix: install Rust (https://rustup.rs), or set CARGO=/path/to/cargo, then run `mix compile`.
      """)
  end

  defp find_cargo(path) do
    System.find_executable(path) ||
      Mix.raise("""
      cmdc_tool: CARGO=#{path} is not an executable, so the native library cannot be built.
      Fix: point CARGO at cargo (e.g. ~/.cargo/bin/cargo) or unset it, then run `mix compile`.
      """)
  end

  # Unless the user chose a build directory for cargo: `--config` would override theirs.
  defp build_dir_args(root) do
    if System.get_env("CARGO_BUILD_BUILD_DIR"),
      do: [],
      else: ["--config", "build.build-dir=#{toml_string(build_dir(root))}"]
  end

  defp toml_string(text),
    do: ~s(") <> String.replace(text, ["\\", ~s(")], &("\\" <> &1)) <> ~s(")

  defp install(artifact_dir, target, sources) do
    ext = if match?({:unix, :darwin}, :os.type()), do: "dylib", else: "so"
    # A build for another target triple (CARGO_BUILD_TARGET) writes under its name.
    triple = List.wrap(System.get_env("CARGO_BUILD_TARGET"))
    built = Path.join([artifact_dir | triple] ++ ["release", "lib#{@crate}.#{ext}"])
    File.mkdir_p!(Path.dirname(target))
    # Copied to a temporary name and renamed: a loaded library is never overwritten in place.
    # The name is this OS process's own, as two projects (or environments) sharing this
    # checkout's priv/ may install the same library at once.
    tmp = "#{target}.#{System.pid()}.tmp"
    File.cp!(built, tmp)
    File.rename!(tmp, target)
    %{size: size, mtime: mtime} = File.stat!(target, time: :posix)
    manifest = %{vsn: @manifest_vsn, library: {size, mtime}, sources: sources}
    File.write!("#{manifest(target)}.#{System.pid()}.tmp", :erlang.term_to_binary(manifest))
    File.rename!("#{manifest(target)}.#{System.pid()}.tmp", manifest(target))
    {:ok, []}
  end
end

defmodule CMDC.Tool.MixProject do
  use Mix.Project

  @version "0.1.0"

  def project do
    [
      app: :cmdc_tool,
      version: @version,
      elixir: "~> 1.14",
      compilers: [:cmdc_native] ++ Mix.compilers(),
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: [],
      description: "The CMDC.Tool layer for BEAM LLM agents, with a Rust NIF core.",
      docs: [main: "readme", extras: ["README.md"]]
    ]
  end

  def application do
    [extra_applications: [:logger, :crypto, :inets, :ssl], mod: {CMDC.Tool.Application, []}]
  end

  # Benchmarks use the test helpers (tool factories, MCP servers) and the testing NIFs.
  defp elixirc_paths(env) when env in [:test, :bench], do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end
