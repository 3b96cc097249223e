defmodule CMDC.Tool.Search.ToolTest do
  # search_tools' results: what a model reads when it loads a found tool (OpenAI chat, Gemini,
  # MCP): name, description, parameters and the tool's examples.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Deferred, JSON, Registry, Runner, Session}
  alias CMDC.Tool.Search.Tool, as: SearchTool

  defmodule Forecast do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "get_forecast"
    def description, do: "Get the weather forecast for a city."

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{
          "city" => %{"type" => "string"},
          "days" => %{"type" => "integer", "minimum" => 1},
          "notes" => %{"type" => "string"}
        },
        "required" => ["city"]
      }

    # Five examples: one too long for a result, so the first three that fit are shown.
    def examples,
      do: [
        %{"city" => "Paris"},
        %{"city" => "Lyon", "notes" => String.duplicate("long ", 80)},
        %{"city" => "Oslo", "days" => 3},
        %{"city" => "Rome", "days" => 7},
        %{"city" => "Kyiv"}
      ]

    def execute(%{"city" => city}, _ctx), do: {:ok, "sunny in " <> city}
  end

  defmodule Plain do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "get_forecast_history"
    def description, do: "Past weather forecasts for a city."
    def parameters, do: %{"type" => "object", "properties" => %{"city" => %{"type" => "string"}}}
    def execute(_args, _ctx), do: {:ok, "rain"}
  end

  defp registry do
    reg = Registry.new()
    :ok = Registry.register(reg, [SearchTool, Forecast, Plain])
    reg
  end

  defp search(reg, query) do
    call = %{id: "s1", name: "search_tools", arguments: JSON.encode!(%{"query" => query})}
    result = Runner.run(reg, call, %CMDC.Context{})
    refute result.is_error, result.content
    result
  end

  test "a found tool comes with its examples, capped as in descriptions" do
    result = search(registry(), "weather forecast for a city")
    found = Map.new(result.structured["tools"], &{&1["name"], &1})

    assert found["get_forecast"]["examples"] == [
             %{"city" => "Paris"},
             %{"city" => "Oslo", "days" => 3},
             %{"city" => "Rome", "days" => 7}
           ]

    # No examples, no key; the text the model reads says the same as the structure.
    refute Map.has_key?(found["get_forecast_history"], "examples")
    assert JSON.decode!(result.content) == result.structured
  end

  test "examples from a discovered tool's metadata are in the result too" do
    mod = "SearchEx#{System.unique_integer([:positive])}.Convert"

    source = """
    defmodule #{mod} do
      @behaviour CMDC.Tool
      def name, do: "convert_currency"
      def description, do: "Convert an amount between currencies."
      def parameters,
        do: %{"type" => "object", "properties" => %{"amount" => %{"type" => "number"},
          "to" => %{"type" => "string"}}, "required" => ["amount", "to"]}
      def execute(_args, _ctx), do: {:ok, "1.0"}
    end
    """

    reg = Registry.new()
    :ok = Registry.register(reg, SearchTool)

    CMDC.Tool.Test.Discovered.registry(
      [
        {".cmdc/tools/convert.ex", source},
        {".cmdc/tools/convert.json", ~s({"examples": [{"amount": 10, "to": "EUR"}]})}
      ],
      [:user],
      reg
    )

    [tool | _] = search(reg, "convert money to another currency").structured["tools"]
    assert tool["name"] == "convert_currency"
    assert tool["examples"] == [%{"amount" => 10, "to" => "EUR"}]
  end

  test "a session lists the found tool next turn, its examples in the description" do
    reg = registry()
    session = Session.new(reg, format: :openai, defer: true)
    session = Session.observe(session, search(reg, "weather forecast for a city"))
    tools = Session.tools(session)
    forecast = Enum.find(tools, &(&1["function"]["name"] == "get_forecast"))
    assert forecast["function"]["description"] =~ ~s(Examples:\n{"city":"Paris"})
  end

  test "Anthropic's tool_reference answer is unchanged: names only" do
    result = search(registry(), "weather forecast for a city")

    assert %{"type" => "tool_result", "content" => refs} = Deferred.anthropic_result(result)
    assert Enum.all?(refs, &(Map.keys(&1) == ["tool_name", "type"]))
    assert %{"tool_name" => "get_forecast"} in Enum.map(refs, &Map.take(&1, ["tool_name"]))
  end
end
