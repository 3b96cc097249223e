defmodule CMDC.Tool.MCP.Envelope do
  @moduledoc """
  The MCP `2026-07-28` per-request envelope: which era a request belongs to, and the checks a
  modern request passes before it is served (in the order the official SDKs apply them, so a
  client gets the same error from every server):

    1. `params._meta` carries `io.modelcontextprotocol/protocolVersion` and
       `io.modelcontextprotocol/clientCapabilities` (else Invalid Params, -32602, naming the
       missing keys);
    2. on HTTP, the `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`) `Mcp-Name`
       headers equal the body's values (else HeaderMismatch, -32020);
    3. the version is one spoken here (else UnsupportedProtocolVersion, -32022, with `data`
       `%{"supported" => every version spoken here, "requested" => version}`: a dual-era client
       seeing a handshake version there falls back to `initialize`).

  Headers are a map of lower-case names to values, or `nil` off HTTP.

      iex> CMDC.Tool.MCP.Envelope.era("tools/list", %{}, nil)
      :legacy
      iex> meta = %{"io.modelcontextprotocol/protocolVersion" => "2026-07-28",
      ...>          "io.modelcontextprotocol/clientCapabilities" => %{}}
      iex> CMDC.Tool.MCP.Envelope.check("tools/list", %{"_meta" => meta}, nil)
      {:ok, %{version: "2026-07-28", client_info: nil, client_capabilities: %{}}}
  """

  alias CMDC.Tool.MCP.Protocol

  @type headers :: %{optional(String.t()) => String.t()} | nil
  @type envelope :: %{version: String.t(), client_info: term(), client_capabilities: term()}

  @doc """
  `:modern` when a request belongs to the per-request era: its `_meta` names a protocol
  version, it is `server/discover`, or its `MCP-Protocol-Version` header names no handshake
  version. `:legacy` otherwise (the request relies on an `initialize` session).
  """
  @spec era(String.t(), map(), headers()) :: :modern | :legacy
  def era("initialize", _params, _headers), do: :legacy
  def era("server/discover", _params, _headers), do: :modern

  def era(_method, %{"_meta" => %{} = meta}, _headers)
      when is_map_key(meta, "io.modelcontextprotocol/protocolVersion"),
      do: :modern

  def era(_method, _params, %{"mcp-protocol-version" => version}),
    do: if(version in Protocol.versions(), do: :legacy, else: :modern)

  def era(_method, _params, _headers), do: :legacy

  @doc """
  Runs the envelope checks on a modern request: `{:ok, envelope}` or
  `{:error, code, message, data}` ready for `CMDC.Tool.MCP.Protocol.error/4`.
  """
  @spec check(String.t(), map(), headers()) ::
          {:ok, envelope()} | {:error, Protocol.code(), String.t(), term()}
  def check(method, params, headers) do
    with {:ok, meta} <- meta(params),
         :ok <- check_headers(method, params, meta, headers),
         {:ok, version} <- version(meta) do
      {:ok,
       %{
         version: version,
         client_info: meta[Protocol.meta_key(:client_info)],
         client_capabilities: meta[Protocol.meta_key(:client_capabilities)]
       }}
    end
  end

  @required [:protocol_version, :client_capabilities]

  defp meta(%{"_meta" => %{} = meta}) do
    case for key <- @required, not Map.has_key?(meta, Protocol.meta_key(key)), do: key do
      [] ->
        {:ok, meta}

      missing ->
        keys = Enum.map_join(missing, ", ", &Protocol.meta_key/1)
        {:error, :invalid_params, "params._meta is missing the required key(s): #{keys}", nil}
    end
  end

  defp meta(_params) do
    keys = Enum.map_join(@required, " and ", &Protocol.meta_key/1)

    {:error, :invalid_params,
     "params._meta must be an object carrying #{keys} (MCP 2026-07-28), or send initialize first (2025-11-25)",
     nil}
  end

  defp check_headers(_method, _params, _meta, nil), do: :ok

  defp check_headers(method, params, meta, headers) do
    version = meta[Protocol.meta_key(:protocol_version)]

    cond do
      headers["mcp-protocol-version"] != version ->
        mismatch("MCP-Protocol-Version", headers["mcp-protocol-version"], version)

      headers["mcp-method"] != method ->
        mismatch("Mcp-Method", headers["mcp-method"], method)

      method == "tools/call" and is_binary(params["name"]) and
          decode_header(headers["mcp-name"]) != params["name"] ->
        mismatch("Mcp-Name", headers["mcp-name"], params["name"])

      true ->
        :ok
    end
  end

  defp mismatch(header, nil, body),
    do:
      {:error, :header_mismatch,
       "Header mismatch: #{header} header is missing (body: #{inspect(body)})", nil}

  defp mismatch(header, value, body) do
    {:error, :header_mismatch,
     "Header mismatch: #{header} header #{inspect(value)} does not match the body's #{inspect(body)}",
     nil}
  end

  defp version(meta) do
    case meta[Protocol.meta_key(:protocol_version)] do
      version when not is_binary(version) ->
        {:error, :invalid_params, "the protocol version in _meta must be a string", nil}

      version ->
        if version in Protocol.modern_versions() do
          {:ok, version}
        else
          data = %{"supported" => Protocol.all_versions(), "requested" => version}
          {:error, :unsupported_version, "Unsupported protocol version: #{version}", data}
        end
    end
  end

  @doc """
  Checks a `tools/call`'s `Mcp-Param-*` headers against its arguments, for the properties the
  tool's input schema marks with `x-mcp-header` (reached through `properties` only, as the
  specification allows): a value in the body needs its header, with the same value (integers
  compared as numbers); an absent or `null` value needs no header. `:ok` off HTTP, or
  `{:error, :header_mismatch, message, nil}`.

      iex> schema = %{"properties" => %{"region" => %{"type" => "string", "x-mcp-header" => "Region"}}}
      iex> CMDC.Tool.MCP.Envelope.check_params(schema, %{"region" => "eu"}, %{"mcp-param-region" => "eu"})
      :ok
      iex> {:error, :header_mismatch, message, nil} =
      ...>   CMDC.Tool.MCP.Envelope.check_params(schema, %{"region" => "eu"}, %{})
      iex> message
      ~s|Header mismatch: Mcp-Param-Region header is missing (body: "eu")|
  """
  @spec check_params(map(), map(), headers()) :: :ok | {:error, :header_mismatch, String.t(), nil}
  def check_params(_schema, _arguments, nil), do: :ok

  def check_params(schema, arguments, headers) do
    schema
    |> annotated([])
    |> Enum.find_value(:ok, fn {path, name, type} ->
      header = "Mcp-Param-" <> name
      value = get_in(arguments, path)
      given = decode_header(headers[String.downcase(header)])

      cond do
        value == nil and given == nil ->
          nil

        given == nil ->
          mismatch(header, nil, value)

        value == nil ->
          {:error, :header_mismatch,
           "Header mismatch: #{header} header sent, its argument absent", nil}

        same?(type, value, given) ->
          nil

        true ->
          mismatch(header, given, value)
      end
    end)
  end

  defp annotated(%{"properties" => %{} = properties}, path) do
    Enum.flat_map(properties, fn {key, sub} ->
      here =
        case sub do
          %{"x-mcp-header" => name} when is_binary(name) and name != "" ->
            [{path ++ [key], name, sub["type"]}]

          _ ->
            []
        end

      here ++ if(is_map(sub), do: annotated(sub, path ++ [key]), else: [])
    end)
  end

  defp annotated(_schema, _path), do: []

  defp same?("integer", value, given) when is_number(value) do
    case Integer.parse(given) do
      {int, ""} -> int == value
      {int, "." <> zeros} -> String.trim(zeros, "0") == "" and int == value
      _ -> false
    end
  end

  defp same?(_type, value, given) when is_boolean(value), do: to_string(value) == given
  defp same?(_type, value, given) when is_binary(value), do: value == given
  defp same?(_type, value, given) when is_integer(value), do: Integer.to_string(value) == given
  defp same?(_type, _value, _given), do: false

  @doc """
  A header value as MCP clients encode it: plain, or `=?base64?…?=` for values that are not
  plain ASCII. `nil` for a malformed encoding (it then matches no body value).

      iex> CMDC.Tool.MCP.Envelope.decode_header("=?base64?w6l0w6k=?=")
      "été"
  """
  @spec decode_header(String.t() | nil) :: String.t() | nil
  def decode_header("=?base64?" <> rest = value) do
    with true <- String.ends_with?(rest, "?="),
         {:ok, text} <- Base.decode64(binary_part(rest, 0, byte_size(rest) - 2)),
         true <- String.valid?(text) do
      text
    else
      _ -> if String.ends_with?(value, "?="), do: nil, else: value
    end
  end

  def decode_header(value), do: value
end
