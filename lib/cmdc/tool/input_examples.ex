defmodule CMDC.Tool.InputExamples do
  @moduledoc """
  A tool's example arguments (`c:CMDC.Tool.examples/0`): checked against the tool's schema
  when it is registered, and sent as Anthropic's `input_examples`.

      iex> defmodule Weather do
      ...>   @behaviour CMDC.Tool
      ...>   def name, do: "get_weather"
      ...>   def description, do: "Current weather for a city."
      ...>   def parameters,
      ...>     do: %{"type" => "object", "properties" => %{"city" => %{"type" => "string"}}, "required" => ["city"]}
      ...>   def examples, do: [%{"city" => "Paris"}, %{"town" => "Lyon"}]
      ...>   def execute(_args, _ctx), do: {:ok, "sunny"}
      ...> end
      iex> {:error, {:invalid_tool, _, message}} = CMDC.Tool.Registry.register(CMDC.Tool.Registry.new(), Weather)
      iex> message =~ ~s(example 2 of tool "get_weather" does not match its parameters)
      true
  """

  @doc """
  The examples of `module` (`[]` without `examples/0`), or `{:error, message}` naming the tool
  and the first invalid example.
  """
  @spec check(module(), String.t()) :: {:ok, [map()]} | {:error, String.t()}
  def check(module, name) do
    with {:ok, examples} <- read(module, name) do
      examples
      |> Enum.with_index(1)
      |> Enum.find_value({:ok, examples}, fn {example, i} -> invalid(module, name, example, i) end)
    end
  end

  defp read(module, name) do
    if function_exported?(module, :examples, 0) do
      case module.examples() do
        list when is_list(list) ->
          {:ok, list}

        other ->
          {:error,
           "examples/0 of tool #{inspect(name)} must return a list, got #{inspect(other, limit: 5)}"}
      end
    else
      {:ok, []}
    end
  rescue
    e -> {:error, "examples/0 of tool #{inspect(name)} raised: #{Exception.message(e)}"}
  end

  defp invalid(_module, name, example, i) when not is_map(example),
    do:
      {:error,
       "example #{i} of tool #{inspect(name)} is not an object: #{inspect(example, limit: 5)}"}

  defp invalid(module, name, example, i) do
    case CMDC.Tool.validate(module, example) do
      {:ok, _} ->
        nil

      {:error, errors} ->
        detail = Enum.map_join(errors, "; ", &"at #{&1.path}: #{&1.message}")
        {:error, "example #{i} of tool #{inspect(name)} does not match its parameters: #{detail}"}
    end
  end

  @doc """
  Anthropic tools with `input_examples` added from `modules` (by tool name; names as Anthropic
  was given them).
  """
  @spec with_examples([map()], [module()]) :: [map()]
  def with_examples(tools, modules) do
    by_name =
      for module <- modules,
          function_exported?(module, :examples, 0),
          {:ok, [_ | _] = examples} <- [check(module, module.name())],
          into: %{},
          do: {given_name(module.name()), examples}

    if by_name == %{},
      do: tools,
      else: Enum.map(tools, &put(&1, Map.get(by_name, &1["name"])))
  end

  defp put(tool, nil), do: tool
  defp put(tool, examples), do: Map.put(tool, "input_examples", examples)

  defp given_name(name) do
    case CMDC.Tool.Native.tool_name_for(name, :anthropic) do
      {:ok, given} -> given
      _ -> name
    end
  end

  @doc "Whether any of `modules` has examples (the cached JSON then lacks them)."
  @spec any?([module()]) :: boolean()
  def any?(modules), do: Enum.any?(modules, &function_exported?(&1, :examples, 0))
end
