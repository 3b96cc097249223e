defmodule CMDCTest.MCPTools.Guarded do
  @moduledoc false
  # A tool that needs the user's approval on every call (the runner asks its approver).
  @behaviour CMDC.Tool
  def name, do: "guarded"
  def description, do: "Deletes nothing, but asks first."
  def parameters, do: %{"type" => "object", "properties" => %{"path" => %{"type" => "string"}}}
  def tool_options, do: [policy: :ask_always]
  def execute(_args, _context), do: {:ok, "ran"}
end

defmodule CMDC.Tool.MCP.InputRequiredTest do
  # MCP 2026-07-28's multi round-trip requests (`resultType: "input_required"`) and
  # MissingRequiredClientCapability (-32021) on our server: it never asks the client for input
  # (approvals are the server's own settings: --allow, the tool's policy, hooks), so it never
  # needs a client capability, every result is `complete`, and a client's unsolicited
  # `inputResponses`/`requestState` are never trusted. Checked over HTTP with OTP's httpc and
  # with the official Python SDK client (which answers input requests when given callbacks).
  use ExUnit.Case, async: true

  alias CMDC.Tool.Examples.Echo
  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.HTTP

  @moduletag timeout: 120_000
  @modern "2026-07-28"

  defp start do
    server = start_supervised!({HTTP, tools: [Echo, CMDCTest.MCPTools.Guarded], port: 0})
    HTTP.url(server)
  end

  defp post(url, method, params, capabilities, name \\ nil) do
    meta = %{
      "io.modelcontextprotocol/protocolVersion" => @modern,
      "io.modelcontextprotocol/clientCapabilities" => capabilities
    }

    body =
      JSON.encode!(%{
        "jsonrpc" => "2.0",
        "id" => 1,
        "method" => method,
        "params" => Map.put(params, "_meta", meta)
      })

    headers =
      [{~c"mcp-protocol-version", ~c"2026-07-28"}, {~c"mcp-method", to_charlist(method)}] ++
        if(name, do: [{~c"mcp-name", to_charlist(name)}], else: [])

    request = {to_charlist(url), headers, ~c"application/json", body}
    {:ok, {{_, status, _}, _, reply}} = :httpc.request(:post, request, [], body_format: :binary)
    {status, JSON.decode!(reply)}
  end

  @elicitation %{"elicitation" => %{"form" => %{}}}

  test "every result is complete; nothing is asked of the client" do
    url = start()

    for caps <- [%{}, @elicitation] do
      {200, %{"result" => discover}} = post(url, "server/discover", %{}, caps)
      assert discover["resultType"] == "complete"
      {200, %{"result" => listed}} = post(url, "tools/list", %{}, caps)
      assert listed["resultType"] == "complete"

      call = %{"name" => "echo", "arguments" => %{"text" => "hi"}}
      {200, %{"result" => result}} = post(url, "tools/call", call, caps, "echo")
      assert result["resultType"] == "complete"
      refute Map.has_key?(result, "inputRequests")
    end
  end

  test "a call needing approval is refused as a tool result, not -32021 nor input_required, " <>
         "whatever the client declares" do
    url = start()
    call = %{"name" => "guarded", "arguments" => %{"path" => "/tmp/x"}}

    for caps <- [%{}, @elicitation, %{"sampling" => %{}, "roots" => %{}}] do
      {status, reply} = post(url, "tools/call", call, caps, "guarded")
      assert status == 200
      refute Map.has_key?(reply, "error")
      result = reply["result"]
      assert result["resultType"] == "complete"
      assert result["isError"] == true
      [%{"text" => text}] = result["content"]
      assert text =~ "guarded needs approval"
      assert text =~ "--allow guarded"
    end
  end

  test "unsolicited inputResponses and requestState are not trusted: still not approved" do
    url = start()

    call = %{
      "name" => "guarded",
      "arguments" => %{"path" => "/tmp/x"},
      "inputResponses" => %{
        "approve" => %{"action" => "accept", "content" => %{"approve" => true}}
      },
      "requestState" => Base.encode64(~s({"tool":"guarded","approved":true}))
    }

    {200, %{"result" => result}} = post(url, "tools/call", call, @elicitation, "guarded")
    assert result["isError"] == true
    assert [%{"text" => "guarded needs approval" <> _}] = result["content"]
  end

  test "the official Python SDK client with elicitation and sampling callbacks is never asked" do
    {:ok, python} = CMDC.Tool.PythonEnv.python()
    url = start()

    code = """
    import asyncio, json, sys
    from mcp import Client
    asked = []
    async def on_elicit(context, params):
        asked.append("elicitation")
        raise RuntimeError("not expected")
    async def on_sample(context, params):
        asked.append("sampling")
        raise RuntimeError("not expected")
    async def main():
        async with Client(sys.argv[1], mode="2026-07-28", elicitation_callback=on_elicit,
                          sampling_callback=on_sample) as c:
            r = await c.call_tool("guarded", {"path": "/tmp/x"})
            e = await c.call_tool("echo", {"text": "ok"})
            print(json.dumps({"guarded": {"is_error": r.is_error, "text": r.content[0].text},
                              "echo": e.content[0].text, "asked": asked}))
    asyncio.run(main())
    """

    {out, 0} = System.cmd(python, ["-c", code, url], stderr_to_stdout: true)
    report = out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
    assert report["asked"] == []
    assert report["echo"] == "ok"
    assert report["guarded"]["is_error"] == true
    assert report["guarded"]["text"] =~ "needs approval"
  end
end
