defmodule CMDC.Tool.MCP.EnvelopeTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.MCP.Envelope

  alias CMDC.Tool.MCP.Envelope

  test "era: _meta, server/discover and a modern header make a request modern" do
    meta = %{"_meta" => %{"io.modelcontextprotocol/protocolVersion" => "x"}}
    assert Envelope.era("tools/list", meta, nil) == :modern
    assert Envelope.era("server/discover", %{}, nil) == :modern
    assert Envelope.era("initialize", meta, nil) == :legacy
    assert Envelope.era("tools/list", %{}, %{"mcp-protocol-version" => "2026-07-28"}) == :modern
    # What legacy HTTP clients send after initialize.
    assert Envelope.era("tools/list", %{}, %{"mcp-protocol-version" => "2025-06-18"}) == :legacy
  end

  test "a non-string version is a shape error, not a version mismatch" do
    meta = %{
      "io.modelcontextprotocol/protocolVersion" => 2026,
      "io.modelcontextprotocol/clientCapabilities" => %{}
    }

    assert {:error, :invalid_params, "the protocol version in _meta must be a string", nil} =
             Envelope.check("tools/list", %{"_meta" => meta}, nil)
  end

  test "malformed base64 header values match nothing" do
    assert Envelope.decode_header("=?base64?!!!?=") == nil
    assert Envelope.decode_header("=?base64?" <> Base.encode64(<<255>>) <> "?=") == nil
    assert Envelope.decode_header("plain") == "plain"
  end
end
