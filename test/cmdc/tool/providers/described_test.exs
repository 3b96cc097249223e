defmodule CMDC.Tool.Providers.DescribedTest do
  # Tools given as data convert exactly as their modules do: same tools, same warnings, same
  # errors (the path CMDC.Tool.Cluster takes; cluster_schema_test.exs runs it across nodes).
  use ExUnit.Case, async: true

  alias CMDC.Tool.Providers
  alias CMDC.Tool.Providers.Described
  alias CMDC.Tool.Test.Factory

  doctest Described

  # Gemini has no `not`, strict OpenAI closes the open object: warnings in both.
  @lossy %{
    "type" => "object",
    "properties" => %{"mode" => %{"type" => "string", "not" => %{"const" => "rm"}}}
  }

  defp modules do
    [
      CMDC.Tool.Examples.Echo,
      CMDC.Tool.Examples.ReadFile,
      Factory.tool("fs.lossy", "Lossy.", @lossy),
      # Not an object root: converted natively even without options.
      Factory.tool("refs", "Refs.", %{
        "$defs" => %{
          "q" => %{"type" => "object", "properties" => %{"x" => %{"type" => "string"}}}
        },
        "$ref" => "#/$defs/q"
      })
    ]
  end

  test "every format and strictness: the same tools and warnings as the modules" do
    modules = modules()
    described = Described.new(modules)

    assert Providers.convert(described, %{}, []) == Providers.convert(modules, %{}, [])
    assert CMDC.Tool.to_schema(described) == CMDC.Tool.to_schema(modules)

    for opts <- [[format: :anthropic], [format: :openai_responses, defer: true]] do
      opts = [{:warnings, :ignore} | opts]

      assert CMDC.Tool.to_schema_json(described, %{}, opts) ==
               CMDC.Tool.to_schema_json(modules, %{}, opts)
    end

    for format <- Providers.formats(), strict <- [false, true] do
      opts = [format: format, strict: strict]
      {tools, warnings} = Providers.convert(described, %{}, opts)
      assert {tools, warnings} == Providers.convert(modules, %{}, opts), inspect(opts)
      assert warnings != [] or format in [:gemini_json_schema, :mcp]
    end
  end

  test "a registry's tools with its settings' namespaces" do
    reg = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(reg, modules())
    described = Described.new(reg)

    assert Enum.map(described.tools, & &1.name) ==
             Enum.map(CMDC.Tool.Registry.list(reg), & &1.name())

    assert Enum.all?(described.tools, &(&1.namespace == nil))
  end

  test "a name two tools would share is refused as for modules" do
    twins = [Factory.tool("a.b"), Factory.tool("a_b")]
    theirs = assert_raise ArgumentError, fn -> Providers.convert(twins, %{}, format: :openai) end

    ours =
      assert_raise ArgumentError, fn ->
        Providers.convert(Described.new(twins), %{}, format: :openai)
      end

    assert ours.message == theirs.message
  end
end
