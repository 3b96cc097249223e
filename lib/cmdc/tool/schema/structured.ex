defmodule CMDC.Tool.Structured do
  @moduledoc """
  A tool's optional display title, behaviour hints and structured output (MCP 2025-06-18 and
  later: `title`, `annotations`, `outputSchema`, `structuredContent`), beside cmdc's API.

  A tool module may define, all optional:

    * `title/0` - a display name (`"Read a file"`), where `name/0` is the identifier.
    * `annotations/0` - hints for clients, as a map or keyword list: `:read_only_hint`,
      `:destructive_hint`, `:idempotent_hint`, `:open_world_hint` (booleans; MCP's camelCase
      names and string keys are accepted too).
    * `output_schema/0` - the JSON Schema of its output (the root is an object schema).

  A tool with an output schema returns `{:ok, json_text}` or `{:ok, map}`. The runner checks the
  value against the output schema natively (compiled once per module version, like the
  parameters): a match gives a `CMDC.Tool.Result` with `:structured` (the map) and `:content`
  (its JSON text); a mismatch, text that is not JSON, or a value that is not an object is an
  error result naming the path. Tools without an output schema are not affected.

  Script tools set these from their own files, and tools found by `CMDC.Tool.Discovery` can get
  `title` and `annotations` from their metadata (`.json`).

      iex> CMDC.Tool.Structured.mcp_fields(CMDC.Tool.Examples.Echo)
      %{}
      iex> CMDC.Tool.Structured.normalize_annotations(read_only_hint: true, openWorldHint: false)
      %{"openWorldHint" => false, "readOnlyHint" => true}
  """

  alias CMDC.Tool.{JSON, Schema}

  @hints %{
    "read_only_hint" => "readOnlyHint",
    "destructive_hint" => "destructiveHint",
    "idempotent_hint" => "idempotentHint",
    "open_world_hint" => "openWorldHint"
  }

  @doc "The tool's `title/0`, or `nil`."
  @spec title(module()) :: String.t() | nil
  def title(module), do: optional(module, :title)

  @doc "The tool's `annotations/0` with MCP's key names, or `nil`."
  @spec annotations(module()) :: map() | nil
  def annotations(module) do
    case optional(module, :annotations) do
      nil -> nil
      hints -> normalize_annotations(hints)
    end
  end

  @doc "The tool's `output_schema/0`, or `nil`."
  @spec output_schema(module()) :: map() | nil
  def output_schema(module), do: optional(module, :output_schema)

  @doc false
  # CMDC.Tool.description/2 (documented there). Here, with the other optional callbacks, so
  # that what CMDC.Tool calls (registry, providers) reads descriptions without calling it back.
  @spec description(module(), map()) :: String.t()
  def description(module, context) do
    if Code.ensure_loaded?(module) and function_exported?(module, :description, 1),
      do: module.description(context),
      else: module.description()
  end

  defp optional(module, function) do
    if Code.ensure_loaded?(module) and function_exported?(module, function, 0),
      do: apply(module, function, []),
      else: nil
  end

  @doc """
  Annotations (a map or keyword list, snake_case or MCP camelCase keys) with MCP's key names.
  """
  @spec normalize_annotations(map() | keyword()) :: map()
  def normalize_annotations(hints) when is_map(hints) or is_list(hints) do
    Map.new(hints, fn {key, value} ->
      key = to_string(key)
      {Map.get(@hints, key, key), value}
    end)
  end

  @doc """
  Reads `"title"` and `"annotations"` given as data (discovery metadata, a script's settings):
  `{:ok, %{title: title | nil, annotations: map | nil}, rest}` with the other keys in `rest`,
  or `{:error, reason}` naming what is wrong. Annotations take the keys of `annotations/0`
  (MCP's camelCase or snake_case; booleans, and a `title` string).

      iex> CMDC.Tool.Structured.split_display(%{"title" => "Weather", "annotations" => %{"read_only_hint" => true}, "timeout" => 5})
      {:ok, %{title: "Weather", annotations: %{"readOnlyHint" => true}}, %{"timeout" => 5}}
      iex> CMDC.Tool.Structured.split_display(%{"annotations" => %{"readOnly" => true}})
      {:error, ~s("annotations": unknown hint "readOnly"; the hints are destructiveHint, idempotentHint, openWorldHint, readOnlyHint, title)}
  """
  @spec split_display(map()) ::
          {:ok, %{title: String.t() | nil, annotations: map() | nil}, map()}
          | {:error, String.t()}
  def split_display(data) when is_map(data) do
    {display, rest} = Map.split(data, ["title", "annotations"])

    with {:ok, title} <- display_title(display["title"]),
         {:ok, annotations} <- display_annotations(display["annotations"]) do
      {:ok, %{title: title, annotations: annotations}, rest}
    end
  end

  defp display_title(nil), do: {:ok, nil}
  defp display_title(title) when is_binary(title) and title != "", do: {:ok, title}

  defp display_title(other),
    do: {:error, ~s("title" must be a non-empty string, got #{JSON.encode!(other)})}

  defp display_annotations(nil), do: {:ok, nil}

  defp display_annotations(hints) when is_map(hints) do
    hints = normalize_annotations(hints)
    Enum.find_value(hints, {:ok, hints}, &bad_hint/1)
  end

  defp display_annotations(other),
    do: {:error, ~s("annotations" must be an object, got #{JSON.encode!(other)})}

  @known_hints Enum.sort(["title" | Map.values(@hints)])

  defp bad_hint({"title", value}) when is_binary(value), do: nil
  defp bad_hint({"title", value}), do: bad_hint_value("title", "a string", value)
  defp bad_hint({key, value}) when key in @known_hints and is_boolean(value), do: nil

  defp bad_hint({key, value}) when key in @known_hints,
    do: bad_hint_value(key, "true or false", value)

  defp bad_hint({key, _}) do
    {:error,
     ~s("annotations": unknown hint "#{key}"; the hints are #{Enum.join(@known_hints, ", ")})}
  end

  defp bad_hint_value(key, expected, value),
    do: {:error, ~s("annotations": "#{key}" must be #{expected}, got #{JSON.encode!(value)})}

  @doc "The `title`, `annotations` and `outputSchema` fields of a tool's MCP entry (set ones only)."
  @spec mcp_fields(module()) :: map()
  def mcp_fields(module) do
    [
      {"title", title(module)},
      {"annotations", annotations(module)},
      {"outputSchema", output_schema(module)}
    ]
    |> Enum.reject(fn {_, value} -> value in [nil, %{}] end)
    |> Map.new()
  end

  @doc false
  # The runner's step between `execute/2` and the result: a successful return of a tool with
  # an output schema becomes `{:structured, json_text, map}` or `{:invalid_output, message}`.
  @spec check(term(), module()) :: term()
  def check({:returned, {:ok, value}} = outcome, module) when is_binary(value) or is_map(value) do
    if output_schema(module) == nil, do: outcome, else: structure(module, value)
  end

  def check(outcome, _module), do: outcome

  defp structure(module, value) do
    with {:ok, schema} <- Schema.for_output(module),
         {:ok, decoded} <- validate(schema, value),
         {:ok, text} <- text(value) do
      if is_map(decoded),
        do: {:structured, text, decoded},
        else: invalid("it is not a JSON object (MCP structuredContent is an object)")
    else
      {:error, [%{keyword: "json"} = error]} -> invalid("it is not JSON: #{error.message}")
      {:error, errors} when is_list(errors) -> invalid(errors)
      {:error, message} -> invalid("its output schema does not compile: #{message}")
    end
  end

  defp validate(schema, text) when is_binary(text), do: Schema.validate_json(schema, text)
  defp validate(schema, map), do: Schema.validate(schema, map)

  defp text(text) when is_binary(text), do: {:ok, text}

  defp text(map) do
    case JSON.encode(map) do
      {:ok, text} -> {:ok, text}
      {:error, reason} -> {:error, [Schema.json_error(reason)]}
    end
  end

  defp invalid(errors) when is_list(errors) do
    lines =
      errors
      |> Enum.sort_by(& &1.path)
      |> Enum.map(fn e ->
        "- #{if e.path == "", do: "at the root", else: "at " <> e.path}: #{e.message} (#{e.keyword})"
      end)

    {:invalid_output,
     Enum.join(["The tool's output does not match its output schema:" | lines], "\n")}
  end

  defp invalid(why), do: {:invalid_output, "The tool's output was refused: " <> why}
end
