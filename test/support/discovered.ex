defmodule CMDC.Tool.Test.Discovered do
  @moduledoc false
  # A registry holding the tools really discovered in a temporary home: `files` are
  # `{path relative to the home, text}`; the folder is removed when the test ends.

  import ExUnit.Callbacks, only: [on_exit: 1]

  def registry(files, sources, reg \\ CMDC.Tool.Registry.new()) do
    root = Path.join(System.tmp_dir!(), "cmdc_discovered_#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(root) end)
    File.mkdir_p!(Path.join(root, "proj"))

    for {rel, text} <- files do
      path = Path.join([root, "home", rel])
      File.mkdir_p!(Path.dirname(path))
      File.write!(path, text)
    end

    {:ok, _state} =
      CMDC.Tool.Discovery.load_into(reg,
        home: Path.join(root, "home"),
        cwd: Path.join(root, "proj"),
        cmdc_home: nil,
        sources: sources
      )

    reg
  end
end
