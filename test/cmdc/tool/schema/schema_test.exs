defmodule CMDC.Tool.SchemaTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.Schema

  alias CMDC.Tool.Schema

  test "compiles from JSON text" do
    assert {:ok, s} = Schema.compile(~s({"type": "string"}))
    assert {:ok, "x"} = Schema.validate(s, "x")
    assert {:error, "invalid JSON" <> _} = Schema.compile("{")
  end

  test "a schema that is not an object or boolean is refused" do
    assert {:error, msg} = Schema.compile([1, 2])
    assert msg =~ "object or a boolean"
    assert {:error, msg} = Schema.compile(%{"properties" => %{"a" => {:tuple}}})
    assert msg =~ "/properties/a"
  end

  test "boolean schemas" do
    assert {:ok, _} = Schema.validate(Schema.compile!(true), %{"any" => 1})
    assert {:error, [%{keyword: "falseSchema"}]} = Schema.validate(Schema.compile!(false), 1)
  end

  test "$schema selects the draft; Draft 7 is the default; later keywords are evidence" do
    tuple = %{"prefixItems" => [%{"type" => "string"}]}
    # `prefixItems` exists only from 2019-09 on: read as 2020-12 (Pydantic's tuples).
    assert {:error, _} = Schema.validate(Schema.compile!(tuple), [1])
    assert {:error, _} = Schema.validate(Schema.compile!(tuple, draft: "2020-12"), [1])
    # An asked draft wins over evidence.
    assert {:ok, _} = Schema.validate(Schema.compile!(tuple, draft: "7"), [1])
    # Without evidence, Draft 7: `items` as a list is a tuple there.
    assert {:error, _} =
             Schema.validate(Schema.compile!(%{"items" => [%{"type" => "string"}]}), [1])

    with_schema = Map.put(tuple, "$schema", "https://json-schema.org/draft/2020-12/schema")
    assert {:error, _} = Schema.validate(Schema.compile!(with_schema), [1])
    assert {:error, "unknown draft" <> _} = Schema.compile(tuple, draft: "9")
  end

  test "OpenAPI 3.0 keywords are read as OpenAPI 3.0; the registry and the module list agree" do
    schema = %{
      "type" => "object",
      "properties" => %{
        "limit" => %{"type" => "integer", "minimum" => 0, "exclusiveMinimum" => true},
        "tag" => %{"type" => "string", "nullable" => true}
      }
    }

    s = Schema.compile!(schema)
    assert {:ok, _} = Schema.validate(s, %{"limit" => 1, "tag" => nil})
    assert {:error, [%{path: "/limit"}]} = Schema.validate(s, %{"limit" => 0})

    module = CMDC.Tool.Test.Factory.tool("list_pets", "OpenAPI-derived.", schema)
    assert {:ok, _} = CMDC.Tool.validate(module, %{"limit" => 1})
    reg = CMDC.Tool.Registry.new()
    assert :ok = CMDC.Tool.Registry.register(reg, module)
    assert {:ok, _} = CMDC.Tool.validate(reg, "list_pets", %{"limit" => 1, "tag" => nil})
    assert {:error, _} = CMDC.Tool.validate(reg, "list_pets", %{"limit" => 0})

    {_, warnings} = CMDC.Tool.Providers.convert([module], %{}, format: :mcp)
    assert [%{keyword: "$schema", message: message}] = warnings
    assert message =~ "OpenAPI 3.0"
  end

  test "remote $refs resolve only against given documents" do
    schema = %{"$ref" => "https://example.com/point.json"}
    assert {:error, msg} = Schema.compile(schema)
    assert msg =~ "not available"

    point = %{"type" => "object", "required" => ["x"]}

    assert {:ok, s} =
             Schema.compile(schema, documents: %{"https://example.com/point.json" => point})

    assert {:error, [%{keyword: "required"}]} = Schema.validate(s, %{})
  end

  test "a compiled schema is shared safely by many processes" do
    s = Schema.compile!(%{"type" => "object", "required" => ["n"]})

    results =
      1..200
      |> Task.async_stream(fn i -> Schema.validate(s, %{"n" => i}) end, max_concurrency: 50)
      |> Enum.map(fn {:ok, r} -> r end)

    assert Enum.all?(results, &match?({:ok, _}, &1))
  end

  test "for_module/1 caches per module version" do
    # (Compiled once: the registry tests count reads of parameters/0. A resource is a new
    # reference each time it is returned, so identity is not compared here.)
    assert {:ok, a} = Schema.for_module(CMDC.Tool.Examples.Echo)
    assert {:ok, b} = Schema.for_module(CMDC.Tool.Examples.Echo)
    assert Schema.validate(a, %{"text" => "hi"}) == Schema.validate(b, %{"text" => "hi"})
  end

  test "a reloaded tool module is validated against its new schema (the module version rule)" do
    name = "CMDC.Tool.SchemaTest.Reloaded#{System.unique_integer([:positive])}"
    module = Module.concat([name])

    define = fn type ->
      Code.compile_string("""
      defmodule #{name} do
        def name, do: "reloaded"
        def description, do: "A tool compiled twice."
        def parameters, do: %{"type" => "object", "properties" => %{"x" => %{"type" => "#{type}"}}}
        def execute(_args, _ctx), do: {:ok, ""}
      end
      """)
    end

    previous = Code.get_compiler_option(:ignore_module_conflict)
    Code.put_compiler_option(:ignore_module_conflict, true)
    on_exit(fn -> Code.put_compiler_option(:ignore_module_conflict, previous) end)

    define.("integer")
    assert {:ok, _} = CMDC.Tool.validate(module, %{"x" => 1})
    assert {:error, [%{keyword: "type"}]} = CMDC.Tool.validate_json(module, ~s({"x": "a"}))

    define.("string")
    assert {:ok, _} = CMDC.Tool.validate(module, %{"x" => "a"})
    assert {:error, [%{keyword: "type"}]} = CMDC.Tool.validate_json(module, ~s({"x": 1}))
  end
end
