defmodule CMDC.Tool.Project.Unserved do
  @moduledoc """
  The tool modules of the project's own application(s) that nothing serves: compiled with
  `@behaviour CMDC.Tool`, but neither declared in `config :cmdc_tool, tools: [...]` nor found
  by discovery. `mix cmdc.tools list`, `doctor`, `call` and the MCP server's start-up say so,
  with the config line that serves them (`hint/3`).

  The project's applications are the `ebin` folders of the code path under `<cwd>/_build`
  whose modules were compiled from sources inside the project but outside its `deps/` (its own
  app, umbrella apps under `apps/`); cmdc_tool itself never counts. Finding the modules reads
  the `.beam` files' attribute chunks (`:beam_lib`): nothing is loaded, no code runs.
  `defining/3` is the one function that runs project code (each module's `name/0`), each in
  a process of its own under a time and heap bound.
  """

  @behaviour_atom "Elixir.CMDC.Tool"
  # `name/0` of a module nobody serves: run bounded, for one message only.
  @name_timeout_ms 1_000
  @name_heap_words 2_000_000

  @doc """
  The tool modules of the project in `cwd` that are not in `served` (sorted by name).

      iex> CMDC.Tool.Project.Unserved.find([], File.cwd!())
      []
  """
  @spec find([module()], Path.t()) :: [module()]
  def find(served, cwd \\ File.cwd!()) do
    served = MapSet.new(served)

    cwd
    |> ebins()
    |> Enum.flat_map(&tool_modules/1)
    |> Enum.reject(&MapSet.member?(served, &1))
    |> Enum.uniq()
    |> Enum.sort()
  end

  @doc """
  The line that tells a person what to do about `modules`: which config line serves them,
  `configured` (the entries already in `config :cmdc_tool, tools`) kept in it.

      iex> CMDC.Tool.Project.Unserved.hint([Ua.Weather], [], "config/config.exs")
      "Ua.Weather implements CMDC.Tool but is not served: add it to config/config.exs: config :cmdc_tool, tools: [Ua.Weather]"

      iex> CMDC.Tool.Project.Unserved.hint([Ua.A, Ua.B], [Ua.C], "config/config.exs")
      "Ua.A, Ua.B implement CMDC.Tool but are not served: add them to config/config.exs: config :cmdc_tool, tools: [Ua.C, Ua.A, Ua.B]"
  """
  @spec hint([module(), ...], list(), Path.t()) :: String.t()
  def hint(modules, configured, config_file) do
    names = Enum.map_join(modules, ", ", &inspect/1)

    {verb, pronoun} =
      if length(modules) == 1, do: {"implements", "is"}, else: {"implement", "are"}

    "#{names} #{verb} CMDC.Tool but #{pronoun} not served: " <>
      fix(modules, configured, config_file)
  end

  @doc """
  `hint/3` for a tool called by name: the message's second half when one of `modules` answers
  `name` from `name/0`, else `nil`.
  """
  @spec call_hint([module()], String.t(), list(), Path.t()) :: String.t() | nil
  def call_hint(modules, name, configured, config_file) do
    case defining(modules, name) do
      nil ->
        nil

      module ->
        "#{inspect(module)} defines it but is not served: " <>
          fix([module], configured, config_file)
    end
  end

  @doc """
  The first of `modules` whose `name/0` returns `name`. Each `name/0` runs in its own process
  (all at once, `timeout` ms in all, a bounded heap): one that raises, exits, loops or is slow
  counts as no answer. A module is loaded only from where the project's ebin has it.
  """
  @spec defining([module()], String.t(), non_neg_integer()) :: module() | nil
  def defining(modules, name, timeout \\ @name_timeout_ms) do
    deadline = System.monotonic_time(:millisecond) + timeout
    ebins = ebins(File.cwd!())

    modules
    |> Enum.map(fn m -> {m, spawn_monitor(fn -> exit({:name, name_of(m, ebins)}) end)} end)
    |> Enum.reduce(nil, fn {module, {pid, ref}}, found ->
      answer = await(pid, ref, deadline)
      if found == nil and answer == name, do: module, else: found
    end)
  end

  defp await(pid, ref, deadline) do
    receive do
      {:DOWN, ^ref, :process, ^pid, {:name, answer}} -> answer
      {:DOWN, ^ref, :process, ^pid, _crashed} -> nil
    after
      max(deadline - System.monotonic_time(:millisecond), 0) ->
        Process.exit(pid, :kill)
        Process.demonitor(ref, [:flush])
        nil
    end
  end

  defp name_of(module, ebins) do
    Process.flag(:max_heap_size, %{size: @name_heap_words, kill: true, error_logger: false})

    with true <- own_beam?(module, ebins),
         {:module, _} <- Code.ensure_loaded(module),
         true <- function_exported?(module, :name, 0),
         name when is_binary(name) <- module.name() do
      name
    else
      _ -> nil
    end
  catch
    # Without this a raising name/0 would print a crash report.
    _kind, _reason -> nil
  end

  # Loaded already, or what the code server would load is a beam of the project's ebin.
  defp own_beam?(module, ebins) do
    case :code.is_loaded(module) do
      {:file, _} ->
        true

      false ->
        case :code.where_is_file(~c"#{module}.beam") do
          :non_existing -> false
          path -> Path.dirname(to_string(path)) in ebins
        end
    end
  end

  @doc """
  The `ebin` folders of the project's own applications in `cwd`: on the code path, in the
  project's `_build/ENV/lib/APP/ebin` (the same folder by device and inode, so a symlinked
  path matches), compiled from sources in the project outside `deps/`, cmdc_tool's excluded.
  """
  @spec ebins(Path.t()) :: [String.t()]
  def ebins(cwd) do
    cwd = Path.expand(cwd)
    id = file_id(cwd)

    for path <- :code.get_path(),
        ebin = to_string(path),
        project = project_of(ebin),
        project != nil and file_id(project) == id and id != nil,
        Path.basename(Path.dirname(ebin)) != "cmdc_tool",
        own?(ebin, Enum.uniq([cwd, project])),
        uniq: true,
        do: ebin
  end

  # `…/PROJECT/_build/ENV/lib/APP/ebin` → PROJECT, else nil.
  defp project_of(ebin) do
    case ebin |> Path.split() |> Enum.reverse() do
      ["ebin", _app, "lib", _env, "_build" | project] when project != [] ->
        project |> Enum.reverse() |> Path.join()

      _ ->
        nil
    end
  end

  defp file_id(path) do
    case File.stat(path) do
      {:ok, %{major_device: major, minor_device: minor, inode: inode}} -> {major, minor, inode}
      {:error, _} -> nil
    end
  end

  # One beam tells where an application's sources are (`compile_info`'s source): under the
  # project as Mix saw it (either spelling of its path), outside its deps/.
  defp own?(ebin, roots) do
    with [beam | _] <- beams(ebin),
         {:ok, {_, [compile_info: info]}} <- :beam_lib.chunks(~c"#{beam}", [:compile_info]),
         source when is_list(source) <- info[:source] do
      source = to_string(source)

      Enum.any?(roots, fn root ->
        String.starts_with?(source, root <> "/") and
          not String.starts_with?(source, Path.join(root, "deps") <> "/")
      end)
    else
      _ -> false
    end
  end

  # The modules of `ebin` whose attributes name the behaviour. The file's
  # bytes are searched first: a beam that never mentions the atom is not parsed.
  defp tool_modules(ebin) do
    for beam <- beams(ebin),
        {:ok, bytes} <- [File.read(beam)],
        :binary.match(bytes, @behaviour_atom) != :nomatch,
        {:ok, {module, [attributes: attrs]}} <- [:beam_lib.chunks(bytes, [:attributes])],
        tool_behaviour?(attrs),
        do: module
  end

  # `File.ls/1`, not `Path.wildcard/1`: 8x faster on a folder of thousands of files.
  defp beams(ebin) do
    case File.ls(ebin) do
      {:ok, names} -> for n <- names, String.ends_with?(n, ".beam"), do: Path.join(ebin, n)
      {:error, _} -> []
    end
  end

  defp tool_behaviour?(attrs) do
    Enum.any?(attrs, fn {key, value} ->
      key in [:behaviour, :behavior] and CMDC.Tool in List.wrap(value)
    end)
  end

  defp fix(modules, configured, config_file) do
    entries = Enum.map_join(List.wrap(configured) ++ modules, ", ", &inspect/1)
    it = if length(modules) == 1, do: "it", else: "them"
    "add #{it} to #{config_file}: config :cmdc_tool, tools: [#{entries}]"
  end

  @doc """
  How the messages name the config file of the project in `cwd`: the file that already sets
  `config :cmdc_tool`, else `config/runtime.exs` (an edit there recompiles nothing), saying how
  to start it when the project has none (`mix new` makes none).
  """
  @spec config_file(Path.t()) :: String.t()
  def config_file(cwd) do
    sets? = fn file ->
      case File.read(Path.join(cwd, file)) do
        {:ok, text} -> text =~ ~r/^\s*config\s*\(?\s*:cmdc_tool\b/m
        {:error, _} -> false
      end
    end

    cond do
      sets?.("config/runtime.exs") -> "config/runtime.exs"
      sets?.("config/config.exs") -> "config/config.exs"
      File.regular?(Path.join(cwd, "config/runtime.exs")) -> "config/runtime.exs"
      true -> "config/runtime.exs (a new file; its first line: import Config)"
    end
  end
end
