defmodule CMDC.Tool.ScriptFidelityTest do
  # Issue 15, item 5: what a script tool's author wrote reaches the model as written.
  use ExUnit.Case, async: true
  import CMDC.Tool.ScriptCase
  import ExUnit.CaptureLog

  alias CMDC.Tool.{Runner, Script}

  @ctx %CMDC.Context{session_id: "fidelity"}

  setup_all do
    dir = tmp_dir("fidelity")

    path =
      write!(dir, "fid.py", ~S'''
      from typing import Any


      def count(n: int) -> str:
          """Says what type n arrived as."""
          return type(n).__name__ + ":" + repr(n)


      def double(n: int) -> int:
          return n * 2


      def loud() -> str:
          raise ValueError("x" * 1_000_000)


      def shown(x: int) -> dict:
          return {"x": x}


      shown.format = lambda result, args: result["missing"]


      def anything(value: Any = None) -> str:
          """Takes anything.

          Args:
              value: Whatever you like.
          """
          return repr(value)
      ''')

    {:ok, group} = Script.load(path, cache: false)
    %{tools: Map.new(group.tools, &{&1.name(), &1}), group: group}
  end

  test "an integral float sent for an int parameter arrives as an int", %{tools: t} do
    assert {:ok, %{value: "int:5"}} = Script.call(t["count"], %{"n" => 5.0})
    assert {:ok, %{value: "int:7"}} = Script.call(t["count"], %{"n" => 7})
  end

  test "integers of any size round-trip exactly", %{tools: t} do
    big = Integer.pow(2, 70) + 1
    assert {:ok, %{value: value}} = Script.call(t["double"], %{"n" => big})
    assert value == big * 2

    neg = -Integer.pow(10, 30)

    result =
      Runner.run([t["double"]], %{id: "1", name: "double", arguments: ~s({"n": #{neg}})}, @ctx,
        policies: %{"double" => :auto}
      )

    assert result.content == Integer.to_string(neg * 2)
  end

  test "exception text to the model is capped with a marker", %{tools: t} do
    assert {:error, %{kind: "exception", message: message}} = Script.call(t["loud"], %{})
    assert byte_size(message) < 10_000
    assert message =~ ~r/^ValueError: x+ \[\.\.\. 991808 more characters cut\]$/
  end

  test "a failing format hook returns the raw result plus a logged warning", %{tools: t} do
    log =
      capture_log(fn ->
        result =
          Runner.run([t["shown"]], %{id: "1", name: "shown", arguments: %{"x" => 3}}, @ctx,
            policies: %{"shown" => :auto}
          )

        refute result.is_error
        assert CMDC.Tool.JSON.decode!(result.content) == %{"x" => 3}
      end)

    assert log =~ "the format function raised KeyError: 'missing'; the raw result was returned"
  end

  test "an Any parameter with a None default keeps its description at the top level",
       %{tools: t} do
    prop = t["anything"].parameters()["properties"]["value"]
    assert prop["description"] == "Whatever you like."
    refute Map.has_key?(prop, "anyOf")
    assert {:ok, %{value: "None"}} = Script.call(t["anything"], %{"value" => nil})
  end
end
