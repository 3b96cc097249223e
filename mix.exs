defmodule Mix.Tasks.Compile.CmdcNative do
  @moduledoc """
  Builds the Rust NIF crate with cargo (release profile) and installs the shared library under
  `priv/native/` of the `:cmdc_tool` application.

  hex.pm is unreachable where this library is built, so there is no `rustler` mix package: this
  small compiler is defined here, in `mix.exs`, so Mix sees it before compiling anything. It
  rebuilds only when a file of the crate (`*.rs`, `Cargo.toml`, `Cargo.lock`) is newer than the
  installed library. It works the same when `:cmdc_tool` is a `path:` dependency.

  The crate's `testing` feature (the test and benchmark NIFs, `CMDC.Tool.Native.Testing`) is
  built for `MIX_ENV=test` and `MIX_ENV=bench`, or with `CMDC_NIF_TESTING=1`; never otherwise.
  That build is installed under its own name (`library/1`), so the two builds never replace
  each other in the shared `priv/`, and `CMDC.Tool.Native` loads the one whose NIF table its
  stubs match.
  """
  use Mix.Task.Compiler

  @crate "cmdc_tool_nif"

  @impl true
  def run(_args) do
    root = Path.expand(__DIR__)
    features = features()
    target = Path.join([Mix.Project.app_path(), "priv", "native", library(features) <> ".so"])

    if stale?(sources(root), target) do
      build(root, target, features)
    else
      {:noop, []}
    end
  end

  @doc """
  The cargo features of the library this build makes: `["testing"]` for `MIX_ENV=test` and
  `MIX_ENV=bench` or with `CMDC_NIF_TESTING=1`, else `[]`.
  """
  def features do
    if Mix.env() in [:test, :bench] or System.get_env("CMDC_NIF_TESTING") == "1",
      do: ["testing"],
      else: []
  end

  @doc "The installed library's name (no extension) for a set of `features/0`."
  def library([]), do: "lib#{@crate}"
  def library(features), do: Enum.join(["lib#{@crate}" | features], "_")

  @impl true
  def manifests, do: []

  @impl true
  def clean do
    for features <- [[], ["testing"]],
        do:
          File.rm(
            Path.join([Mix.Project.app_path(), "priv", "native", library(features) <> ".so"])
          )

    :ok
  end

  defp sources(root) do
    Path.wildcard(Path.join(root, "native/**/*.{rs,toml}")) ++
      Enum.filter([Path.join(root, "Cargo.toml"), Path.join(root, "Cargo.lock")], &File.exists?/1)
  end

  defp stale?(sources, target) do
    case File.stat(target, time: :posix) do
      {:ok, %{mtime: built}} ->
        Enum.any?(sources, fn src -> File.stat!(src, time: :posix).mtime > built end)

      {:error, _} ->
        true
    end
  end

  defp build(root, target, features) do
    cargo = find_cargo(System.get_env("CARGO"))
    feature_args = if features == [], do: [], else: ["--features", Enum.join(features, ",")]

    # Build output goes to stderr: stdout may be a protocol channel (`mix cmdc.mcp`).
    IO.puts(
      :stderr,
      "==> cmdc_tool: " <> Enum.join(["cargo build --release" | feature_args], " ")
    )

    args =
      ["build", "--release", "--manifest-path", Path.join(root, "Cargo.toml"), "-p", @crate] ++
        feature_args

    case System.cmd(cargo, args,
           cd: root,
           into: IO.stream(:standard_error, :line),
           stderr_to_stdout: true
         ) do
      {_, 0} ->
        install(root, target)

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

  defp install(root, target) do
    target_dir = System.get_env("CARGO_TARGET_DIR") || Path.join(root, "target")
    ext = if match?({:unix, :darwin}, :os.type()), do: "dylib", else: "so"
    built = Path.join([target_dir, "release", "lib#{@crate}.#{ext}"])
    File.mkdir_p!(Path.dirname(target))
    # Copy to a temporary name and rename: a loaded library is never overwritten in place.
    tmp = target <> ".tmp"
    File.cp!(built, tmp)
    File.rename!(tmp, target)
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
