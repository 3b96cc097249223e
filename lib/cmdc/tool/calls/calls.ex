defmodule CMDC.Tool.Calls do
  @moduledoc """
  Calls in: the tool calls of a provider's response, as the calls `CMDC.Tool.Runner` runs.

  `from_response/2` reads the response body of every format `CMDC.Tool.to_schema/3` emits — a
  decoded map (string keys, as JSON decoding gives them) or the JSON text itself — and returns
  its calls in the order the model made them, as one batch for `CMDC.Tool.Runner.run_many/4`:

    * `:openai` - a chat completion: `choices[0].message.tool_calls[]` (`id`,
      `function.name`, `function.arguments` as JSON text). The message alone is read too.
    * `:openai_responses` - a Responses response: its `output[]` items of type `function_call`
      (`call_id`, `name`, `arguments`, `namespace` when the function is in one; see
      `CMDC.Tool.Deferred.Namespaces.call/1`), and client `tool_search_call` items (a call of
      the search tool). The `output` list alone is read too.
    * `:anthropic` - a message: its `content[]` blocks of type `tool_use` (`id`, `name`,
      `input`).
    * `:gemini` / `:gemini_json_schema` - a `generateContent` response:
      `candidates[0].content.parts[].functionCall` (`name`, `args`, `id` when the model gives
      one). Gemini usually gives none: each call then gets a stable id (the same response
      always gives the same ids) starting with `"cmdc_gemini_"`, which
      `CMDC.Tool.Result.to_message/3` leaves out of the `functionResponse` again. A `Content`
      map (with `parts`) is read too.
    * `:mcp` - a JSON-RPC `tools/call` request (`params.name`, `params.arguments`, the
      request's `id`), or a list of them.

  Each call is `%{id: id, name: name, arguments: arguments}` (plus `:namespace` for a
  Responses call inside a namespace). Arguments sent as JSON text are decoded when they are a
  JSON object (an empty text is `{}`); anything else — text that is not JSON, an array, a
  number — is kept as the model sent it, so the runner answers that call with an error result
  (`reason: :invalid`) naming what is wrong, which the model can fix on its next turn. The
  other calls of the batch run as usual.

  A body that is not the format's response at all (not JSON, no `choices`, …) is
  `{:error, message}`; a response without tool calls is `{:ok, []}`.

      iex> call = %{"id" => "call_1", "type" => "function",
      ...>   "function" => %{"name" => "echo", "arguments" => ~s({"text": "hi"})}}
      iex> body = %{"choices" => [%{"message" => %{"role" => "assistant", "tool_calls" => [call]}}]}
      iex> CMDC.Tool.Calls.from_response(:openai, body)
      {:ok, [%{id: "call_1", name: "echo", arguments: %{"text" => "hi"}}]}

      iex> CMDC.Tool.Calls.from_response(:anthropic, %{"content" => [
      ...>   %{"type" => "text", "text" => "Let me look."},
      ...>   %{"type" => "tool_use", "id" => "toolu_1", "name" => "echo", "input" => %{"text" => "a"}}]})
      {:ok, [%{id: "toolu_1", name: "echo", arguments: %{"text" => "a"}}]}
  """

  alias CMDC.Tool.Deferred.Namespaces
  alias CMDC.Tool.JSON

  @formats [:openai, :openai_responses, :anthropic, :gemini, :gemini_json_schema, :mcp]
  @gemini_prefix "cmdc_gemini_"

  @type format :: :openai | :openai_responses | :anthropic | :gemini | :gemini_json_schema | :mcp
  @type call :: %{
          required(:id) => term(),
          required(:name) => String.t(),
          required(:arguments) => term(),
          optional(:namespace) => String.t()
        }

  @doc "The formats `from_response/2` reads."
  @spec formats() :: [format()]
  def formats, do: @formats

  @doc false
  # The prefix of the ids made for Gemini calls that came without one.
  def gemini_prefix, do: @gemini_prefix

  @doc """
  The tool calls of a provider's response body (a decoded map or JSON text), in order.

      iex> CMDC.Tool.Calls.from_response(:gemini, %{"candidates" => [%{"content" => %{"parts" => [
      ...>   %{"functionCall" => %{"name" => "echo", "args" => %{"text" => "a"}}}]}}]})
      {:ok, [%{id: "cmdc_gemini_0_c7c3e98c", name: "echo", arguments: %{"text" => "a"}}]}

      iex> CMDC.Tool.Calls.from_response(:openai, "not json")
      {:error, "openai response: invalid JSON: expected ident at line 1 column 2"}
  """
  @spec from_response(format(), map() | list() | String.t()) ::
          {:ok, [call()]} | {:error, String.t()}
  def from_response(format, response) when format in @formats do
    with {:ok, body} <- decode(format, response) do
      read(format, body)
    end
  end

  def from_response(format, _response),
    do:
      raise(
        ArgumentError,
        "CMDC.Tool.Calls.from_response/2: unknown format #{inspect(format)}; " <>
          "expected one of #{inspect(@formats)}"
      )

  @doc """
  Like `from_response/2`, but returns the calls or raises `ArgumentError`.

      iex> CMDC.Tool.Calls.from_response!(:anthropic, %{"content" => []})
      []
  """
  @spec from_response!(format(), map() | list() | String.t()) :: [call()]
  def from_response!(format, response) do
    case from_response(format, response) do
      {:ok, calls} -> calls
      {:error, message} -> raise ArgumentError, message
    end
  end

  defp decode(format, text) when is_binary(text) do
    case JSON.decode(text) do
      {:ok, body} -> {:ok, body}
      {:error, message} -> {:error, "#{format} response: #{message}"}
    end
  end

  defp decode(_format, body) when is_map(body) or is_list(body), do: {:ok, body}

  defp decode(format, other),
    do: {:error, "#{format} response: expected a map or JSON text, got #{inspect(other)}"}

  ## OpenAI chat completions

  defp read(:openai, %{"choices" => [%{"message" => message} | _]}), do: read(:openai, message)

  defp read(:openai, %{"choices" => []}), do: {:ok, []}

  defp read(:openai, %{"role" => _} = message) do
    (message["tool_calls"] || [])
    |> each(:openai, fn
      %{"type" => "function", "id" => id, "function" => %{"name" => name} = f} ->
        {:ok, call(id, name, arguments(f["arguments"]))}

      %{"type" => type} when type != "function" ->
        :skip

      other ->
        {:error, "a tool call without id/function.name: #{inspect(other)}"}
    end)
  end

  ## OpenAI Responses

  defp read(:openai_responses, %{"output" => items}) when is_list(items),
    do: read(:openai_responses, items)

  # Items are read as `CMDC.Tool.Deferred.Namespaces.call/1` reads them (a client
  # `tool_search_call` is a call of the search tool); a server-run tool search is skipped.
  defp read(:openai_responses, items) when is_list(items) do
    each(items, :openai_responses, fn
      %{"type" => type} = item when type in ["function_call", "tool_search_call"] ->
        case Namespaces.call(item) do
          {:ok, call} -> {:ok, %{call | arguments: arguments(call.arguments)}}
          {:error, _} when type == "tool_search_call" -> :skip
          {:error, why} -> {:error, why}
        end

      _ ->
        :skip
    end)
  end

  ## Anthropic

  defp read(:anthropic, %{"content" => blocks}) when is_list(blocks) do
    each(blocks, :anthropic, fn
      %{"type" => "tool_use", "id" => id, "name" => name} = block ->
        {:ok, call(id, name, arguments(Map.get(block, "input", %{})))}

      %{"type" => "tool_use"} = other ->
        {:error, "a tool_use block without id/name: #{inspect(other)}"}

      _ ->
        :skip
    end)
  end

  ## Gemini

  defp read(format, %{"candidates" => [%{"content" => content} | _]})
       when format in [:gemini, :gemini_json_schema],
       do: read(format, content)

  defp read(format, %{"candidates" => _}) when format in [:gemini, :gemini_json_schema],
    do: {:ok, []}

  defp read(format, %{"parts" => parts}) when is_list(parts) do
    parts
    |> Enum.filter(&is_map(&1["functionCall"]))
    |> Enum.with_index()
    |> Enum.map(fn {%{"functionCall" => fc}, i} -> {fc, i} end)
    |> each(format, fn
      {%{"name" => name} = fc, i} when is_binary(name) ->
        args = arguments(Map.get(fc, "args", %{}))
        {:ok, call(fc["id"] || gemini_id(i, name, args), name, args)}

      {other, _} ->
        {:error, "a functionCall without name: #{inspect(other)}"}
    end)
  end

  ## MCP

  defp read(:mcp, requests) when is_list(requests) do
    each(requests, :mcp, fn
      %{"method" => "tools/call", "params" => %{"name" => name} = params} = req ->
        {:ok, call(req["id"], name, arguments(Map.get(params, "arguments", %{})))}

      %{"method" => "tools/call"} = other ->
        {:error, "a tools/call request without params.name: #{inspect(other)}"}

      _ ->
        :skip
    end)
  end

  defp read(:mcp, %{"method" => _} = request), do: read(:mcp, [request])

  defp read(format, body) do
    {:error,
     "#{format} response: not a #{format} response body (#{expected(format)}), got: " <>
       String.slice(inspect(body), 0, 200)}
  end

  defp expected(:openai), do: "expected choices[].message or a message with role"
  defp expected(:openai_responses), do: "expected output[] or a list of output items"
  defp expected(:anthropic), do: "expected a message with content[]"
  defp expected(:mcp), do: "expected a tools/call request or a list of them"
  defp expected(_gemini), do: "expected candidates[].content or a content with parts[]"

  # Maps each item to {:ok, call}, :skip or {:error, why}; the first error stops the walk.
  defp each(items, format, fun) when is_list(items) do
    Enum.reduce_while(items, {:ok, []}, fn item, {:ok, acc} ->
      case fun.(item) do
        {:ok, call} -> {:cont, {:ok, [call | acc]}}
        :skip -> {:cont, {:ok, acc}}
        {:error, why} -> {:halt, {:error, "#{format} response: #{why}"}}
      end
    end)
    |> case do
      {:ok, calls} -> {:ok, Enum.reverse(calls)}
      error -> error
    end
  end

  defp each(other, format, _fun),
    do: {:error, "#{format} response: expected a list of calls, got #{inspect(other)}"}

  defp call(id, name, arguments), do: %{id: id, name: name, arguments: arguments}

  # A JSON object's text becomes its map; anything else stays as sent, for the runner to
  # answer with an error result the model can act on.
  defp arguments(text) when is_binary(text) do
    case String.trim(text) do
      "" ->
        %{}

      trimmed ->
        case JSON.decode(trimmed) do
          {:ok, %{} = map} -> map
          _ -> text
        end
    end
  end

  defp arguments(nil), do: %{}
  defp arguments(other), do: other

  # Stable: the same call at the same place of the same response always gets the same id.
  defp gemini_id(index, name, args) do
    text =
      case JSON.encode(args) do
        {:ok, text} -> text
        {:error, _} -> inspect(args)
      end

    digest =
      :crypto.hash(:sha256, [name, 0, text])
      |> binary_part(0, 4)
      |> Base.encode16(case: :lower)

    @gemini_prefix <> "#{index}_" <> digest
  end
end
