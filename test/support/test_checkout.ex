defmodule CMDC.Tool.TestCheckout do
  @moduledoc false
  # Copies of this checkout and throwaway projects depending on one by path, built by real
  # `mix` subprocesses: the tests of the native compiler in mix.exs and of cmdc_tool as a
  # dependency. Nothing here touches the checkout's own build.
  #
  # A copy is made cheap to build: it keeps the sources' mtimes, can take the testing library
  # this suite's `MIX_ENV=test mix compile` installed (with its manifest, so it is not rebuilt
  # under `MIX_ENV=dev CMDC_NIF_TESTING=1`, the same features), and can take cargo's build
  # directory, so a changed NIF source recompiles only the NIF crate, not its dependencies.

  @root Path.expand("../..", __DIR__)
  @lib "priv/native/libcmdc_tool_nif_testing.so"

  @doc "The checkout the suite runs in."
  def root, do: @root

  @doc "The testing library's path, relative to a checkout."
  def testing_library, do: @lib

  @doc """
  Copies the sources into `dir/cmdc_tool` and returns that path. Options: `library: true`
  (default) installs the checkout's testing library and manifest; `target: true` seeds cargo's
  build directory (`seed_target!/1`), removed when the calling test ends (hundreds of MB).
  """
  def copy!(dir, opts \\ []) do
    copy = Path.join(dir, "cmdc_tool")

    for entry <- ~w(mix.exs Cargo.toml Cargo.lock lib native priv/python priv/powershell),
        do: copy_keeping_times!(Path.join(@root, entry), Path.join(copy, entry))

    File.mkdir_p!(Path.join(copy, "priv/native"))

    if Keyword.get(opts, :library, true) do
      for file <- [@lib, @lib <> ".sources"] do
        unless File.exists?(Path.join(@root, file)),
          do: raise("#{file} is missing: run `MIX_ENV=test mix compile` first")

        copy_keeping_times!(Path.join(@root, file), Path.join(copy, file))
      end
    end

    if Keyword.get(opts, :target, false) do
      target = seed_target!(copy)
      ExUnit.Callbacks.on_exit(fn -> File.rm_rf(target) end)
    end

    copy
  end

  @doc """
  Gives a copy cargo's release build directory from the checkout, so cargo finds every crate
  it has built fresh. The registry crates' files (never rewritten while fresh) are hard links;
  this workspace's crates' files, and everything cargo rewrites in place (its lock, its
  caches), are copies, so building in the copy never changes the checkout's build.
  """
  def seed_target!(copy) do
    from = Path.join(@root, "target")
    to = Path.join(copy, "target")

    for rel <- files(from, "release") ++ top_files(from) do
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

  @doc "Writes a throwaway project in `dir` depending on `dependency` by path, with one tool."
  def throwaway!(dir, dependency \\ @root) do
    File.mkdir_p!(Path.join(dir, "lib"))

    File.write!(Path.join(dir, "mix.exs"), """
    defmodule Throwaway.MixProject do
      use Mix.Project
      def project, do: [app: :throwaway, version: "0.0.1", deps: [{:cmdc_tool, path: #{inspect(dependency)}}]]
    end
    """)

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
