defmodule CMDC.Tool.MCP.HTTP.IntrospectionCacheTest do
  # RFC 7662 introspection answers kept by the HTTP server's OAuth check, against a real
  # introspection endpoint (test/support/introspection_server.py, which counts what it is
  # asked) and the server itself over HTTP (OTP's httpc).
  use ExUnit.Case, async: true

  alias CMDC.Tool.Examples.Echo
  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.HTTP
  alias CMDC.Tool.MCP.HTTP.{Auth, IntrospectionCache}
  alias CMDC.Tool.MCPServers

  @moduletag timeout: 60_000
  @resource "http://127.0.0.1:9/mcp"

  setup do
    case System.find_executable("python3") do
      nil -> {:ok, skip: "python3 is not installed"}
      python -> {:ok, base: MCPServers.introspection(python, @resource)}
    end
  end

  defp auth(base, extra \\ []) do
    opts =
      [
        introspection_url: base <> "/introspect",
        client_id: "rs",
        client_secret: "secret",
        resource: @resource
      ] ++ extra

    {:ok, auth} = Auth.new({:oauth, opts})
    auth
  end

  # :ok for an accepted token (whoever it names), else the refusal.
  defp check(auth, token) do
    case Auth.check(auth, %{"authorization" => "Bearer " <> token}, "http://x/meta") do
      {:ok, _principal} -> :ok
      refused -> refused
    end
  end

  # How many times the endpoint was asked about each token.
  defp asked(base) do
    {:ok, {{_, 200, _}, _, json}} =
      :httpc.request(:get, {to_charlist(base <> "/stats"), []}, [], body_format: :binary)

    JSON.decode!(json)
  end

  test "an active token is introspected once for many requests", %{base: base} do
    auth = auth(base)
    for _ <- 1..20, do: assert(check(auth, "good-a") == :ok)
    assert asked(base)["good-a"] == 1
  end

  test "inactive answers are not kept: every request asks again", %{base: base} do
    auth = auth(base)

    for _ <- 1..3 do
      assert {:error, _, "invalid token: the token is not active"} = check(auth, "nobody")
    end

    assert asked(base)["nobody"] == 3
  end

  test "a kept token still expires at its exp, and is then asked about again",
       %{base: base} do
    auth = auth(base)
    assert check(auth, "short-a") == :ok
    assert check(auth, "short-a") == :ok
    assert asked(base)["short-a"] == 1
    Process.sleep(2_500)
    assert {:error, _, message} = check(auth, "short-a")
    assert message =~ ~r/expired|not active/
    assert asked(base)["short-a"] == 2
  end

  test "refused claims of a kept answer are still refused (audience checked each time)",
       %{base: base} do
    auth = auth(base)

    for _ <- 1..2 do
      assert {:error, _, message} = check(auth, "foreign-token")
      assert message =~ "not issued for #{@resource}"
    end

    assert asked(base)["foreign-token"] == 1
  end

  test ":cache_ms bounds how long an answer is kept; 0 turns the cache off", %{base: base} do
    auth = auth(base, cache_ms: 300)
    assert check(auth, "good-b") == :ok
    assert check(auth, "good-b") == :ok
    Process.sleep(400)
    assert check(auth, "good-b") == :ok
    assert asked(base)["good-b"] == 2

    off = auth(base, cache_ms: 0)
    for _ <- 1..3, do: assert(check(off, "good-c") == :ok)
    assert asked(base)["good-c"] == 3
  end

  test "bounded: at most :cache_size answers, the soonest to expire go first", %{base: base} do
    {:oauth, %{cache: cache}} = auth = auth(base, cache_size: 10)
    for i <- 1..25, do: assert(check(auth, "good-n#{i}") == :ok)
    assert IntrospectionCache.size(cache) <= 10
    # The latest is kept.
    assert check(auth, "good-n25") == :ok
    assert asked(base)["good-n25"] == 1
  end

  test "bad cache settings are refused with what to fix" do
    assert {:error, message} =
             Auth.new({:oauth, introspection_url: "http://127.0.0.1:1/i", cache_ms: -1})

    assert message =~ ":cache_ms must be an integer >= 0"
  end

  test "through the server: 10 requests with one token, one introspection" do
    port = MCPServers.free_port()
    # An endpoint of its own, whose tokens are issued for this server's URL.
    base =
      MCPServers.introspection(System.find_executable("python3"), "http://127.0.0.1:#{port}/mcp")

    server =
      start_supervised!(
        {HTTP,
         tools: [Echo],
         port: port,
         auth:
           {:oauth,
            introspection_url: base <> "/introspect", client_id: "rs", client_secret: "secret"}}
      )

    url = HTTP.url(server)

    for id <- 1..10 do
      body =
        JSON.encode!(%{
          "jsonrpc" => "2.0",
          "id" => id,
          "method" => "tools/list",
          "params" => %{
            "_meta" => %{
              "io.modelcontextprotocol/protocolVersion" => "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities" => %{}
            }
          }
        })

      headers = [
        {~c"authorization", ~c"Bearer good-http"},
        {~c"mcp-protocol-version", ~c"2026-07-28"},
        {~c"mcp-method", ~c"tools/list"}
      ]

      request = {to_charlist(url), headers, ~c"application/json", body}
      assert {:ok, {{_, 200, _}, _, _}} = :httpc.request(:post, request, [], [])
    end

    assert asked(base)["good-http"] == 1
  end
end
