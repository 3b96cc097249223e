defmodule CMDC.Tool.MCP.HTTP.Auth do
  @moduledoc """
  Who may call an MCP HTTP endpoint (`CMDC.Tool.MCP.HTTP`'s `:auth` option):

    * `nil` - anyone who reaches it (the default: it listens on loopback only);
    * `{:bearer, token}` or `{:bearer_file, path}` - requests carry `Authorization: Bearer
      token` (compared in constant time; at least 16 bytes);
    * `{:oauth, opts}` - an OAuth 2.1 resource server as MCP's authorization spec describes:
      `GET /.well-known/oauth-protected-resource<path>` serves RFC 9728 metadata naming the
      `:authorization_servers`; every token is checked by RFC 7662 introspection at
      `:introspection_url` (with `:client_id`/`:client_secret` as HTTP Basic when given) and must
      be `active`, unexpired (an integer `exp` in the future), and issued for this server: its
      `aud` names `:resource` (the endpoint's URL by default). An `https` introspection endpoint
      is verified against the system's trust store, or `:ca_file`; `verify: :verify_none`
      must be written out; the answer is bounded by `:max_answer_bytes` (64 kB) and `:timeout`
      (5 s) (`CMDC.Tool.MCP.HTTP.Introspection`). `:clock` (a function returning the Unix time
      in ms) is the time the checks and the cache read, for tests. Active answers are kept for `:cache_ms` (60 s; 0 = off) or
      until the token's `exp`, at most `:cache_size` (10,000) of them
      (`CMDC.Tool.MCP.HTTP.IntrospectionCache`: why inactive answers are not kept).

  A request without a valid token gets 401 with `WWW-Authenticate: Bearer
  resource_metadata="…"` (OAuth) so the client can find its authorization server;
  `error="invalid_token"` when a token was sent but refused.
  """

  alias CMDC.Tool.MCP.HTTP.{Introspection, IntrospectionCache}

  @oauth_opts [
    :introspection_url,
    :authorization_servers,
    :resource,
    :client_id,
    :client_secret,
    :scopes,
    :cache_ms,
    :cache_size,
    :ca_file,
    :verify,
    :max_answer_bytes,
    :timeout,
    :clock
  ]

  @type t :: :none | {:bearer, binary()} | {:oauth, map()}

  @doc "Checks an `:auth` option: `{:ok, auth}` or `{:error, message}`."
  @spec new(term()) :: {:ok, t()} | {:error, String.t()}
  def new(nil), do: {:ok, :none}

  def new({:bearer, token}) when is_binary(token) and byte_size(token) >= 16,
    do: {:ok, {:bearer, token}}

  def new({:bearer, _}), do: {:error, "a bearer token needs at least 16 bytes"}

  def new({:bearer_file, path}) do
    case File.read(path) do
      {:ok, text} ->
        new({:bearer, String.trim(text)})

      {:error, reason} ->
        {:error, "cannot read the token file #{path}: #{:file.format_error(reason)}"}
    end
  end

  def new({:oauth, opts}) when is_list(opts) or is_map(opts) do
    opts = Map.new(opts)

    case opts do
      %{introspection_url: "http" <> _} ->
        clock = Map.get(opts, :clock, &default_clock/0)

        with :ok <- known(opts),
             {:ok, cache} <- cache(opts, clock),
             {:ok, introspection} <- Introspection.new(opts) do
          {:ok,
           {:oauth,
            %{
              introspection: introspection,
              authorization_servers: Map.get(opts, :authorization_servers, []),
              resource: Map.get(opts, :resource),
              scopes: Map.get(opts, :scopes, []),
              cache: cache,
              clock: clock
            }}}
        end

      _ ->
        {:error, "OAuth needs :introspection_url (the authorization server's RFC 7662 endpoint)"}
    end
  end

  def new(other), do: {:error, "unknown :auth setting #{inspect(other)}"}

  # A misspelled option (`ca_fille:`) would silently fall back to a default: refused instead,
  # with the nearest known name.
  defp known(opts) do
    CMDC.Tool.Options.check!(opts, @oauth_opts, "{:oauth, opts}")
    :ok
  rescue
    e in ArgumentError -> {:error, Exception.message(e)}
  end

  defp default_clock, do: System.system_time(:millisecond)

  defp cache(opts, clock) do
    case {Map.get(opts, :cache_ms, 60_000), Map.get(opts, :cache_size, 10_000)} do
      {ms, size} when is_integer(ms) and ms >= 0 and is_integer(size) and size > 0 ->
        {:ok, IntrospectionCache.new(ms, size, clock)}

      {ms, size} ->
        {:error,
         "OAuth :cache_ms must be an integer >= 0 and :cache_size one > 0 " <>
           "(got #{inspect(ms)} and #{inspect(size)})"}
    end
  end

  @doc "Sets the resource (audience) a token must be issued for, unless configured."
  @spec put_resource(t(), String.t()) :: t()
  def put_resource({:oauth, %{resource: nil} = oauth}, url),
    do: {:oauth, %{oauth | resource: url}}

  def put_resource(auth, _url), do: auth

  @doc "The RFC 9728 metadata document's path for an endpoint path (`nil` without OAuth)."
  @spec metadata_path(t(), String.t()) :: String.t() | nil
  def metadata_path({:oauth, _}, path), do: "/.well-known/oauth-protected-resource" <> path
  def metadata_path(_auth, _path), do: nil

  @doc "The RFC 9728 protected-resource metadata."
  @spec metadata(t()) :: map()
  def metadata({:oauth, oauth}) do
    %{
      "resource" => oauth.resource,
      "authorization_servers" => oauth.authorization_servers,
      "bearer_methods_supported" => ["header"],
      "scopes_supported" => oauth.scopes
    }
  end

  @doc """
  Checks a request's `authorization` header. `:ok`, or `{:error, www_authenticate, message}`
  for a 401. `metadata_url` is where the metadata document is served.
  """
  @spec check(t(), map(), String.t() | nil) :: :ok | {:error, String.t(), String.t()}
  def check(:none, _headers, _metadata_url), do: :ok

  def check(auth, headers, metadata_url) do
    case bearer(headers["authorization"]) do
      nil ->
        {:error, challenge(auth, metadata_url, nil),
         "authentication required: send Authorization: Bearer <token>"}

      token ->
        case verify(auth, token) do
          :ok -> :ok
          {:error, why} -> {:error, challenge(auth, metadata_url, why), "invalid token: #{why}"}
        end
    end
  end

  defp bearer("Bearer " <> token), do: String.trim(token)
  defp bearer("bearer " <> token), do: String.trim(token)
  defp bearer(_), do: nil

  defp challenge(auth, metadata_url, why) do
    base =
      case auth do
        {:oauth, _} -> ~s(Bearer resource_metadata="#{metadata_url}")
        _ -> ~s(Bearer realm="mcp")
      end

    if why, do: base <> ~s(, error="invalid_token", error_description="#{why}"), else: base
  end

  defp verify({:bearer, expected}, token) do
    if secure_equal?(token, expected), do: :ok, else: {:error, "the token is not this server's"}
  end

  defp verify({:oauth, oauth}, token) do
    with {:ok, claims} <- claims(oauth, token) do
      Introspection.verdict(claims, oauth.resource, div(oauth.clock.(), 1000))
    end
  end

  defp secure_equal?(a, b) when byte_size(a) == byte_size(b) do
    :crypto.hash_equals(a, b)
  end

  defp secure_equal?(_, _), do: false

  defp claims(oauth, token) do
    case IntrospectionCache.fetch(oauth.cache, token) do
      {:ok, claims} ->
        {:ok, claims}

      :miss ->
        with {:ok, claims} <- Introspection.introspect(oauth.introspection, token) do
          IntrospectionCache.put(oauth.cache, token, claims)
          {:ok, claims}
        end
    end
  end
end
