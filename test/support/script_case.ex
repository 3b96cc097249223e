defmodule CMDC.Tool.ScriptCase do
  @moduledoc false
  # Helpers for script-tool tests: real scripts written into fresh temporary folders.

  def tmp_dir(tag) do
    dir =
      Path.join(
        System.tmp_dir!(),
        "cmdc_script_test_#{tag}_#{System.unique_integer([:positive])}"
      )

    File.rm_rf!(dir)
    File.mkdir_p!(dir)

    ExUnit.Callbacks.on_exit(fn ->
      CMDC.Tool.Script.workers()
      |> Enum.filter(fn {path, _} -> String.starts_with?(path, dir <> "/") end)
      |> Enum.each(fn {path, _} -> CMDC.Tool.Script.stop(path) end)

      File.rm_rf(dir)
    end)

    dir
  end

  def write!(dir, name, source) do
    path = Path.join(dir, name)
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, source)
    path
  end

  @doc "Loads a script and returns `{group, %{tool_name => module}}`."
  def load!(path, opts \\ []) do
    {:ok, group} = CMDC.Tool.Script.load(path, opts)
    {group, Map.new(group.tools, &{&1.name(), &1})}
  end

  def params(module), do: module.parameters()
  def prop(module, name), do: module.parameters()["properties"][name]

  @doc "True while `pid` is a live process (not gone, not a zombie)."
  def alive?(pid) do
    case File.read("/proc/#{pid}/stat") do
      {:ok, stat} ->
        [_, rest] = String.split(stat, ") ", parts: 2)
        not String.starts_with?(rest, ["Z", "X"])

      {:error, _} ->
        false
    end
  end

  def pwsh?, do: System.find_executable("pwsh") != nil
end
