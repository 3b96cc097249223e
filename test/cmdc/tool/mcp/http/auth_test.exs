defmodule CMDC.Tool.MCP.HTTP.AuthTest do
  # The settings people get wrong, and what a client is told. (Tokens checked against a real
  # introspection server: test/cmdc/tool/mcp/http_test.exs.)
  use ExUnit.Case, async: true

  alias CMDC.Tool.MCP.HTTP.Auth

  test "bad settings are errors that say what to fix" do
    assert {:error, "a bearer token needs at least 16 bytes"} = Auth.new({:bearer, "short"})

    assert {:error, "cannot read the token file /nonexistent/t: no such file" <> _} =
             Auth.new({:bearer_file, "/nonexistent/t"})

    assert {:error, "OAuth needs :introspection_url" <> _} = Auth.new({:oauth, issuer: "x"})
    assert {:error, "unknown :auth setting :basic"} = Auth.new(:basic)
    assert {:ok, :none} = Auth.new(nil)
    # The server refuses to start with it, saying why.
    Process.flag(:trap_exit, true)

    assert {:error, "a bearer token needs at least 16 bytes"} =
             CMDC.Tool.MCP.HTTP.start_link(tools: [], auth: {:bearer, "short"})
  end

  test "a token file is read and trimmed" do
    file = Path.join(System.tmp_dir!(), "mcp_token_#{System.unique_integer([:positive])}")
    File.write!(file, "0123456789abcdef0123\n")
    File.chmod!(file, 0o600)
    on_exit(fn -> File.rm(file) end)
    assert {:ok, {:bearer, "0123456789abcdef0123"} = auth} = Auth.new({:bearer_file, file})
    assert {:ok, nil} = Auth.check(auth, %{"authorization" => "Bearer 0123456789abcdef0123"}, nil)

    assert {:error, challenge, _} =
             Auth.check(auth, %{"authorization" => "Bearer 0123456789abcdef0124"}, nil)

    assert challenge ==
             ~s(Bearer realm="mcp", error="invalid_token", error_description="the token is not this server's")

    assert {:error, ~s(Bearer realm="mcp"), "authentication required" <> _} =
             Auth.check(auth, %{}, nil)
  end

  test "a token file every user may read is refused, as ssh refuses such a key" do
    file = Path.join(System.tmp_dir!(), "mcp_token_#{System.unique_integer([:positive])}")
    File.write!(file, "0123456789abcdef0123\n")
    on_exit(fn -> File.rm(file) end)
    File.chmod!(file, 0o644)
    assert {:error, message} = Auth.new({:bearer_file, file})
    assert message =~ "readable by every user (mode 0644): run chmod 600"

    File.chmod!(file, 0o640)

    log =
      ExUnit.CaptureLog.capture_log(fn ->
        assert {:ok, {:bearer, _}} = Auth.new({:bearer_file, file})
      end)

    assert log =~ "readable by its group"
  end

  test "the scheme name is case-insensitive (RFC 9110), an empty token is none" do
    {:ok, auth} = Auth.new({:bearer, "0123456789abcdef0123"})

    for scheme <- ["Bearer", "bearer", "BEARER", "bEaReR"] do
      header = %{"authorization" => scheme <> " 0123456789abcdef0123"}
      assert {:ok, nil} = Auth.check(auth, header, nil), scheme
    end

    for header <- ["Basic 0123456789abcdef0123", "Bearer ", "Bearer", "0123456789abcdef0123"] do
      assert {:error, _, "authentication required" <> _} =
               Auth.check(auth, %{"authorization" => header}, nil)
    end
  end

  test "OAuth: the resource defaults to the endpoint's URL; metadata names the servers" do
    {:ok, auth} =
      Auth.new(
        {:oauth, introspection_url: "http://127.0.0.1:1/i", authorization_servers: ["https://as"]}
      )

    auth = Auth.put_resource(auth, "http://127.0.0.1:9/mcp")
    assert Auth.metadata_path(auth, "/mcp") == "/.well-known/oauth-protected-resource/mcp"

    assert %{"resource" => "http://127.0.0.1:9/mcp", "authorization_servers" => ["https://as"]} =
             Auth.metadata(auth)

    # An unreachable authorization server refuses the token (never lets it through).
    assert {:error, challenge, message} =
             Auth.check(auth, %{"authorization" => "Bearer t"}, "http://m")

    assert challenge =~ ~s(Bearer resource_metadata="http://m", error="invalid_token")
    assert message =~ "the authorization server is unreachable"
  end
end
