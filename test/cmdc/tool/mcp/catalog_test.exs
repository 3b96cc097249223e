defmodule CMDC.Tool.MCP.CatalogTest do
  use ExUnit.Case, async: true

  alias CMDC.Test.MCPIO
  alias CMDC.Tool.Registry
  alias CMDC.Tool.Test.Factory

  test "lists the core set and search_tools; a search adds what it found, with list_changed" do
    reg = Registry.new()

    weather =
      Factory.tool("get_forecast", "Get the weather forecast for a city.", %{
        "type" => "object",
        "properties" => %{"city" => %{"type" => "string"}}
      })

    extra = for i <- 1..50, do: Factory.tool("record_#{i}", "Read record #{i} of the ledger.")
    :ok = Registry.register(reg, [CMDC.Tool.Examples.Echo, weather | extra])
    {:ok, out} = StringIO.open("")
    input = MCPIO.feeder()
    me = self()
    feed = fn msg -> MCPIO.feed(input, Map.put(msg, "jsonrpc", "2.0")) end

    spawn_link(fn ->
      CMDC.Tool.MCP.Catalog.serve(reg, core: ["echo"], input: input, output: out)
      send(me, :stopped)
    end)

    feed.(%{"id" => 1, "method" => "initialize", "params" => %{}})
    feed.(%{"id" => 2, "method" => "tools/list"})
    [_init, list] = MCPIO.await_frames(out, 2)
    # tools/list is in a deterministic order (by name), not in the order given.
    assert Enum.sort(Enum.map(list["result"]["tools"], & &1["name"])) == ["echo", "search_tools"]

    search = %{
      "name" => "search_tools",
      "arguments" => %{"query" => "weather forecast", "limit" => 1}
    }

    feed.(%{"id" => 3, "method" => "tools/call", "params" => search})
    frames = MCPIO.await_frames(out, 4)
    assert Enum.any?(frames, &(&1["method"] == "notifications/tools/list_changed"))
    result = Enum.find(frames, &(&1["id"] == 3))["result"]
    refute result["isError"]
    assert [%{"name" => "get_forecast"}] = result["structuredContent"]["tools"]

    feed.(%{"id" => 4, "method" => "tools/list"})
    frames = MCPIO.await_frames(out, 5)
    list = Enum.find(frames, &(&1["id"] == 4))["result"]["tools"]
    assert Enum.sort(Enum.map(list, & &1["name"])) == ["echo", "get_forecast", "search_tools"]

    # The found tool is callable now; a bad search is the tool's error, nothing is added.
    call = %{"name" => "get_forecast", "arguments" => %{"city" => "Paris"}}
    feed.(%{"id" => 5, "method" => "tools/call", "params" => call})
    bad = %{"name" => "search_tools", "arguments" => %{"query" => "(x", "mode" => "regex"}}
    feed.(%{"id" => 6, "method" => "tools/call", "params" => bad})
    frames = MCPIO.await_frames(out, 7)
    assert Enum.find(frames, &(&1["id"] == 5))["result"]["isError"] == false
    assert Enum.find(frames, &(&1["id"] == 6))["result"]["isError"] == true
    MCPIO.eof(input)
    assert_receive :stopped
  end
end
