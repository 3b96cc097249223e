defmodule CMDC.Tool.InputExamples do
  @moduledoc """
  A tool's example arguments: checked against the tool's schema when it is registered, and
  sent as Anthropic's `input_examples` (as an "Examples:" block of the description to the
  providers without that field, see `with_examples/3`).

  They come from `c:CMDC.Tool.examples/0`, from a discovered tool's metadata (`examples` in its
  `.json`, or in its `.md` front matter) and from a Python script function's docstring
  (an `Examples:` section); README.md's "Examples for the model" shows each form.

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
    case CMDC.Tool.Schema.validate_module(module, example) do
      {:ok, _} ->
        nil

      {:error, errors} ->
        detail = Enum.map_join(errors, "; ", &"at #{&1.path}: #{&1.message}")
        {:error, "example #{i} of tool #{inspect(name)} does not match its parameters: #{detail}"}
    end
  end

  @doc """
  Provider tools with `modules`' examples added (matched by tool name, as `format` names them):
  Anthropic's `input_examples` field; for the formats without such a field (OpenAI chat and
  Responses, Gemini, MCP) an "Examples:" block at the end of the description, one compact JSON
  object a line: at most 3 examples of at most 300 characters each (longer ones are left
  out, never cut into invalid JSON). cmdc's own output (`to_schema/2`, no options) is left as cmdc
  gives it.

      iex> tool = %{"name" => "get_weather", "description" => "Weather."}
      iex> CMDC.Tool.InputExamples.put_examples(tool, :openai_responses, [%{"city" => "Paris"}])
      %{"name" => "get_weather", "description" => ~s(Weather.\\n\\nExamples:\\n{"city":"Paris"})}
  """
  @spec with_examples([map()], atom(), [module()]) :: [map()]
  def with_examples(tools, format, modules) do
    by_name =
      for module <- modules,
          function_exported?(module, :examples, 0),
          (examples = checked(module, module.name())) != [],
          into: %{},
          do: {module.name(), examples}

    put_all(tools, format, by_name)
  end

  @doc """
  `with_examples/3` from examples already read (`%{registered name => examples}`, e.g. what
  `CMDC.Tool.Providers.Described` carries from another node).
  """
  @spec put_all([map()], atom(), %{String.t() => [map()]}) :: [map()]
  def put_all(tools, _format, by_name) when by_name == %{}, do: tools

  def put_all(tools, format, by_name) do
    given = Map.new(by_name, fn {name, examples} -> {given_name(name, format), examples} end)
    Enum.map(tools, &put_named(&1, format, given))
  end

  @doc "The examples of `module` a model is shown: `[]` without any, or when they do not check."
  @spec checked(module(), String.t()) :: [map()]
  def checked(module, name) do
    case check(module, name) do
      {:ok, examples} -> examples
      {:error, _} -> []
    end
  end

  # Gemini's list is one tool object holding every declaration.
  defp put_named(%{"functionDeclarations" => decls} = tool, format, by_name),
    do: %{tool | "functionDeclarations" => Enum.map(decls, &put_named(&1, format, by_name))}

  defp put_named(tool, format, by_name),
    do: put_examples(tool, format, Map.get(by_name, name_of(tool)))

  defp name_of(%{"function" => %{"name" => name}}), do: name
  defp name_of(tool), do: tool["name"]

  @max_examples 3
  @max_example_chars 300

  @doc "One provider tool with `examples` added the way `format` carries them (see `with_examples/3`)."
  @spec put_examples(map(), atom(), [map()] | nil) :: map()
  def put_examples(tool, _format, nil), do: tool
  def put_examples(tool, _format, []), do: tool
  def put_examples(tool, :anthropic, examples), do: Map.put(tool, "input_examples", examples)

  def put_examples(%{"function" => function} = tool, format, examples),
    do: %{tool | "function" => put_examples(function, format, examples)}

  def put_examples(tool, _format, examples) do
    case block(examples) do
      nil -> tool
      text -> Map.update(tool, "description", text, &String.trim_trailing(&1 <> "\n\n" <> text))
    end
  end

  # The description's "Examples:" block, or nil when no example fits the cap.
  defp block(examples) do
    lines = Enum.map(capped(examples), &CMDC.Tool.JSON.encode!/1)
    if lines != [], do: Enum.join(["Examples:" | lines], "\n")
  end

  @doc """
  The examples a model is shown where there is no `input_examples` field: the first 3 whose
  compact JSON has at most 300 characters (longer ones are left out, never cut).

      iex> CMDC.Tool.InputExamples.capped([%{"q" => String.duplicate("x", 400)}, %{"q" => "a"}])
      [%{"q" => "a"}]
  """
  @spec capped([map()]) :: [map()]
  def capped(examples) do
    examples
    |> Enum.filter(&(String.length(CMDC.Tool.JSON.encode!(&1)) <= @max_example_chars))
    |> Enum.take(@max_examples)
  end

  @doc """
  The examples of `module` (registered as `name`) for a search result: valid ones, capped as
  `capped/1` says; `[]` without examples or when they do not check.
  """
  @spec for_result(module(), String.t()) :: [map()]
  def for_result(module, name), do: capped(checked(module, name))

  defp given_name(name, format) do
    case CMDC.Tool.Native.tool_name_for(name, format) do
      {:ok, given} -> given
      _ -> name
    end
  end

  @doc "Whether any of `modules` has examples (the cached provider output then lacks them)."
  @spec any?([module()]) :: boolean()
  def any?(modules), do: Enum.any?(modules, &has_examples?/1)

  defp has_examples?(module) do
    function_exported?(module, :examples, 0) and match?([_ | _], module.examples())
  rescue
    _ -> false
  end
end
