defmodule CMDC.Tool.Discovery.Conflicts do
  @moduledoc """
  Assembles discovery's report: applies each file's metadata (renames, descriptions,
  settings, disabled tools) and settles name conflicts by the one rule of
  `CMDC.Tool.Discovery`: the tool that comes first wins.
  """

  alias CMDC.Tool.Discovery.Wrapper
  alias CMDC.Tool.Structured

  @doc """
  Builds the report's parts from the scanned files (in precedence order), what each file
  gave (`files`, by real path, with its loader `:result`) and the `reserved` names
  (`{:reserved | :registry, name, module}`): `{tools, errors, ignored}`, where the first
  tool to claim a name wins and each later one becomes a `:conflict` error.
  """
  @spec assemble([map()], %{String.t() => map()}, [tuple()]) :: {[map()], [map()], [map()]}
  def assemble(scan_files, files, reserved) do
    taken =
      Enum.reduce(reserved, %{}, fn {kind, name, module}, acc ->
        Map.put_new(acc, name, {kind, module})
      end)

    {tools, errors, ignored, _taken} =
      Enum.reduce(scan_files, {[], [], [], taken}, fn file, {tools, errors, ignored, taken} ->
        case files[file.real_path].result do
          :script_not_loaded ->
            note =
              entry(
                file,
                :script,
                "script, not loaded: no script loader is configured " <>
                  "(the :script_loader option)"
              )
              |> Map.merge(%{kind: :script, status: "script, not loaded"})

            {tools, errors, [note | ignored], taken}

          {:error, {type, reason}, _} ->
            {tools, [entry(file, type, reason) | errors], ignored, taken}

          {:ok, %{tools: found}} ->
            case candidates(file, found) do
              {:error, reason} ->
                {tools, [entry(file, :bad_metadata, reason) | errors], ignored, taken}

              {:ok, cands, errs, disabled} ->
                {tools, conflicts, taken} = claim(cands, tools, taken)
                {tools, conflicts ++ errs ++ errors, disabled ++ ignored, taken}
            end
        end
      end)

    {Enum.reverse(tools), Enum.reverse(errors), Enum.reverse(ignored)}
  end

  defp claim(cands, tools, taken) do
    Enum.reduce(cands, {tools, [], taken}, fn tool, {tools, conflicts, taken} ->
      case taken[tool.name] do
        nil -> {[tool | tools], conflicts, Map.put(taken, tool.name, {:tool, tool})}
        winner -> {tools, [conflict(tool, winner) | conflicts], taken}
      end
    end)
  end

  @doc """
  The `:conflict` error of `tool`, refused because `winner` (`{:tool, tool}`,
  `{:reserved, module}` or `{:registry, name, module}`) holds its name.
  """
  @spec conflict(map(), tuple()) :: map()
  def conflict(tool, winner) do
    {winner_text, winner_term} =
      case winner do
        {:tool, w} ->
          {"#{w.path} (#{w.source}, #{w.provider})",
           %{path: w.path, source: w.source, provider: w.provider, module: w.module}}

        {:reserved, module} ->
          {"a built-in tool#{if module, do: " (#{inspect(module)})", else: ""}", :reserved}

        {:registry, _name, module} ->
          {"#{inspect(module)}, already in the registry", :registry}

        {:registry, module} ->
          {"#{inspect(module)}, already in the registry", :registry}
      end

    reason =
      "tool #{inspect(tool.name)} from #{tool.path} refused: the name is taken by " <>
        "#{winner_text}, which wins (built-ins and registered tools first, then explicit " <>
        "paths, project, user, plugins). Rename or disable one in its metadata " <>
        ~s[(#{meta_hint(tool.path)}: {"name": "other_name"} or {"disabled": true}).]

    tool
    |> Map.take([:source, :provider, :path, :name])
    |> Map.merge(%{type: :conflict, reason: reason, winner: winner_term, module: tool.module})
  end

  defp meta_hint(path), do: Path.rootname(path) <> ".json"

  # The tools a file contributes after its metadata: `{:ok, tools, errors, disabled}`.
  defp candidates(file, found) do
    meta = file.meta || %{name: nil, description: nil, disabled: false, settings: %{}, tools: %{}}
    good = for %{module: _} = t <- found, do: t

    errors =
      for {:error, module, {type, reason}} <- found,
          do: entry(file, type, reason) |> Map.put(:module, module)

    if meta.name && length(good) + length(errors) > 1 do
      {:error,
       "its metadata #{file.meta_path} renames the file's tool (\"name\"), but the file defines " <>
         "#{length(good) + length(errors)} tools; rename one in \"tools\": {\"<tool>\": {\"name\": …}}"}
    else
      single? = length(found) == 1

      {tools, disabled, bad} =
        Enum.reduce(good, {[], [], []}, fn found, {tools, disabled, bad} ->
          case candidate(file, meta, found, single?) do
            {:tool, tool} -> {[tool | tools], disabled, bad}
            {:disabled, note} -> {tools, [note | disabled], bad}
            {:error, error} -> {tools, disabled, [error | bad]}
          end
        end)

      {:ok, Enum.reverse(tools), errors ++ Enum.reverse(bad), Enum.reverse(disabled)}
    end
  end

  # One tool of the file after its metadata: `{:tool, tool}`, `{:disabled, note}` or
  # `{:error, entry}` (invalid `title`, `annotations` or `examples`).
  defp candidate(file, meta, %{module: module, name: name}, single?) do
    own = Map.get(meta.tools, name, %{})
    new_name = own[:name] || meta.name || name
    description = own[:description] || meta.description || (single? && file.doc) || nil
    # A `.md`'s front matter (title, hints) belongs to the file's one tool; the `.json` wins.
    doc_settings = if single?, do: file.doc_settings, else: %{}

    settings =
      doc_settings
      |> Map.merge(meta.settings)
      |> Map.merge(Map.get(own, :settings, %{}))

    disabled? = Map.get(own, :disabled, meta.disabled)

    # `title`, `annotations` and `examples` arrive among the settings (every key the metadata
    # format does not name itself is one).
    with false <- disabled?,
         {:ok, display, settings} <- display(settings),
         served = serve(module, {name, new_name}, description, display, settings),
         :ok <- check_examples(served, new_name, display) do
      # Not a reason for a wrapper: the plugin's namespace is only read from the registry.
      {:tool, found_tool(file, served, {name, new_name}, plugin_namespace(settings, file.plugin))}
    else
      true ->
        reason = "tool #{inspect(name)} is disabled in its metadata #{file.meta_path}"
        {:disabled, entry(file, :disabled, reason) |> Map.merge(%{name: name, module: module})}

      {:error, reason} ->
        reason = "its metadata #{metadata_files(file)}: tool #{inspect(name)}: #{reason}"
        {:error, entry(file, :bad_metadata, reason) |> Map.merge(%{name: name, module: module})}
    end
  end

  # A plugin's tools share its name as their namespace (OpenAI Responses namespaces, see
  # `CMDC.Tool.Deferred.Namespaces`) unless their metadata names another.
  defp plugin_namespace(settings, %{name: name}) when is_binary(name) and name != "",
    do: Map.put_new(settings, "namespace", name)

  defp plugin_namespace(settings, _plugin), do: settings

  # The metadata's display fields (`CMDC.Tool.Structured`) and examples, and the settings left.
  defp display(settings) do
    {examples, settings} = Map.pop(settings, "examples")

    with {:ok, display, settings} <- Structured.split_display(settings),
         {:ok, examples} <- examples(examples) do
      display = Map.put(display, :examples, examples)
      {:ok, for({key, value} <- display, value != nil, into: %{}, do: {key, value}), settings}
    end
  end

  defp examples(nil), do: {:ok, nil}
  defp examples(list) when is_list(list), do: {:ok, list}

  defp examples(other),
    do:
      {:error,
       ~s("examples" must be a list of argument objects, got #{CMDC.Tool.JSON.encode!(other)})}

  # The metadata's examples are checked against the tool's schema here, so a wrong one is the
  # file's error entry (the registry checks a module's own `examples/0`).
  defp check_examples(_served, _name, display) when not is_map_key(display, :examples), do: :ok

  defp check_examples(served, name, _display) do
    with {:ok, _} <- CMDC.Tool.InputExamples.check(served, name), do: :ok
  end

  # Metadata settings make a wrapper too: they must hold wherever the module goes.
  defp serve(module, {name, new_name}, description, display, settings) do
    if new_name != name or description != nil or display != %{} or settings != %{},
      do: Wrapper.wrap(module, new_name, description, display, settings),
      else: module
  end

  defp found_tool(file, served, {name, new_name}, settings) do
    tool = %{
      name: new_name,
      module: served,
      source: file.source,
      provider: file.provider,
      path: file.path,
      real_path: file.real_path,
      kind: file.kind,
      settings: settings,
      plugin: file.plugin && Map.take(file.plugin, [:name, :version]),
      metadata: Enum.reject([file.meta_path, file.doc_path], &is_nil/1)
    }

    if new_name != name, do: Map.put(tool, :original_name, name), else: tool
  end

  defp metadata_files(file),
    do: [file.meta_path, file.doc_path] |> Enum.reject(&is_nil/1) |> Enum.join(" and ")

  defp entry(file, type, reason) do
    %{type: type, source: file.source, provider: file.provider, path: file.path, reason: reason}
  end
end
