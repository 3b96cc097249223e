defmodule CMDC.Tool.MCP.Protocol do
  @moduledoc """
  What MCP servers and clients share: the protocol versions, JSON-RPC 2.0 messages and error
  codes, and the stdio framing (one JSON text per line, no embedded newlines).

  Two eras: `2026-07-28` ("modern") carries its version, client capabilities and client info
  in every request's `_meta` (`modern_versions/0`, `meta_key/1`); `2025-11-25` and `2025-06-18`
  (`versions/0`) negotiate once at `initialize`.

      iex> CMDC.Tool.MCP.Protocol.negotiate("2025-06-18")
      "2025-06-18"
      iex> CMDC.Tool.MCP.Protocol.negotiate("2024-11-05")
      "2025-11-25"
      iex> CMDC.Tool.MCP.Protocol.error(1, :method_not_found, "Method not found: x")
      %{"jsonrpc" => "2.0", "id" => 1, "error" => %{"code" => -32601, "message" => "Method not found: x"}}
  """

  @versions ["2025-11-25", "2025-06-18"]
  @modern_versions ["2026-07-28"]

  # JSON-RPC 2.0 error codes, and those MCP 2026-07-28 adds.
  @codes %{
    parse_error: -32_700,
    invalid_request: -32_600,
    method_not_found: -32_601,
    invalid_params: -32_602,
    internal_error: -32_603,
    header_mismatch: -32_020,
    missing_client_capability: -32_021,
    unsupported_version: -32_022
  }

  @type message :: map()
  @type code ::
          :parse_error
          | :invalid_request
          | :method_not_found
          | :invalid_params
          | :internal_error
          | :header_mismatch
          | :missing_client_capability
          | :unsupported_version
          | integer()

  @doc "The handshake-era protocol versions spoken here (negotiated at `initialize`), newest first."
  @spec versions() :: [String.t()]
  def versions, do: @versions

  @doc """
  The modern protocol versions spoken here (version per request, no `initialize`).

      iex> CMDC.Tool.MCP.Protocol.modern_versions()
      ["2026-07-28"]
  """
  @spec modern_versions() :: [String.t()]
  def modern_versions, do: @modern_versions

  @doc "Every version spoken here, modern first: what an unsupported-version error lists."
  @spec all_versions() :: [String.t()]
  def all_versions, do: @modern_versions ++ @versions

  @doc """
  The full `_meta` key of a modern per-request field.

      iex> CMDC.Tool.MCP.Protocol.meta_key(:protocol_version)
      "io.modelcontextprotocol/protocolVersion"
  """
  @spec meta_key(
          :protocol_version
          | :client_capabilities
          | :client_info
          | :server_info
          | :subscription_id
        ) ::
          String.t()
  def meta_key(:protocol_version), do: "io.modelcontextprotocol/protocolVersion"
  def meta_key(:client_capabilities), do: "io.modelcontextprotocol/clientCapabilities"
  def meta_key(:client_info), do: "io.modelcontextprotocol/clientInfo"
  def meta_key(:server_info), do: "io.modelcontextprotocol/serverInfo"
  def meta_key(:subscription_id), do: "io.modelcontextprotocol/subscriptionId"

  @doc "The newest protocol version."
  @spec latest() :: String.t()
  def latest, do: hd(@versions)

  @doc """
  The version to answer a peer that asked for `requested`: that one when it is spoken here, else
  the newest (the specification's rule; the peer then decides whether to go on).
  """
  @spec negotiate(term()) :: String.t()
  def negotiate(requested), do: if(requested in @versions, do: requested, else: latest())

  @doc "The integer of an error code name (`:parse_error`, `:invalid_request`, ...)."
  @spec code(code()) :: integer()
  def code(code) when is_integer(code), do: code
  def code(name), do: Map.fetch!(@codes, name)

  @doc "A request."
  @spec request(String.t() | integer(), String.t(), map() | nil) :: message()
  def request(id, method, params \\ nil),
    do: put_params(%{"jsonrpc" => "2.0", "id" => id, "method" => method}, params)

  @doc "A notification (no id, no answer)."
  @spec notification(String.t(), map() | nil) :: message()
  def notification(method, params \\ nil),
    do: put_params(%{"jsonrpc" => "2.0", "method" => method}, params)

  @doc "A successful response."
  @spec reply(term(), term()) :: message()
  def reply(id, result), do: %{"jsonrpc" => "2.0", "id" => id, "result" => result}

  @doc "An error response (with the error's `data` when given)."
  @spec error(term(), code(), String.t(), term()) :: message()
  def error(id, code, message, data \\ nil) do
    error = %{"code" => code(code), "message" => message}
    error = if data == nil, do: error, else: Map.put(error, "data", data)
    %{"jsonrpc" => "2.0", "id" => id, "error" => error}
  end

  @doc """
  The HTTP status for a reply on the modern Streamable HTTP transport: 400 for malformed
  requests and the modern-era errors, 404 for an unknown method, 200 otherwise.

      iex> CMDC.Tool.MCP.Protocol.http_status(%{"error" => %{"code" => -32022}})
      400
  """
  @spec http_status(message()) :: 200 | 400 | 404
  def http_status(%{"error" => %{"code" => -32_601}}), do: 404

  def http_status(%{"error" => %{"code" => code}})
      when code in [-32_700, -32_600, -32_602, -32_020, -32_021, -32_022],
      do: 400

  def http_status(_), do: 200

  defp put_params(msg, nil), do: msg
  defp put_params(msg, params), do: Map.put(msg, "params", params)

  @doc """
  One message as a stdio frame: its JSON text and a newline. A message that cannot be encoded
  becomes an internal-error response to the same id, so the peer is never left waiting.

      iex> CMDC.Tool.MCP.Protocol.encode_frame(%{"jsonrpc" => "2.0", "method" => "x"}) |> IO.iodata_to_binary()
      ~s({"jsonrpc":"2.0","method":"x"}\\n)
  """
  @spec encode_frame(message()) :: iodata()
  def encode_frame(msg) do
    case CMDC.Tool.JSON.encode(msg) do
      {:ok, json} ->
        [json, ?\n]

      {:error, reason} ->
        fallback = error(msg["id"], :internal_error, "Internal error: #{reason}")
        [CMDC.Tool.JSON.encode!(fallback), ?\n]
    end
  end

  @doc """
  Decodes one received line: `{:ok, message}`, `:empty` for a blank line, or
  `{:error, parse_error_response}` ready to send back.
  """
  @spec decode_frame(binary()) :: {:ok, term()} | :empty | {:error, message()}
  def decode_frame(line) do
    case String.trim(line) do
      "" ->
        :empty

      text ->
        case CMDC.Tool.JSON.decode(text) do
          {:ok, msg} -> {:ok, msg}
          {:error, reason} -> {:error, error(nil, :parse_error, "Parse error: " <> reason)}
        end
    end
  end
end
