defmodule CMDC.Tool.MCP.Protocol do
  @moduledoc """
  What MCP servers and clients share: the protocol versions, JSON-RPC 2.0 messages and error
  codes, and the stdio framing (one JSON text per line, no embedded newlines).

      iex> CMDC.Tool.MCP.Protocol.negotiate("2025-06-18")
      "2025-06-18"
      iex> CMDC.Tool.MCP.Protocol.negotiate("2024-11-05")
      "2025-11-25"
      iex> CMDC.Tool.MCP.Protocol.error(1, :method_not_found, "Method not found: x")
      %{"jsonrpc" => "2.0", "id" => 1, "error" => %{"code" => -32601, "message" => "Method not found: x"}}
  """

  @versions ["2025-11-25", "2025-06-18"]

  # JSON-RPC 2.0 error codes.
  @codes %{
    parse_error: -32_700,
    invalid_request: -32_600,
    method_not_found: -32_601,
    invalid_params: -32_602,
    internal_error: -32_603
  }

  @type message :: map()
  @type code :: :parse_error | :invalid_request | :method_not_found | :invalid_params | integer()

  @doc "The protocol versions spoken here, newest first."
  @spec versions() :: [String.t()]
  def versions, do: @versions

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

  @doc "An error response."
  @spec error(term(), code(), String.t()) :: message()
  def error(id, code, message) do
    %{"jsonrpc" => "2.0", "id" => id, "error" => %{"code" => code(code), "message" => message}}
  end

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
