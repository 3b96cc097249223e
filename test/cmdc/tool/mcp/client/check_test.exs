defmodule CMDC.Tool.MCP.Client.CheckTest do
  # The shape checks, limits, eras and transport registry of the MCP client, without a server.
  use ExUnit.Case, async: true

  alias CMDC.Tool.MCP.Client.{Check, Era, Limits, Stdio, Transports}

  doctest Check
  doctest Limits
  doctest Era
  doctest Transports

  @limits Limits.new()

  test "every malformed shape named in issue 23 is an error, never an exception" do
    for bad <- [
          %{"jsonrpc" => "2.0", "method" => "notifications/progress", "params" => [1]},
          %{"jsonrpc" => "2.0", "id" => 1, "result" => []},
          %{"jsonrpc" => "2.0", "id" => [1], "result" => %{}},
          %{"jsonrpc" => "2.0", "id" => 1, "error" => "boom"},
          [1, 2],
          "text"
        ] do
      assert {:error, reason} = Check.message(bad), inspect(bad)
      assert is_binary(reason)
    end

    assert {:error, _} = Check.initialize(%{"protocolVersion" => "x", "capabilities" => []})
    assert {:error, _} = Check.initialize(%{"protocolVersion" => 7})
    assert {:error, _} = Check.discover(%{"supportedVersions" => "2026-07-28"})
    assert {:error, _} = Check.tools_page(%{"tools" => %{}})
    assert {:error, _} = Check.call_result(%{"content" => "text"})
    assert {:error, _} = Check.call_result(%{"content" => [], "isError" => "yes"})
    assert {:error, _} = Check.progress(%{"progressToken" => %{}, "progress" => 1})
  end

  test "tools: name bytes, UTF-8, schema depth and size, optional fields" do
    assert {:ok, %{"inputSchema" => %{"type" => "object"}}} =
             Check.tool(%{"name" => "a"}, @limits)

    assert {:error, "a tool name is not valid UTF-8" <> _} =
             Check.tool(%{"name" => <<255>>}, @limits)

    assert {:error, _} = Check.tool(%{"name" => String.duplicate("n", 257)}, @limits)
    assert {:error, _} = Check.tool(%{"name" => "a", "inputSchema" => []}, @limits)
    assert {:error, _} = Check.tool(%{"name" => "a", "description" => 1}, @limits)

    deep = Enum.reduce(1..5_000, %{}, fn _, s -> %{"properties" => %{"x" => s}} end)
    assert {:error, message} = Check.tool(%{"name" => "d", "inputSchema" => deep}, @limits)
    assert message =~ "nests deeper than 64"

    big = %{"enum" => Enum.map(1..100_000, &"value #{&1}")}
    assert {:error, message} = Check.tool(%{"name" => "b", "inputSchema" => big}, @limits)
    assert message =~ "over 1048576 bytes"
  end

  test "limits: overrides, app env, refusals" do
    assert Limits.new(max_pages: 3).max_pages == 3
    assert_raise ArgumentError, ~r/unknown MCP client limit :nope/, fn -> Limits.new(nope: 1) end
    assert_raise ArgumentError, ~r/positive integer/, fn -> Limits.new(max_tools: 0) end
  end

  test "an answer's id is read from its head without decoding it" do
    assert Stdio.head_id(~s({"jsonrpc":"2.0","id":42,"result":{"tools":[)) == 42
    assert Stdio.head_id(~s({"id": "abc", "result")) == "abc"
    assert Stdio.head_id(<<"{\"id\":7,\"bad\":\"", 255, "\"}">>) == 7
    assert Stdio.head_id("no id here") == nil
  end

  test "modern params carry the _meta; legacy ones are untouched" do
    params = Era.params(:modern, %{"_meta" => %{"progressToken" => 3}}, "1.0")
    assert params["_meta"]["progressToken"] == 3
    assert params["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] == "cmdc_tool"
    assert Era.params(:legacy, %{"a" => 1}, "1.0") == %{"a" => 1}
    assert Transports.lookup("carrier-pigeon") == :error
    assert {:error, _} = Transports.fetch(:carrier_pigeon)
  end
end
