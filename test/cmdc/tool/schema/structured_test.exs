defmodule CMDC.Tool.StructuredTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.Structured
  doctest CMDC.Tool.MCP.Protocol

  alias CMDC.Tool.{MCP, Runner, Structured}

  defmodule Stats do
    @behaviour CMDC.Tool
    def name, do: "stats"
    def title, do: "Statistics"
    def description, do: "Mean of numbers, structured."
    def annotations, do: [read_only_hint: true, idempotentHint: true, destructive_hint: false]

    def parameters,
      do: %{"type" => "object", "properties" => %{"as" => %{"type" => "string"}}}

    def output_schema do
      %{
        "type" => "object",
        "properties" => %{
          "mean" => %{"type" => "number"},
          "items" => %{"type" => "array", "items" => %{"type" => "integer"}}
        },
        "required" => ["mean"]
      }
    end

    def execute(%{"as" => "map"}, _), do: {:ok, %{"mean" => 2.5, "items" => [2, 3]}}
    def execute(%{"as" => "text"}, _), do: {:ok, ~s({"mean": 1})}
    def execute(%{"as" => "deep"}, _), do: {:ok, %{"mean" => 1, "items" => [1, "two"]}}
    def execute(%{"as" => "list"}, _), do: {:ok, "[1, 2]"}
    def execute(%{"as" => "broken"}, _), do: {:ok, "{mean: 1"}
    def execute(%{"as" => "error"}, _), do: {:error, "no numbers"}
  end

  defmodule BadSchema do
    @behaviour CMDC.Tool
    def name, do: "bad_schema"
    def description, do: "An output schema that does not compile."
    def parameters, do: %{"type" => "object"}
    def output_schema, do: %{"type" => "strnig"}
    def execute(_, _), do: {:ok, "{}"}
  end

  defp run(tool, args) do
    Runner.run([tool], %{id: "1", name: tool.name(), arguments: args}, %CMDC.Context{})
  end

  test "a map or JSON text that matches the output schema becomes structured output" do
    result = run(Stats, %{"as" => "map"})
    assert %{is_error: false, structured: %{"mean" => 2.5, "items" => [2, 3]}} = result
    assert CMDC.Tool.JSON.decode!(result.content) == result.structured

    result = run(Stats, %{"as" => "text"})
    assert %{is_error: false, structured: %{"mean" => 1}, content: ~s({"mean": 1})} = result

    assert %{"structuredContent" => %{"mean" => 1}, "isError" => false, "content" => [text]} =
             MCP.call_result(result)

    assert text == %{"type" => "text", "text" => ~s({"mean": 1})}
  end

  test "output that does not match is an error result naming the path" do
    result = run(Stats, %{"as" => "deep"})
    assert %{is_error: true, reason: :invalid_output, structured: nil} = result
    assert result.content =~ ~s{at /items/1: "two" is not of type "integer" (type)}
    refute Map.has_key?(MCP.call_result(result), "structuredContent")

    assert run(Stats, %{"as" => "list"}).content =~ ~s{at the root: [1,2] is not of type "object"}
    assert run(Stats, %{"as" => "broken"}).content =~ "not JSON"
    assert %{is_error: true, content: "no numbers"} = run(Stats, %{"as" => "error"})
    assert run(BadSchema, %{}).content =~ "output schema does not compile"
  end

  test "tools without an output schema keep cmdc's results" do
    result = run(CMDC.Tool.Examples.Echo, %{"text" => "{}"})
    assert %{is_error: false, structured: nil, content: "{}"} = result
  end

  test "title, annotations and outputSchema in tools/list; only set fields" do
    entry = MCP.describe(Stats)
    assert entry["title"] == "Statistics"

    assert entry["annotations"] == %{
             "readOnlyHint" => true,
             "idempotentHint" => true,
             "destructiveHint" => false
           }

    assert entry["outputSchema"] == Stats.output_schema()
    assert Structured.mcp_fields(CMDC.Tool.Examples.Echo) == %{}
  end

  test "to_schema(format: :mcp) carries them too, from a module list and from a registry" do
    reg = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(reg, [Stats, CMDC.Tool.Examples.Echo])
    described = Map.new([Stats, CMDC.Tool.Examples.Echo], &{&1.name(), MCP.describe(&1)})

    for source <- [[Stats, CMDC.Tool.Examples.Echo], reg] do
      tools = CMDC.Tool.to_schema(source, %{}, format: :mcp)
      assert Map.new(tools, &{&1["name"], &1}) == described
      json = CMDC.Tool.to_schema_json(source, %{}, format: :mcp)
      assert CMDC.Tool.JSON.decode!(json) == tools
    end

    # Formats without a place for them are unchanged.
    [anthropic | _] = CMDC.Tool.to_schema([Stats], %{}, format: :anthropic)
    refute Map.has_key?(anthropic, "title") or Map.has_key?(anthropic, "outputSchema")
  end
end
