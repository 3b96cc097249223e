defmodule CMDC.Tool.MCP.HTTP.IntrospectionTest do
  # OAuth token introspection over https against a real TLS endpoint started here
  # (test/support/introspection_server.py with certificates made by the openssl CLI in a
  # temporary directory): whom the client believes, and what answers it refuses.
  use ExUnit.Case, async: true

  alias CMDC.Tool.MCP.HTTP.Auth
  alias CMDC.Tool.MCPServers

  @moduletag timeout: 120_000
  @resource "http://127.0.0.1:9/mcp"

  # Skipped (the reason shows in the run's output) where a tool the test needs is missing.
  @missing Enum.reject(["python3", "openssl"], &System.find_executable/1)
  if @missing != [], do: @moduletag(skip: "not installed: #{Enum.join(@missing, ", ")}")

  setup_all do
    dir = Path.join(System.tmp_dir!(), "cmdc_introspection_#{System.unique_integer([:positive])}")

    if @missing == [] do
      File.mkdir_p!(dir)
      on_exit(fn -> File.rm_rf!(dir) end)
      {:ok, python: System.find_executable("python3"), certs: certificates(dir)}
    else
      :ok
    end
  end

  # A CA, a certificate it signed for 127.0.0.1, and a self-signed one for another host.
  defp certificates(dir) do
    openssl = System.find_executable("openssl")
    at = &Path.join(dir, &1)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"]

    openssl!(
      openssl,
      ["req", "-x509" | ec] ++
        [
          "-keyout",
          at.("ca.key"),
          "-out",
          at.("ca.pem"),
          "-subj",
          "/CN=cmdc test CA",
          "-addext",
          "basicConstraints=critical,CA:TRUE",
          "-addext",
          "keyUsage=critical,keyCertSign"
        ]
    )

    openssl!(
      openssl,
      ["req" | ec] ++
        ["-keyout", at.("server.key"), "-out", at.("server.csr"), "-subj", "/CN=127.0.0.1"]
    )

    File.write!(at.("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    openssl!(openssl, [
      "x509",
      "-req",
      "-in",
      at.("server.csr"),
      "-CA",
      at.("ca.pem"),
      "-CAkey",
      at.("ca.key"),
      "-CAcreateserial",
      "-days",
      "2",
      "-extfile",
      at.("server.ext"),
      "-out",
      at.("server.pem")
    ])

    openssl!(
      openssl,
      ["req", "-x509" | ec] ++
        [
          "-keyout",
          at.("other.key"),
          "-out",
          at.("other.pem"),
          "-subj",
          "/CN=other.example",
          "-addext",
          "subjectAltName=DNS:other.example"
        ]
    )

    %{
      dir: dir,
      ca: at.("ca.pem"),
      server: {at.("server.pem"), at.("server.key")},
      other: {at.("other.pem"), at.("other.key")}
    }
  end

  defp openssl!(openssl, args) do
    {out, status} = System.cmd(openssl, args, stderr_to_stdout: true)
    if status != 0, do: flunk("openssl #{Enum.join(args, " ")} failed: #{out}")
  end

  defp endpoint(ctx, {cert, key}) do
    MCPServers.introspection(ctx.python, @resource, ["--tls", cert, key]) <> "/introspect"
  end

  defp auth(url, extra) do
    opts = [introspection_url: url, client_id: "rs", client_secret: "secret", resource: @resource]
    {:ok, auth} = Auth.new({:oauth, opts ++ extra})
    auth
  end

  defp check(auth, token),
    do: Auth.check(auth, %{"authorization" => "Bearer " <> token}, "http://x/meta")

  test "a server whose certificate chains to the CA file and names the host is believed", ctx do
    url = endpoint(ctx, ctx.certs.server)
    assert {:ok, _} = check(auth(url, ca_file: ctx.certs.ca), "good-token")

    assert {:error, _, "invalid token: the token is not active"} =
             check(auth(url, ca_file: ctx.certs.ca), "nobody")
  end

  test "the system's trust store does not know the test CA: refused, saying why", ctx do
    url = endpoint(ctx, ctx.certs.server)
    assert {:error, challenge, message} = check(auth(url, []), "good-token")
    assert challenge =~ ~s(error="invalid_token")
    assert message =~ "the authorization server is unreachable or refused"
    assert message =~ ~r/certificate/i
  end

  test "a self-signed certificate for another host is refused, even when trusted as a CA " <>
         "(the host name is checked); only an explicit verify: :verify_none believes it",
       ctx do
    url = endpoint(ctx, ctx.certs.other)
    {other_pem, _} = ctx.certs.other

    for extra <- [[], [ca_file: ctx.certs.ca], [ca_file: other_pem]] do
      assert {:error, _, message} = check(auth(url, extra), "good-token")
      assert message =~ ~r/certificate/i, "#{inspect(extra)}: #{message}"
    end

    assert {:error, _, message} = check(auth(url, ca_file: other_pem), "good-token")
    assert message =~ ~r/name|NotValidForName|CaUsedAsEndEntity/

    assert ExUnit.CaptureLog.capture_log(fn ->
             assert {:ok, _} = check(auth(url, verify: :verify_none), "good-token")
           end) =~ "NOT checked"
  end

  test "answers over :max_answer_bytes are refused early, not read to the time-out", ctx do
    url = endpoint(ctx, ctx.certs.server)
    auth = auth(url, ca_file: ctx.certs.ca, timeout: 30_000)
    :erlang.garbage_collect()
    before = :erlang.memory(:total)

    for token <- ["huge-length", "huge-stream", "many-aud"] do
      {us, result} = :timer.tc(fn -> check(auth, token) end)
      assert {:error, _, message} = result
      assert message =~ "over 65536 bytes", "#{token}: #{message}"
      ms = div(us, 1000)
      IO.puts("\nintrospection answer #{token}: refused after #{ms} ms (30 s time-out)")
      # A 300 MB body read to its end, or to the time-out, takes far longer than this.
      assert ms < 15_000
    end

    growth = div(:erlang.memory(:total) - before, 1_048_576)
    assert growth < 50
  end

  test "exp must be an integer NumericDate in the future: floats and strings are inactive",
       ctx do
    auth = auth(endpoint(ctx, ctx.certs.server), ca_file: ctx.certs.ca)

    for token <- ["float-exp", "string-exp"] do
      assert {:error, _, message} = check(auth, token)
      assert message =~ "its exp is not an integer NumericDate"
    end

    assert {:error, _, "invalid token: the token has expired"} = check(auth, "expired-token")
  end

  test "settings that cannot work are refused when the server starts" do
    assert {:error, message} =
             Auth.new({:oauth, introspection_url: "https://a/i", ca_file: "/nonexistent.pem"})

    assert message =~ "OAuth introspection: /nonexistent.pem: cannot read CA certificates"

    assert {:error, message} =
             Auth.new({:oauth, introspection_url: "https://a/i", verify: :maybe})

    assert message =~ "verify: expected :verify_peer or :verify_none"

    assert {:error, message} = Auth.new({:oauth, introspection_url: "https://a/i", ca_fille: "x"})

    assert message =~ "unknown option :ca_fille (did you mean :ca_file?)"
  end
end
