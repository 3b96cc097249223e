defmodule CMDC.Tool.MCP do
  @moduledoc """
  The Model Context Protocol, server side, as pure functions: one JSON-RPC message in, the
  replies and effects out. `CMDC.Tool.MCP.Server` runs it over stdio.

  Protocol versions `2025-06-18` and `2025-11-25` are negotiated at `initialize` (a client asking
  for another version gets the newest one, as the specification says; see
  `CMDC.Tool.MCP.Protocol`). Supported: `initialize`, `ping`, `tools/list` (cursor pagination),
  `tools/call`, `notifications/initialized`, `notifications/cancelled`; the server sends
  `notifications/progress`, and `notifications/tools/list_changed` when started with
  `list_changed: true` (only then is `listChanged` advertised). Requests other than `ping` before
  `initialize` get an Invalid Request error (-32600) saying so.

  Tools list their optional `title`, `annotations` and `outputSchema` (see
  `CMDC.Tool.Structured`); a tool with an output schema answers with `structuredContent` (checked
  against that schema by the runner) and the same JSON as text content.

  Validation failures and tool errors are tool *results* with `isError: true` (SEP-1303), so the
  model can read them; unknown tools and malformed requests are JSON-RPC errors.

      iex> state = CMDC.Tool.MCP.new([CMDC.Tool.Examples.Echo])
      iex> {[reply], _state} =
      ...>   CMDC.Tool.MCP.handle(%{"jsonrpc" => "2.0", "id" => 1, "method" => "ping"}, state)
      iex> reply
      %{"jsonrpc" => "2.0", "id" => 1, "result" => %{}}
  """

  alias CMDC.Tool.MCP.Protocol

  defstruct tools: [],
            page_size: 50,
            initialized?: false,
            version: nil,
            server_name: "cmdc_tool",
            list_changed: false

  @type t :: %__MODULE__{}

  @typedoc """
  What `handle/2` asks the server to do besides replying: start a tool call (the server runs it,
  streams progress and replies when it ends) or cancel one.
  """
  @type effect ::
          {:call, id :: term(), module(), args :: map(), progress_token :: term() | nil}
          | {:cancel, id :: term()}

  @doc """
  A protocol state serving `tools` (a list of tool modules). Options: `:page_size`,
  `:server_name`, `:list_changed` (the server will send `notifications/tools/list_changed`).
  """
  @spec new([module()], keyword()) :: t()
  def new(tools, opts \\ []) do
    CMDC.Tool.Options.check!(
      opts,
      [:page_size, :server_name, :list_changed],
      "CMDC.Tool.MCP.new/2"
    )

    struct!(__MODULE__, Keyword.put(opts, :tools, tools))
  end

  @doc "The protocol versions this server speaks, newest first."
  defdelegate versions, to: Protocol

  @doc """
  Handles one decoded message. Returns `{outgoing, state}` where `outgoing` holds JSON-RPC
  messages to write and effects (`t:effect/0`) for the server.
  """
  @spec handle(term(), t()) :: {[map() | effect()], t()}
  def handle(%{"jsonrpc" => "2.0", "method" => method} = msg, state) when is_binary(method) do
    case Map.fetch(msg, "id") do
      {:ok, id} when is_binary(id) or is_integer(id) -> request(method, id, params(msg), state)
      {:ok, id} -> {[error(id, :invalid_request, "id must be a string or an integer")], state}
      :error -> notification(method, params(msg), state)
    end
  end

  def handle(%{"jsonrpc" => "2.0", "id" => _id} = msg, state)
      when is_map_key(msg, "result") or is_map_key(msg, "error") do
    # Replies to requests this server never sends: ignore.
    {[], state}
  end

  def handle(list, state) when is_list(list) do
    {[error(nil, :invalid_request, "batches are not supported (removed in MCP 2025-06-18)")],
     state}
  end

  def handle(msg, state) do
    {[error(id_of(msg), :invalid_request, "not a JSON-RPC 2.0 request")], state}
  end

  @doc "The reply for a line that is not JSON."
  def parse_error(message), do: error(nil, :parse_error, "Parse error: " <> message)

  defp params(msg) do
    case msg["params"] do
      %{} = params -> params
      _ -> %{}
    end
  end

  defp id_of(%{"id" => id}) when is_binary(id) or is_integer(id), do: id
  defp id_of(_), do: nil

  @methods ~w(initialize ping tools/list tools/call)

  defp request("initialize", id, params, state) do
    version = Protocol.negotiate(params["protocolVersion"])
    tools = if state.list_changed, do: %{"listChanged" => true}, else: %{}

    result = %{
      "protocolVersion" => version,
      "capabilities" => %{"tools" => tools},
      "serverInfo" => %{"name" => state.server_name, "version" => version()}
    }

    {[reply(id, result)], %{state | version: version}}
  end

  defp request("ping", id, _params, state), do: {[reply(id, %{})], state}

  # Known methods wait for initialize; unknown ones stay "not found" (clients probe with them).
  defp request(method, id, _params, %{version: nil} = state) when method in @methods do
    message = "Server not initialized: send initialize before #{method}"
    {[error(id, :invalid_request, message)], state}
  end

  defp request("tools/list", id, params, state) do
    tools = state.tools

    with {:ok, offset} <- decode_cursor(params["cursor"], length(tools)) do
      page = tools |> Enum.drop(offset) |> Enum.take(state.page_size)
      next = offset + length(page)

      result =
        %{"tools" => Enum.map(page, &describe/1)}
        |> put_if(next < length(tools), "nextCursor", encode_cursor(next))

      {[reply(id, result)], state}
    else
      :error -> {[error(id, :invalid_params, "invalid cursor")], state}
    end
  end

  defp request("tools/call", id, params, state) do
    name = params["name"]
    args = Map.get(params, "arguments", %{})
    token = get_in(params, ["_meta", "progressToken"])

    cond do
      not is_binary(name) ->
        {[error(id, :invalid_params, "tools/call needs a tool name")], state}

      not is_map(args) ->
        {[error(id, :invalid_params, "arguments must be an object")], state}

      true ->
        case CMDC.Tool.find(state.tools, name) do
          {:ok, module} ->
            {[{:call, id, module, args, token}], state}

          {:error, :not_found} ->
            {[error(id, :invalid_params, CMDC.Tool.unknown_tool_message(state.tools, name))],
             state}
        end
    end
  end

  defp request(method, id, _params, state) do
    {[error(id, :method_not_found, "Method not found: #{method}")], state}
  end

  defp notification("notifications/initialized", _params, state),
    do: {[], %{state | initialized?: true}}

  defp notification("notifications/cancelled", %{"requestId" => id}, state),
    do: {[{:cancel, id}], state}

  defp notification(_method, _params, state), do: {[], state}

  @doc "A tool's entry in `tools/list` (with `title`, `annotations`, `outputSchema` when set)."
  @spec describe(module()) :: map()
  def describe(module) do
    %{
      "name" => module.name(),
      "description" => CMDC.Tool.description(module),
      "inputSchema" => module.parameters()
    }
    |> Map.merge(CMDC.Tool.Structured.mcp_fields(module))
  end

  @doc "A `tools/call` result from a `CMDC.Tool.Result` (or a tool's own result tuple)."
  @spec call_result(CMDC.Tool.Result.t() | CMDC.Tool.result() | {:invalid, String.t()}) :: map()
  def call_result(%CMDC.Tool.Result{effect: effect}) when effect != nil,
    do: call_result({:effect, effect})

  def call_result(%CMDC.Tool.Result{structured: %{} = structured, content: text}),
    do: Map.put(text_result(text || "", false), "structuredContent", structured)

  def call_result(%CMDC.Tool.Result{content: text, is_error: error?}),
    do: text_result(text || "", error?)

  def call_result({:ok, text}), do: text_result(text, false)
  def call_result({:error, text}), do: text_result(text, true)
  def call_result({:invalid, text}), do: text_result(text, true)

  def call_result({:effect, term}) do
    case CMDC.Tool.JSON.encode(term) do
      {:ok, json} -> text_result(json, false)
      {:error, _} -> text_result(inspect(term), false)
    end
  end

  defp text_result(text, error?) do
    %{"content" => [%{"type" => "text", "text" => to_string(text)}], "isError" => error?}
  end

  @doc "A `notifications/progress` message for a partial result."
  def progress(token, count, message) do
    Protocol.notification("notifications/progress", %{
      "progressToken" => token,
      "progress" => count,
      "message" => message
    })
  end

  @doc "The `notifications/tools/list_changed` message."
  def list_changed, do: Protocol.notification("notifications/tools/list_changed")

  @doc false
  defdelegate reply(id, result), to: Protocol

  @doc false
  defdelegate error(id, code, message), to: Protocol

  defp encode_cursor(offset), do: Base.url_encode64("o:#{offset}", padding: false)

  defp decode_cursor(nil, _total), do: {:ok, 0}

  defp decode_cursor(cursor, total) when is_binary(cursor) do
    with {:ok, "o:" <> digits} <- Base.url_decode64(cursor, padding: false),
         {offset, ""} when offset >= 0 and offset <= total <- Integer.parse(digits) do
      {:ok, offset}
    else
      _ -> :error
    end
  end

  defp decode_cursor(_, _), do: :error

  defp put_if(map, true, key, value), do: Map.put(map, key, value)
  defp put_if(map, false, _key, _value), do: map

  defp version, do: to_string(Application.spec(:cmdc_tool, :vsn) || "0.1.0")
end
