defmodule CMDC.Tool.MCP do
  @moduledoc """
  The Model Context Protocol, server side, as pure functions: one JSON-RPC message in, the
  replies and effects out. Transports run it: `CMDC.Tool.MCP.Server` over stdio,
  `CMDC.Tool.MCP.HTTP` over Streamable HTTP; both run the effects (tool calls, cancellations,
  subscriptions) the same way.

  ## Two eras, one server

  * **`2026-07-28`** (modern, stateless): every request carries its protocol version and client
    capabilities in `params._meta` (checked by `CMDC.Tool.MCP.Envelope`, which also checks the
    HTTP headers against the body). Served: `server/discover`, `tools/list`, `tools/call`,
    `subscriptions/listen`. Every result has `resultType: "complete"` and the server's identity
    in `_meta`; `tools/list` and `server/discover` say how long they may be cached (`ttlMs`,
    `cacheScope`). `ping` is gone in that revision (Method not found).
  * **`2025-11-25` and `2025-06-18`** (handshake era): negotiated at `initialize` (a client
    asking for another version gets the newest one; see `CMDC.Tool.MCP.Protocol`); then
    `ping`, `tools/list`, `tools/call`, `notifications/initialized`, `notifications/cancelled`.
    Requests other than `ping` before `initialize` get an Invalid Request error (-32600).

  A server answers both eras at once: modern requests never touch the session state.

  `tools/list` comes in tool-name order, pages with an opaque cursor. The one place the list
  is read is `tools/1`: a server whose tool list varies per session changes it there.

  The server sends `notifications/progress` for partial results when the request has a
  `progressToken`, and `notifications/tools/list_changed` when started with
  `list_changed: true` (only then is `listChanged` advertised): to an `initialize` session, and
  on each `subscriptions/listen` stream that asked for `toolsListChanged`.

  Tools list their optional `title`, `annotations` and `outputSchema` (see
  `CMDC.Tool.Structured`); a tool with an output schema answers with `structuredContent` (checked
  against that schema by the runner) and the same JSON as text content.

  Validation failures and tool errors are tool *results* with `isError: true` (SEP-1303), so the
  model can read them; unknown tools and malformed requests are JSON-RPC errors.

  ## Why results are always `complete` and -32021 is never sent

  In 2026-07-28 a server that needs something from the client during a request (a user's
  answer, `elicitation/create`; a completion, `sampling/createMessage`; `roots/list`) answers
  `resultType: "input_required"` with those requests and a `requestState`, and the client
  retries with `inputResponses` (multi round-trip requests); a server that would need a
  capability the request's `clientCapabilities` does not declare MUST answer
  MissingRequiredClientCapability (-32021, HTTP 400, `data.requiredCapabilities`). This server
  never asks the client for anything: whether a tool may run is the server's own settings
  (`--allow`, the tool's policy, hooks; see `CMDC.Tool.Runner`), so no request needs a client
  capability and every result is `complete`. A call that needs approval which nobody gave is
  refused as a tool result with `isError: true` naming how to allow it, whatever the client
  declares; `inputResponses` and `requestState` a client sends anyway are ignored (this server
  issues no state, so none is trusted). Tested in `test/cmdc/tool/mcp/input_required_test.exs`
  (also with the official Python client's elicitation and sampling callbacks, never called).

      iex> state = CMDC.Tool.MCP.new([CMDC.Tool.Examples.Echo])
      iex> {[reply], _state} =
      ...>   CMDC.Tool.MCP.handle(%{"jsonrpc" => "2.0", "id" => 1, "method" => "ping"}, state)
      iex> reply
      %{"jsonrpc" => "2.0", "id" => 1, "result" => %{}}
  """

  alias CMDC.Tool.MCP.{Envelope, Protocol}

  defstruct tools: [],
            page_size: 50,
            initialized?: false,
            version: nil,
            server_name: "cmdc_tool",
            list_changed: false,
            list_ttl_ms: 60_000

  @type t :: %__MODULE__{}

  @typedoc """
  A tool call to run: `modern` says which era's result to build (`call_reply/3`).
  """
  @type call :: %{
          id: String.t() | integer(),
          module: module(),
          arguments: map(),
          progress_token: term() | nil,
          modern: boolean()
        }

  @typedoc """
  What `handle/3` asks the transport to do besides replying: run a tool call (the transport
  streams its progress and replies with `call_reply/3` when it ends), cancel a call or a
  subscription, or keep a `subscriptions/listen` stream open (`filter` is what the server
  acknowledged).
  """
  @type effect ::
          {:call, call()}
          | {:cancel, id :: term()}
          | {:listen, id :: term(), filter :: map()}

  @doc """
  A protocol state serving `tools` (a list of tool modules). Options: `:page_size`,
  `:server_name`, `:list_changed` (the server will send `notifications/tools/list_changed`),
  `:list_ttl_ms` (how long a modern client may cache `tools/list`; default 60,000).
  """
  @spec new([module()], keyword()) :: t()
  def new(tools, opts \\ []) do
    CMDC.Tool.Options.check!(
      opts,
      [:page_size, :server_name, :list_changed, :list_ttl_ms],
      "CMDC.Tool.MCP.new/2"
    )

    __MODULE__ |> struct!(opts) |> put_tools(tools)
  end

  @doc "Serves a new tool list (kept in tool-name order: `tools/list` is deterministic)."
  @spec put_tools(t(), [module()]) :: t()
  def put_tools(state, tools), do: %{state | tools: Enum.sort_by(tools, & &1.name())}

  @doc """
  The tools this state serves. The single place the list is read, so that a server whose list
  varies per session (a catalog with a search tool) has one function to change.
  """
  @spec tools(t()) :: [module()]
  def tools(%__MODULE__{tools: tools}), do: tools

  @doc "The handshake-era protocol versions this server speaks, newest first."
  defdelegate versions, to: Protocol

  @doc """
  Handles one decoded message. Returns `{outgoing, state}` where `outgoing` holds JSON-RPC
  messages to write and effects (`t:effect/0`) for the transport. `headers` (lower-case names)
  are the HTTP request's, checked against the body on modern requests; `nil` off HTTP.
  """
  @spec handle(term(), t(), Envelope.headers()) :: {[map() | effect()], t()}
  def handle(msg, state, headers \\ nil)

  def handle(%{"jsonrpc" => "2.0", "method" => method} = msg, state, headers)
      when is_binary(method) do
    case Map.fetch(msg, "id") do
      {:ok, id} when is_binary(id) or is_integer(id) ->
        request(method, id, params(msg), state, headers)

      {:ok, id} ->
        {[error(id, :invalid_request, "id must be a string or an integer")], state}

      :error ->
        notification(method, params(msg), state)
    end
  end

  def handle(%{"jsonrpc" => "2.0", "id" => _id} = msg, state, _headers)
      when is_map_key(msg, "result") or is_map_key(msg, "error") do
    # Replies to requests this server never sends: ignore.
    {[], state}
  end

  def handle(list, state, _headers) when is_list(list) do
    {[error(nil, :invalid_request, "batches are not supported (removed in MCP 2025-06-18)")],
     state}
  end

  def handle(msg, state, _headers) do
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

  defp request(method, id, params, state, headers) do
    case Envelope.era(method, params, headers) do
      :legacy ->
        legacy(method, id, params, state)

      :modern ->
        case Envelope.check(method, params, headers) do
          {:ok, _envelope} -> {modern(method, id, params, state, headers), state}
          {:error, code, message, data} -> {[error(id, code, message, data)], state}
        end
    end
  end

  # --- 2026-07-28: stateless, every answer from the request alone -------------------------

  defp modern("server/discover", id, _params, state, _headers) do
    # The server's identity travels in `_meta` (complete/2), as on every modern result.
    result = %{
      "supportedVersions" => Protocol.modern_versions(),
      "capabilities" => capabilities(state)
    }

    [reply(id, result |> complete(state) |> cacheable(state))]
  end

  defp modern("tools/list", id, params, state, _headers) do
    case list(params, state) do
      {:ok, result} -> [reply(id, result |> complete(state) |> cacheable(state))]
      :error -> [error(id, :invalid_params, "invalid cursor")]
    end
  end

  defp modern("tools/call", id, params, state, headers) do
    case call(id, params, state, true, headers) do
      {:ok, call} -> [{:call, call}]
      {:error, reply} -> [reply]
    end
  end

  defp modern("subscriptions/listen", id, params, state, _headers) do
    asked = if is_map(params["notifications"]), do: params["notifications"], else: %{}

    honored =
      if state.list_changed and asked["toolsListChanged"] == true,
        do: %{"toolsListChanged" => true},
        else: %{}

    ack =
      Protocol.notification("notifications/subscriptions/acknowledged", %{
        "_meta" => %{Protocol.meta_key(:subscription_id) => id},
        "notifications" => honored
      })

    [ack, {:listen, id, honored}]
  end

  defp modern(method, id, _params, _state, _headers) do
    [error(id, :method_not_found, "Method not found: #{method} (MCP 2026-07-28)")]
  end

  defp complete(result, state) do
    Map.merge(result, %{
      "resultType" => "complete",
      "_meta" => %{Protocol.meta_key(:server_info) => server_info(state)}
    })
  end

  # The list may differ per server process (--watch, other tool folders): private to the
  # client; under --watch a subscription announces changes, so the TTL still holds.
  defp cacheable(result, state),
    do: Map.merge(result, %{"ttlMs" => state.list_ttl_ms, "cacheScope" => "private"})

  defp server_info(state), do: %{"name" => state.server_name, "version" => version()}

  defp capabilities(state) do
    tools = if state.list_changed, do: %{"listChanged" => true}, else: %{}
    %{"tools" => tools}
  end

  # --- 2025-11-25 / 2025-06-18: the initialize session ------------------------------------

  @methods ~w(initialize ping tools/list tools/call)

  defp legacy("initialize", id, params, state) do
    version = Protocol.negotiate(params["protocolVersion"])

    result = %{
      "protocolVersion" => version,
      "capabilities" => capabilities(state),
      "serverInfo" => server_info(state)
    }

    {[reply(id, result)], %{state | version: version}}
  end

  defp legacy("ping", id, _params, state), do: {[reply(id, %{})], state}

  # Known methods wait for initialize; unknown ones stay "not found" (clients probe with them).
  defp legacy(method, id, _params, %{version: nil} = state) when method in @methods do
    message =
      "Server not initialized: send initialize before #{method}, " <>
        "or put the MCP 2026-07-28 fields in params._meta"

    {[error(id, :invalid_request, message)], state}
  end

  defp legacy("tools/list", id, params, state) do
    case list(params, state) do
      {:ok, result} -> {[reply(id, result)], state}
      :error -> {[error(id, :invalid_params, "invalid cursor")], state}
    end
  end

  defp legacy("tools/call", id, params, state) do
    case call(id, params, state, false) do
      {:ok, call} -> {[{:call, call}], state}
      {:error, reply} -> {[reply], state}
    end
  end

  defp legacy(method, id, _params, state) do
    {[error(id, :method_not_found, "Method not found: #{method}")], state}
  end

  # --- what both eras share --------------------------------------------------------------

  defp list(params, state) do
    tools = tools(state)

    with {:ok, offset} <- decode_cursor(params["cursor"], length(tools)) do
      page = tools |> Enum.drop(offset) |> Enum.take(state.page_size)
      next = offset + length(page)

      {:ok,
       %{"tools" => Enum.map(page, &describe/1)}
       |> put_if(next < length(tools), "nextCursor", encode_cursor(next))}
    end
  end

  defp call(id, params, state, modern, headers \\ nil) do
    name = params["name"]
    args = Map.get(params, "arguments", %{})

    cond do
      not is_binary(name) ->
        {:error, error(id, :invalid_params, "tools/call needs a tool name")}

      not is_map(args) ->
        {:error, error(id, :invalid_params, "arguments must be an object")}

      true ->
        case lookup(tools(state), name, params["namespace"]) do
          {:ok, module} ->
            token = get_in(params, ["_meta", "progressToken"])

            call = %{
              id: id,
              module: module,
              arguments: args,
              progress_token: token,
              modern: modern
            }

            param_headers(call, headers)

          {:error, message} ->
            {:error, error(id, :invalid_params, message)}
        end
    end
  end

  # A call relayed with a namespace (an OpenAI Responses `function_call`): the runner's rule,
  # the namespace must hold the tool (`CMDC.Tool.Deferred.Namespaces.resolve/4`).
  defp lookup(tools, name, ns) when is_binary(ns) and ns != "" do
    case CMDC.Tool.Deferred.Namespaces.resolve(tools, ns, name) do
      {:ok, registered} -> lookup(tools, registered, nil)
      :error -> {:error, CMDC.Tool.Deferred.Namespaces.unknown(tools, ns, name)}
    end
  end

  defp lookup(tools, name, _ns) do
    case CMDC.Tool.find(tools, name) do
      {:ok, module} -> {:ok, module}
      {:error, :not_found} -> {:error, CMDC.Tool.unknown_tool_message(tools, name)}
    end
  end

  # Modern HTTP requests mirror x-mcp-header arguments into Mcp-Param-* headers.
  defp param_headers(%{modern: true} = call, headers) when is_map(headers) do
    case Envelope.check_params(call.module.parameters(), call.arguments, headers) do
      :ok -> {:ok, call}
      {:error, code, message, data} -> {:error, error(call.id, code, message, data)}
    end
  end

  defp param_headers(call, _headers), do: {:ok, call}

  defp notification("notifications/initialized", _params, state),
    do: {[], %{state | initialized?: true}}

  defp notification("notifications/cancelled", %{"requestId" => id}, state),
    do: {[{:cancel, id}], state}

  defp notification(_method, _params, state), do: {[], state}

  @doc """
  A tool's entry in `tools/list`: its entry of `CMDC.Tool.to_schema/3`'s `format: :mcp` (so
  what `mix cmdc.tools schema --format mcp` prints is what a client gets: the description's
  `Examples:` block, `title`, `annotations`, `outputSchema` when set).

      iex> CMDC.Tool.MCP.describe(CMDC.Tool.Examples.Echo)["inputSchema"]["required"]
      ["text"]
  """
  @spec describe(module()) :: map()
  def describe(module) do
    {[entry], _warnings} = CMDC.Tool.Providers.convert([module], %{}, format: :mcp)
    entry
  end

  @doc """
  The response to a finished call: its result in the call's era (modern results carry
  `resultType` and the server's identity).
  """
  @spec call_reply(t(), call(), CMDC.Tool.Result.t() | CMDC.Tool.result()) :: map()
  def call_reply(state, %{id: id, modern: true}, result),
    do: reply(id, complete(call_result(result), state))

  def call_reply(_state, %{id: id}, result), do: reply(id, call_result(result))

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

  @doc """
  The `notifications/tools/list_changed` message: for an `initialize` session, or (with the
  `subscriptions/listen` request's id) on that subscription's stream.
  """
  @spec list_changed(term()) :: map()
  def list_changed(subscription \\ nil)
  def list_changed(nil), do: Protocol.notification("notifications/tools/list_changed")

  def list_changed(subscription) do
    Protocol.notification("notifications/tools/list_changed", %{
      "_meta" => %{Protocol.meta_key(:subscription_id) => subscription}
    })
  end

  @doc false
  defdelegate reply(id, result), to: Protocol

  @doc false
  defdelegate error(id, code, message, data \\ nil), to: Protocol

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

  # Read once at compile time: every modern result carries it, and Application.spec/2 asks the
  # application controller's table each time (~7 µs).
  @version Mix.Project.config()[:version] || "0.1.0"
  defp version, do: @version
end
