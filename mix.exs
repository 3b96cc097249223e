defmodule Mix.Tasks.Compile.CmdcNative do
  @moduledoc """
  Builds the Rust NIF crate with cargo (release profile) and installs the shared library under
  `priv/native/` of the `:cmdc_tool` application.

  hex.pm is unreachable where this library is built, so there is no `rustler` mix package: this
  small compiler is defined here, in `mix.exs`, so Mix sees it before compiling anything. It
  rebuilds only when a file of the crate (`*.rs`, `Cargo.toml`, `Cargo.lock`) is newer than the
  installed library. It works the same when `:cmdc_tool` is a `path:` dependency.
  """
  use Mix.Task.Compiler

  @crate "cmdc_tool_nif"

  @impl true
  def run(_args) do
    root = Path.expand(__DIR__)
    target = Path.join([Mix.Project.app_path(), "priv", "native", "lib#{@crate}.so"])
    sources = sources(root)

    if stale?(sources, target) do
      build(root, target)
    else
      {:noop, []}
    end
  end

  @impl true
  def manifests, do: []

  @impl true
  def clean do
    File.rm(Path.join([Mix.Project.app_path(), "priv", "native", "lib#{@crate}.so"]))
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

  defp build(root, target) do
    cargo = find_cargo(System.get_env("CARGO"))

    # Build output goes to stderr: stdout may be a protocol channel (`mix cmdc.mcp`).
    IO.puts(:stderr, "==> cmdc_tool: cargo build --release (native/#{@crate})")
    args = ["build", "--release", "--manifest-path", Path.join(root, "Cargo.toml"), "-p", @crate]

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
    [extra_applications: [:logger, :inets, :ssl], mod: {CMDC.Tool.Application, []}]
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end
