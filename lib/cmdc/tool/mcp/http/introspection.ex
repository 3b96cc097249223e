defmodule CMDC.Tool.MCP.HTTP.Introspection do
  @moduledoc """
  RFC 7662 token introspection for `CMDC.Tool.MCP.HTTP.Auth`'s OAuth mode: asks the
  authorization server about a token, and decides from its answer whether the token may call
  this server.

  The request goes through the native client (`CMDC.Tool.HTTP.Client`: hyper and rustls). An
  `https` introspection endpoint must prove who it is: its certificate is verified, with its
  host name, against the operating system's trust store, or against the CA certificates of
  `:ca_file` (a PEM file) instead. `verify: :verify_none` turns that off and must be written
  out (it logs a warning): without verification anyone on the path could answer `{"active":
  true}` for any token. The answer is bounded: at most `:max_answer_bytes` (64 kB) are read
  (a larger `content-length` is refused before its body is read, a longer body as soon as it
  is), within `:timeout` (5 s).

  A token is accepted only when the answer is a JSON object with `"active": true`, an `exp`
  that is an integer NumericDate in the future when there is one (a float, a string, anything
  else is an inactive token: RFC 7662 §2.2), and an `aud` (a string or a list of strings) that
  names the resource.

      iex> alias CMDC.Tool.MCP.HTTP.Introspection
      iex> now = 1_800_000_000
      iex> resource = "https://mcp.example/mcp"
      iex> Introspection.verdict(%{"active" => true, "aud" => resource, "exp" => now + 60}, resource, now)
      :ok
      iex> Introspection.verdict(%{"active" => true, "aud" => resource, "exp" => now + 60.0}, resource, now)
      {:error, "the token is not active (its exp is not an integer NumericDate)"}
      iex> Introspection.verdict(%{"active" => true, "aud" => [resource], "exp" => now}, resource, now)
      {:error, "the token has expired"}
  """

  alias CMDC.Tool.HTTP.Client
  alias CMDC.Tool.JSON

  @max_answer 65_536

  @type t :: %{
          url: String.t(),
          client: Client.t(),
          client_id: String.t() | nil,
          client_secret: String.t() | nil,
          max_answer_bytes: pos_integer(),
          timeout: pos_integer()
        }

  @doc """
  The introspection settings of `opts` (a map of `CMDC.Tool.MCP.HTTP.Auth`'s OAuth options:
  `:introspection_url`, `:client_id`, `:client_secret`, `:ca_file`, `:verify`,
  `:max_answer_bytes`, `:timeout`): `{:ok, t}` or `{:error, message}`.
  """
  @spec new(map()) :: {:ok, t()} | {:error, String.t()}
  def new(%{introspection_url: url} = opts) do
    with {:ok, max} <- positive(opts, :max_answer_bytes, @max_answer),
         {:ok, timeout} <- positive(opts, :timeout, 5_000),
         {:ok, client} <- client(opts) do
      {:ok,
       %{
         url: url,
         client: client,
         client_id: Map.get(opts, :client_id),
         client_secret: Map.get(opts, :client_secret),
         max_answer_bytes: max,
         timeout: timeout
       }}
    end
  end

  defp positive(opts, key, default) do
    case Map.get(opts, key, default) do
      n when is_integer(n) and n > 0 -> {:ok, n}
      other -> {:error, "OAuth #{inspect(key)} must be a positive integer, got #{inspect(other)}"}
    end
  end

  defp client(opts) do
    case Client.new(
           ca_file: Map.get(opts, :ca_file),
           verify: Map.get(opts, :verify, :verify_peer),
           max_idle: 4,
           connect_timeout: 2_000
         ) do
      {:ok, client} -> {:ok, client}
      {:error, message} -> {:error, "OAuth introspection: #{message}"}
    end
  end

  @doc """
  Asks the authorization server about `token`: `{:ok, claims}` (the answer's JSON object) or
  `{:error, why}` (the server unreachable or unverified, an error status, an answer over the
  bound or not a JSON object).
  """
  @spec introspect(t(), String.t()) :: {:ok, map()} | {:error, String.t()}
  def introspect(intro, token) do
    body = URI.encode_query(%{"token" => token, "token_type_hint" => "access_token"})

    headers =
      [
        {"accept", "application/json"},
        {"content-type", "application/x-www-form-urlencoded"}
      ] ++ basic(intro)

    opts = [max_body: intro.max_answer_bytes, max_error_body: 1_024, timeout: intro.timeout]

    case Client.fetch(intro.client, "POST", intro.url, headers, body, opts) do
      {:ok, %{status: 200, body: json}} ->
        case JSON.decode(json) do
          {:ok, %{} = claims} -> {:ok, claims}
          _ -> {:error, "the authorization server's introspection answer is not a JSON object"}
        end

      {:ok, %{status: status}} ->
        {:error, "the authorization server's introspection answered HTTP #{status}"}

      {:error, reason} ->
        {:error, "the authorization server is unreachable or refused (#{reason})"}
    end
  end

  defp basic(%{client_id: id, client_secret: secret}) when is_binary(id),
    do: [{"authorization", "Basic " <> Base.encode64("#{id}:#{secret}")}]

  defp basic(_), do: []

  @doc """
  Whether `claims` let the token call `resource` at `now` (Unix seconds): `:ok` or
  `{:error, why}`. See the moduledoc for the rules.
  """
  @spec verdict(map(), String.t(), integer()) :: :ok | {:error, String.t()}
  def verdict(claims, resource, now) do
    with :ok <- active(claims),
         :ok <- unexpired(claims, now) do
      audience(claims, resource)
    end
  end

  defp active(%{"active" => true}), do: :ok
  defp active(_), do: {:error, "the token is not active"}

  defp unexpired(%{"exp" => exp}, now) when is_integer(exp) do
    if exp > now, do: :ok, else: {:error, "the token has expired"}
  end

  defp unexpired(%{"exp" => _}, _now),
    do: {:error, "the token is not active (its exp is not an integer NumericDate)"}

  defp unexpired(_claims, _now), do: :ok

  defp audience(claims, resource) do
    audiences = List.wrap(claims["aud"])

    if resource in audiences do
      :ok
    else
      shown = audiences |> Enum.take(5) |> Enum.map_join(", ", &inspect/1)
      more = if length(audiences) > 5, do: ", …", else: ""
      {:error, "the token was not issued for #{resource} (aud: #{shown}#{more})"}
    end
  end
end
