defmodule CMDC.Tool.MCP.Client.Check do
  @moduledoc """
  Shape checks of everything an MCP server sends `CMDC.Tool.MCP.Client`, done before any field
  is used: a server is untrusted input. Each check answers `{:ok, value}` (normalized: optional
  fields filled in) or `{:error, reason}`, a sentence the client logs as that server's protocol
  error and puts in the failed request's message.

      iex> CMDC.Tool.MCP.Client.Check.message(%{"jsonrpc" => "2.0", "id" => 1, "result" => []})
      {:error, "a response's result is not an object: []"}

      iex> CMDC.Tool.MCP.Client.Check.tools_page(%{"tools" => [], "nextCursor" => 7})
      {:error, "tools/list: nextCursor is not a string: 7"}
  """

  alias CMDC.Tool.MCP.Client.Limits

  @doc """
  One JSON-RPC message: a response (`id` + an object `result`, or an `error` with an integer
  `code` and a string `message`), a request or a notification (a string `method`, object
  `params` or none).
  """
  @spec message(term()) :: {:ok, map()} | {:error, String.t()}
  def message(%{"id" => id} = msg) when is_map_key(msg, "result") or is_map_key(msg, "error") do
    cond do
      not id?(id) -> {:error, "a response's id is not a string or integer: #{show(id)}"}
      is_map_key(msg, "result") and not is_map(msg["result"]) -> bad("a response's result", msg)
      is_map_key(msg, "error") -> error_object(msg)
      true -> {:ok, msg}
    end
  end

  def message(%{"method" => method} = msg) when is_binary(method) do
    cond do
      is_map_key(msg, "id") and not id?(msg["id"]) ->
        {:error, "a request's id is not a string or integer: #{show(msg["id"])}"}

      msg["params"] != nil and not is_map(msg["params"]) ->
        {:error, "#{cut(method)}: params is not an object: #{show(msg["params"])}"}

      true ->
        {:ok, Map.put_new(msg, "params", %{})}
    end
  end

  def message(other), do: {:error, "not a JSON-RPC message: #{show(other)}"}

  defp error_object(%{"error" => %{"code" => code, "message" => text}} = msg)
       when is_integer(code) and is_binary(text),
       do: {:ok, msg}

  defp error_object(msg),
    do: {:error, "a response's error has no integer code and string message: #{show(msg)}"}

  defp id?(id), do: is_integer(id) or is_binary(id)

  @doc "An `initialize` result: `protocolVersion` (string), `capabilities`, `serverInfo` (objects)."
  @spec initialize(map()) :: {:ok, map()} | {:error, String.t()}
  def initialize(result) do
    with :ok <- field(result, "protocolVersion", &is_binary/1, "a string", "initialize"),
         {:ok, result} <- common(result, "initialize"),
         do: {:ok, result}
  end

  @doc "A `server/discover` result: `supportedVersions` (strings), `capabilities` (object)."
  @spec discover(map()) :: {:ok, map()} | {:error, String.t()}
  def discover(result) do
    versions = result["supportedVersions"]

    if is_list(versions) and versions != [] and Enum.all?(versions, &is_binary/1) do
      common(result, "server/discover")
    else
      {:error, "server/discover: supportedVersions is not a list of strings: #{show(versions)}"}
    end
  end

  defp common(result, what) do
    info = result["serverInfo"] || get_in_meta(result, "io.modelcontextprotocol/serverInfo")

    with :ok <- field(result, "capabilities", &is_map/1, "an object", what),
         :ok <- optional(info, &is_map/1, "#{what}: serverInfo is not an object") do
      {:ok, result |> Map.put_new("capabilities", %{}) |> Map.put("serverInfo", info)}
    end
  end

  defp get_in_meta(%{"_meta" => meta}, key) when is_map(meta), do: meta[key]
  defp get_in_meta(_, _), do: nil

  @doc "One page of `tools/list`: `tools` a list, `nextCursor` a string or absent."
  @spec tools_page(map()) :: {:ok, {list(), String.t() | nil}} | {:error, String.t()}
  def tools_page(result) do
    cursor = result["nextCursor"]

    cond do
      not is_list(result["tools"]) -> {:error, "tools/list: tools is not a list: #{show(result)}"}
      cursor != nil and not is_binary(cursor) -> bad("tools/list: nextCursor", cursor, "a string")
      cursor == "" -> {:ok, {result["tools"], nil}}
      true -> {:ok, {result["tools"], cursor}}
    end
  end

  @doc """
  One listed tool, against `limits`: a valid UTF-8 `name` of 1 to `max_name_bytes` bytes, an
  object `inputSchema` within `max_schema_bytes` and `max_schema_depth`, string `description` and
  `title`, object `annotations` and `outputSchema` (each optional).
  """
  @spec tool(term(), Limits.t()) :: {:ok, map()} | {:error, String.t()}
  def tool(%{"name" => name} = tool, limits) when is_binary(name) do
    schema = Map.get(tool, "inputSchema", %{"type" => "object"})

    cond do
      not String.valid?(name) ->
        {:error, "a tool name is not valid UTF-8: #{show(name)}"}

      name == "" or byte_size(name) > limits.max_name_bytes ->
        {:error, "tool name #{show(name)} is empty or over #{limits.max_name_bytes} bytes"}

      not is_map(schema) ->
        {:error, "tool #{cut(name)}: inputSchema is not an object"}

      :erlang.external_size(schema) > limits.max_schema_bytes ->
        {:error, "tool #{cut(name)}: inputSchema is over #{limits.max_schema_bytes} bytes"}

      too_deep?(schema, limits.max_schema_depth) ->
        {:error, "tool #{cut(name)}: inputSchema nests deeper than #{limits.max_schema_depth}"}

      true ->
        optional_fields(Map.put(tool, "inputSchema", schema), name)
    end
  end

  def tool(other, _limits), do: {:error, "a listed tool has no string name: #{show(other)}"}

  defp optional_fields(tool, name) do
    checks = [
      {"description", &is_binary/1, "a string"},
      {"title", &is_binary/1, "a string"},
      {"annotations", &is_map/1, "an object"},
      {"outputSchema", &is_map/1, "an object"}
    ]

    Enum.reduce_while(checks, {:ok, tool}, fn {key, ok?, what}, acc ->
      case field(tool, key, ok?, what, "tool #{cut(name)}") do
        :ok -> {:cont, acc}
        error -> {:halt, error}
      end
    end)
  end

  @doc "A `tools/call` result: `content` a list of objects (or absent), `isError` a boolean."
  @spec call_result(map()) :: {:ok, map()} | {:error, String.t()}
  def call_result(result) do
    content = Map.get(result, "content", [])

    cond do
      not (is_list(content) and Enum.all?(content, &is_map/1)) ->
        bad("tools/call: content", content, "a list of objects")

      not is_boolean(Map.get(result, "isError", false)) ->
        bad("tools/call: isError", result["isError"], "a boolean")

      true ->
        {:ok, result}
    end
  end

  @doc "`notifications/progress` params: a token (string or integer) and a number `progress`."
  @spec progress(map()) :: {:ok, map()} | {:error, String.t()}
  def progress(%{"progressToken" => token, "progress" => p} = params)
      when (is_integer(token) or is_binary(token)) and is_number(p),
      do: {:ok, params}

  def progress(params), do: {:error, "notifications/progress: malformed params #{show(params)}"}

  # Depth-bounded walk: never deeper than `max` + 1, whatever the schema's nesting.
  defp too_deep?(term, max), do: depth_over?([{term, 0}], max)

  defp depth_over?([], _max), do: false
  defp depth_over?([{_, d} | _], max) when d > max, do: true

  defp depth_over?([{term, d} | rest], max) when is_map(term),
    do: depth_over?(Enum.reduce(Map.values(term), rest, &[{&1, d + 1} | &2]), max)

  defp depth_over?([{term, d} | rest], max) when is_list(term),
    do: depth_over?(Enum.reduce(term, rest, &[{&1, d + 1} | &2]), max)

  defp depth_over?([_ | rest], max), do: depth_over?(rest, max)

  defp field(map, key, ok?, what, context) do
    case Map.get(map, key) do
      nil -> :ok
      value -> if ok?.(value), do: :ok, else: bad("#{context}: #{key}", value, what)
    end
  end

  defp optional(nil, _ok?, _message), do: :ok
  defp optional(value, ok?, message), do: if(ok?.(value), do: :ok, else: {:error, message})

  defp bad(what, msg), do: {:error, "#{what} is not an object: #{show(msg["result"])}"}
  defp bad(what, value, expected), do: {:error, "#{what} is not #{expected}: #{show(value)}"}

  @doc false
  # A value as a short text for a message (a hostile server's value may be huge).
  def show(value), do: inspect(value, limit: 8, printable_limit: 80, binaries: :as_strings)

  defp cut(name), do: show(name)
end
