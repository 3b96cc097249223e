defmodule CMDC.Tool.Discovery.Loader do
  @moduledoc """
  Loads what discovery found into the host VM and checks it: a compiled file's `.beam`
  binaries (refusing `@on_load` hooks and modules that exist elsewhere, so a file cannot run
  code in the host when loaded nor replace `Enum` or another file's module), then each module
  declaring `@behaviour CMDC.Tool`: its callbacks (from its exports), and the name, description
  and parameters schema the compiler VM read (`CMDC.Tool.Discovery.Compiler`), so the host runs
  none of a tool file's functions to discover it. Script files go through the caller's
  `:script_loader`.
  """

  alias CMDC.Tool.Discovery.Compiler
  alias CMDC.Tool.Schema

  @callbacks [name: 0, description: 0, parameters: 0, execute: 2]

  @typedoc "A checked tool, or why a module declaring the behaviour is refused."
  @type checked ::
          %{module: module(), name: String.t()} | {:error, module(), {atom(), String.t()}}

  @typedoc "What loading one file gives."
  @type result ::
          {:ok, %{modules: [module()], tools: [checked()]}}
          | {:error, {atom(), String.t()}, %{modules: [module()]}}

  @doc """
  Loads a compiled Elixir file's modules into the VM and checks its tools. `compiled` is the
  file's `CMDC.Tool.Discovery.Compiler` result (`nil` when it was not compiled). Returns
  `{:ok, %{modules, tools}}` (each tool `%{module, name}` or `{:error, module, {type,
  reason}}`) or `{:error, {type, reason}, %{modules}}` (the modules loaded, to clean up).
  """
  @spec load_compiled(map(), Compiler.result() | nil) :: result()
  def load_compiled(_file, nil),
    do: {:error, {:compile, "not compiled"}, %{modules: []}}

  def load_compiled(_file, {:error, reason}),
    do: {:error, {:compile, reason}, %{modules: []}}

  def load_compiled(file, {:ok, binaries, infos}) do
    charpath = String.to_charlist(file.real_path)

    with :ok <- check_binaries(binaries, charpath),
         :ok <- load_binaries(binaries, charpath) do
      modules = Enum.map(binaries, &elem(&1, 0))

      tool_modules = for {module, binary} <- binaries, Compiler.declares_tool?(binary), do: module

      case tool_modules do
        [] ->
          {:error, {:no_tool, no_tool_reason(modules)}, %{modules: modules}}

        _ ->
          check_tools(tool_modules, modules, infos)
      end
    else
      {:error, reason} -> {:error, reason, %{modules: []}}
    end
  end

  defp no_tool_reason([]), do: "defines no tool: the file defines no module"

  defp no_tool_reason(modules) do
    "defines no tool: no module declares `@behaviour CMDC.Tool` " <>
      "(modules: #{Enum.map_join(modules, ", ", &inspect/1)})"
  end

  defp check_binaries(binaries, charpath) do
    Enum.reduce_while(binaries, :ok, fn {module, binary}, :ok ->
      cond do
        on_load?(binary) ->
          {:halt,
           {:error,
            {:invalid_tool,
             "module #{inspect(module)} has an @on_load hook, which would run code in the " <>
               "host when loaded; refused"}}}

        owner = foreign_owner(module, charpath) ->
          {:halt,
           {:error,
            {:module_conflict,
             "defines module #{inspect(module)}, which already exists (#{owner}); " <>
               "rename the module"}}}

        true ->
          {:cont, :ok}
      end
    end)
  end

  defp on_load?(binary) do
    case :beam_disasm.file(binary) do
      {:beam_file, _, _, _, _, code} ->
        Enum.any?(code, fn {:function, _, _, _, instrs} -> :on_load in instrs end)

      _ ->
        true
    end
  end

  # Who else defines `module`: nil when nobody, or when it was loaded from this same file.
  defp foreign_owner(module, charpath) do
    case :code.which(module) do
      :non_existing ->
        nil

      ^charpath ->
        nil

      [] ->
        "defined in memory"

      :preloaded ->
        "preloaded"

      :cover_compiled ->
        "cover-compiled"

      path when is_list(path) ->
        if own_build?(module, charpath), do: nil, else: "loaded from #{path}"

      other ->
        inspect(other)
    end
  end

  # The application's own build of this very file (a path given under the app's `lib/`): the
  # same source, so the file may load it again instead of being refused.
  defp own_build?(module, charpath) do
    module.module_info(:compile)[:source] == charpath
  rescue
    _ -> false
  end

  defp load_binaries(binaries, charpath) do
    Enum.reduce_while(binaries, :ok, fn {module, binary}, :ok ->
      :code.purge(module)

      case :code.load_binary(module, charpath, binary) do
        {:module, ^module} ->
          {:cont, :ok}

        {:error, reason} ->
          {:halt,
           {:error, {:load, "module #{inspect(module)} could not be loaded: #{inspect(reason)}"}}}
      end
    end)
  end

  # Checks every tool module with what the compiler VM read of it (the host calls none of
  # its functions); `{:ok, %{modules, tools: [%{module, name} | {:error, ...}]}}`.
  defp check_tools(tool_modules, modules, infos) do
    tools =
      for module <- Enum.sort(tool_modules) do
        check_tool(module, fn -> Map.get(infos, module, {:error, "not read"}) end)
      end

    {:ok, %{modules: modules, tools: tools}}
  end

  defp check_tool(module, read) do
    missing = for {f, a} <- @callbacks, not function_exported?(module, f, a), do: "#{f}/#{a}"

    if missing != [] do
      {:error, module,
       {:invalid_tool,
        "#{inspect(module)} declares @behaviour CMDC.Tool but does not define " <>
          Enum.join(missing, ", ")}}
    else
      judge(module, read.())
    end
  end

  # A script loader's modules are read in the host: they are the loader's own code.
  defp read_in_host(module, timeout) do
    Compiler.guarded(
      fn ->
        %{name: module.name(), description: module.description(), parameters: module.parameters()}
      end,
      timeout
    )
  end

  defp judge(module, {:ok, %{name: name, description: description, parameters: parameters}}) do
    cond do
      not is_binary(name) or name == "" ->
        invalid(module, "name/0 must return a non-empty string, got #{inspect(name, limit: 5)}")

      not is_binary(description) ->
        invalid(
          module,
          "description/0 must return a string, got #{inspect(description, limit: 5)}"
        )

      true ->
        case Schema.compile(parameters) do
          {:ok, _} ->
            %{module: module, name: name}

          {:error, message} ->
            {:error, module, {:schema, "#{inspect(module)}: parameters/0: #{message}"}}
        end
    end
  end

  defp judge(module, {:error, message}), do: invalid(module, message)

  defp invalid(module, message),
    do: {:error, module, {:invalid_tool, "#{inspect(module)}: #{message}"}}

  @doc """
  Loads a script file through the `:script_loader` function (`:script_not_loaded` without
  one) and checks the tools it returns; the result is shaped as `load_compiled/2`'s.
  """
  @spec load_script(map(), (String.t() -> term()) | nil, timeout()) ::
          result() | :script_not_loaded
  def load_script(_file, nil, _timeout), do: :script_not_loaded

  def load_script(file, loader, timeout) when is_function(loader, 1) do
    result =
      try do
        loader.(file.real_path)
      rescue
        e -> {:error, Exception.message(e)}
      catch
        kind, reason -> {:error, "#{kind}: #{inspect(reason, limit: 10)}"}
      end

    case result do
      {:ok, modules} when is_list(modules) and modules != [] ->
        tools =
          Enum.map(modules, fn module ->
            Code.ensure_loaded(module)
            check_tool(module, fn -> read_in_host(module, timeout) end)
          end)

        {:ok, %{modules: [], tools: tools}}

      {:ok, _} ->
        {:error, {:no_tool, "the script loader found no tool in it"}, %{modules: []}}

      {:error, reason} ->
        {:error, {:load, "the script loader refused it: #{format_reason(reason)}"},
         %{modules: []}}

      other ->
        {:error,
         {:load,
          "the script loader returned #{inspect(other, limit: 5)}, expected " <>
            "{:ok, [module]} or {:error, reason}"}, %{modules: []}}
    end
  end

  defp format_reason(reason) when is_binary(reason), do: reason
  defp format_reason(reason), do: inspect(reason, limit: 10)
end
