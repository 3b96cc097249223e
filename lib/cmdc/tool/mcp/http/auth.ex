defmodule CMDC.Tool.MCP.HTTP.Auth do
  @moduledoc """
  Who may call an MCP HTTP endpoint (`CMDC.Tool.MCP.HTTP`'s `:auth` option):

    * `nil` - anyone who reaches it (the default: it listens on loopback only);
    * `{:bearer, token}` or `{:bearer_file, path}` - requests carry `Authorization: Bearer
      token` (the scheme name in any case, RFC 9110; compared in constant time; at least 16
      bytes). A token file others may read is refused, as ssh refuses such a key (`chmod 600`),
      and one its group may read is accepted with a warning;
    * `{:oauth, opts}` - an OAuth 2.1 resource server as MCP's authorization spec describes:
      `GET /.well-known/oauth-protected-resource<path>` serves RFC 9728 metadata naming the
      `:authorization_servers`; every token is checked by RFC 7662 introspection at
      `:introspection_url` (with `:client_id`/`:client_secret` as HTTP Basic when given) and must
      be `active`, unexpired, and issued for this server: its `aud` names `:resource` (the
      endpoint's URL by default). Active answers are kept for `:cache_ms` (60 s; 0 = off) or
      until the token's `exp`, at most `:cache_size` (10,000) of them
      (`CMDC.Tool.MCP.HTTP.IntrospectionCache`: why inactive answers are not kept).

  A request without a valid token gets 401 with `WWW-Authenticate: Bearer
  resource_metadata="…"` (OAuth) so the client can find its authorization server;
  `error="invalid_token"` when a token was sent but refused.
  """

  import Bitwise, only: [band: 2]

  require Logger

  alias CMDC.Tool.MCP.HTTP.IntrospectionCache

  @type t :: :none | {:bearer, binary()} | {:oauth, map()}

  @doc "Checks an `:auth` option: `{:ok, auth}` or `{:error, message}`."
  @spec new(term()) :: {:ok, t()} | {:error, String.t()}
  def new(nil), do: {:ok, :none}

  def new({:bearer, token}) when is_binary(token) and byte_size(token) >= 16,
    do: {:ok, {:bearer, token}}

  def new({:bearer, _}), do: {:error, "a bearer token needs at least 16 bytes"}

  def new({:bearer_file, path}) do
    with {:ok, %File.Stat{mode: mode}} <- File.stat(path),
         :ok <- private(path, mode),
         {:ok, text} <- File.read(path) do
      new({:bearer, String.trim(text)})
    else
      {:error, reason} when is_atom(reason) ->
        {:error, "cannot read the token file #{path}: #{:file.format_error(reason)}"}

      {:error, message} ->
        {:error, message}
    end
  end

  def new({:oauth, opts}) when is_list(opts) or is_map(opts) do
    opts = Map.new(opts)

    case opts do
      %{introspection_url: "http" <> _ = url} ->
        with {:ok, cache} <- cache(opts) do
          {:ok,
           {:oauth,
            %{
              introspection_url: url,
              authorization_servers: Map.get(opts, :authorization_servers, []),
              resource: Map.get(opts, :resource),
              client_id: Map.get(opts, :client_id),
              client_secret: Map.get(opts, :client_secret),
              scopes: Map.get(opts, :scopes, []),
              cache: cache
            }}}
        end

      _ ->
        {:error, "OAuth needs :introspection_url (the authorization server's RFC 7662 endpoint)"}
    end
  end

  def new(other), do: {:error, "unknown :auth setting #{inspect(other)}"}

  # Like ssh with its keys: a secret others can read is not one.
  defp private(path, mode) do
    cond do
      band(mode, 0o004) != 0 ->
        {:error,
         "the token file #{path} is readable by every user (mode #{mode_text(mode)}): " <>
           "run chmod 600 #{path}"}

      band(mode, 0o040) != 0 ->
        Logger.warning(
          "the token file #{path} is readable by its group (mode #{mode_text(mode)}): " <>
            "chmod 600 #{path} keeps it to its owner"
        )

        :ok

      true ->
        :ok
    end
  end

  defp mode_text(mode), do: "0" <> Integer.to_string(band(mode, 0o777), 8)

  defp cache(opts) do
    case {Map.get(opts, :cache_ms, 60_000), Map.get(opts, :cache_size, 10_000)} do
      {ms, size} when is_integer(ms) and ms >= 0 and is_integer(size) and size > 0 ->
        {:ok, IntrospectionCache.new(ms, size)}

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
  Checks a request's `authorization` header: `{:ok, principal}` (under OAuth the token's
  subject, `"sub:…"`, else `nil`: the caller names the client by its address), or
  `{:error, www_authenticate, message}` for a 401. `metadata_url` is where the metadata
  document is served.
  """
  @spec check(t(), map(), String.t() | nil) ::
          {:ok, String.t() | nil} | {:error, String.t(), String.t()}
  def check(:none, _headers, _metadata_url), do: {:ok, nil}

  def check(auth, headers, metadata_url) do
    case bearer(headers["authorization"]) do
      nil ->
        {:error, challenge(auth, metadata_url, nil),
         "authentication required: send Authorization: Bearer <token>"}

      token ->
        case verify(auth, token) do
          :ok -> {:ok, nil}
          {:ok, principal} -> {:ok, principal}
          {:error, why} -> {:error, challenge(auth, metadata_url, why), "invalid token: #{why}"}
        end
    end
  end

  # RFC 9110 §11.1: the scheme name is case-insensitive.
  defp bearer(header) when is_binary(header) do
    case String.split(String.trim_leading(header), " ", parts: 2) do
      [scheme, token] -> if String.downcase(scheme) == "bearer", do: non_empty(token)
      _ -> nil
    end
  end

  defp bearer(_), do: nil

  defp non_empty(token) do
    case String.trim(token) do
      "" -> nil
      token -> token
    end
  end

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
    with {:ok, claims} <- claims(oauth, token),
         :ok <- active(claims),
         :ok <- unexpired(claims),
         :ok <- audience(claims, oauth.resource) do
      {:ok, principal(claims, token)}
    end
  end

  # Who holds the token: its subject, else the client it was issued to, else the token itself
  # (hashed: never kept in clear beside the sessions).
  defp principal(%{"sub" => sub}, _token) when is_binary(sub) and sub != "", do: "sub:" <> sub

  defp principal(%{"client_id" => id}, _token) when is_binary(id) and id != "",
    do: "client:" <> id

  defp principal(_claims, token),
    do: "token:" <> Base.url_encode64(:crypto.hash(:sha256, token), padding: false)

  defp secure_equal?(a, b) when byte_size(a) == byte_size(b) do
    :crypto.hash_equals(a, b)
  end

  defp secure_equal?(_, _), do: false

  defp claims(oauth, token) do
    case IntrospectionCache.fetch(oauth.cache, token) do
      {:ok, claims} ->
        {:ok, claims}

      :miss ->
        with {:ok, claims} <- introspect(oauth, token) do
          IntrospectionCache.put(oauth.cache, token, claims)
          {:ok, claims}
        end
    end
  end

  # RFC 7662: POST token=... as a form; the answer is JSON with at least `active`.
  defp introspect(oauth, token) do
    body = URI.encode_query(%{"token" => token, "token_type_hint" => "access_token"})
    headers = basic(oauth) ++ [{~c"accept", ~c"application/json"}]

    request =
      {String.to_charlist(oauth.introspection_url), headers,
       ~c"application/x-www-form-urlencoded", body}

    case :httpc.request(:post, request, [timeout: 5_000, connect_timeout: 2_000],
           body_format: :binary
         ) do
      {:ok, {{_, 200, _}, _headers, json}} ->
        case CMDC.Tool.JSON.decode(json) do
          {:ok, %{} = claims} -> {:ok, claims}
          _ -> {:error, "the authorization server's introspection answer is not a JSON object"}
        end

      {:ok, {{_, status, _}, _, _}} ->
        {:error, "the authorization server's introspection answered HTTP #{status}"}

      {:error, reason} ->
        {:error, "the authorization server is unreachable (#{inspect(reason)})"}
    end
  end

  defp basic(%{client_id: id, client_secret: secret}) when is_binary(id) do
    [{~c"authorization", String.to_charlist("Basic " <> Base.encode64("#{id}:#{secret}"))}]
  end

  defp basic(_), do: []

  defp active(%{"active" => true}), do: :ok
  defp active(_), do: {:error, "the token is not active"}

  defp unexpired(%{"exp" => exp}) when is_integer(exp) do
    if exp > System.os_time(:second), do: :ok, else: {:error, "the token has expired"}
  end

  defp unexpired(_), do: :ok

  defp audience(claims, resource) do
    audiences = List.wrap(claims["aud"])

    if resource in audiences,
      do: :ok,
      else:
        {:error, "the token was not issued for #{resource} (aud: #{Enum.join(audiences, ", ")})"}
  end
end
