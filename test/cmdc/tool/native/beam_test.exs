defmodule CMDC.Tool.BeamTest do
  # BEAM terms validated in place (native/cmdc_tool_nif/src/beam.rs) must agree with the
  # converting path (term -> serde_json::Value) on every input.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Native, Schema, TermGen}

  @document %{
    "string" => "héllo",
    "integer" => 42,
    "float" => 1.5,
    "boolean" => true,
    "null" => nil,
    "array" => [10, 20, 30],
    "duplicates" => [1, %{"a" => 1}, %{"a" => 1}],
    "object" => %{"nested" => "value"}
  }

  test "the representation meets jsonschema's accessor contract, string keys" do
    assert Native.beam_conformance(@document) == {:ok, :ok}
  end

  test "the representation meets jsonschema's accessor contract, atom keys" do
    atom_keyed =
      Map.new(@document, fn {k, v} -> {String.to_atom(k), v} end)
      |> Map.put(:object, %{nested: "value"})

    assert Native.beam_conformance(atom_keyed) == {:ok, :ok}
  end

  @schemas [
    %{"type" => "object"},
    %{
      "type" => "object",
      "properties" => %{
        "a" => %{"type" => ["integer", "null"]},
        "name" => %{"type" => "string", "minLength" => 2, "maxLength" => 5},
        "count" => %{"type" => "number", "minimum" => 0, "multipleOf" => 0.5},
        "tags" => %{"type" => "array", "items" => %{"type" => "string"}, "uniqueItems" => true},
        "kind" => %{"enum" => ["fast", "slow", 1, nil]},
        "id" => %{"const" => 1}
      },
      "required" => ["a"],
      "additionalProperties" => %{"type" => ["string", "number", "boolean", "null"]}
    },
    %{"type" => "array", "uniqueItems" => true},
    %{"anyOf" => [%{"type" => "string"}, %{"type" => "array", "maxItems" => 2}]},
    %{"propertyNames" => %{"maxLength" => 3}, "minProperties" => 1},
    %{"not" => %{"type" => "object", "required" => ["b"]}},
    %{"items" => %{"oneOf" => [%{"type" => "integer"}, %{"type" => "boolean"}]}},
    %{"contains" => %{"const" => 1.0}},
    %{
      "$schema" => "https://json-schema.org/draft/2020-12/schema",
      "prefixItems" => [%{"type" => "number"}],
      "unevaluatedItems" => false,
      "unevaluatedProperties" => false,
      "properties" => %{"x" => true}
    }
  ]

  test "terms are read directly from memory on this emulator (the layout probe passed)" do
    # 64-bit OTP 25: the shapes in layout.rs match; on another emulator this names the fallback.
    assert Native.term_layout() == :direct
  end

  # Thousands of cases: a loaded machine needs more than the default minute.
  @tag timeout: 600_000
  test "in-place (direct reads and API reads) and converting paths agree on random terms" do
    TermGen.seed(ExUnit.configuration()[:seed])
    compiled = Enum.map(@schemas, &Schema.compile!/1)

    for _ <- 1..3000 do
      term = if :rand.uniform(3) == 1, do: TermGen.map(3), else: TermGen.json(3)

      for schema <- compiled do
        in_place = normalize(Native.schema_validate_dirty(schema, term))
        api = normalize(Native.schema_validate_api(schema, term))
        converted = normalize(Native.schema_validate_converting(schema, term))
        assert in_place == converted, "paths disagree on #{inspect(term)}"
        assert api == in_place, "direct and API reads disagree on #{inspect(term)}"
      end
    end
  end

  # Thousands of cases: a loaded machine needs more than the default minute.
  @tag timeout: 600_000
  test "the compiled program and the jsonschema path agree on random schemas and terms" do
    TermGen.seed(ExUnit.configuration()[:seed])
    tally = %{valid: 0, invalid: 0, fallback: 0, unsupported: 0}

    tally =
      Enum.reduce(1..300, tally, fn _, tally ->
        draft = Enum.random(["7", "2020-12"])
        source = TermGen.schema(draft)

        case Schema.compile(source, draft: draft) do
          # A generated schema can break its meta-schema (e.g. a `$ref` to a missing `$defs`).
          {:error, _} ->
            tally

          {:ok, schema} ->
            Enum.reduce(1..30, tally, fn _, tally ->
              term = if :rand.uniform(3) == 1, do: TermGen.map(3), else: TermGen.json(3)
              program = Native.schema_validate_compiled(schema, term, false)
              reference = Native.schema_validate_api(schema, term)
              why = "schema #{inspect(source)} (draft #{draft}) on #{inspect(term)}"
              assert Native.schema_validate_compiled(schema, term, true) == program, why

              case program do
                :valid ->
                  assert {:ok, _} = reference, "program valid, jsonschema not: " <> why

                :invalid ->
                  assert {:error, _} = reference, "program invalid, jsonschema ok: " <> why

                _ ->
                  :ok
              end

              assert normalize(Native.schema_validate_dirty(schema, term)) ==
                       normalize(reference),
                     why

              Map.update!(tally, program, &(&1 + 1))
            end)
        end
      end)

    IO.puts("\ncompiled program vs jsonschema on random schemas: #{inspect(tally)}")
    # Most generated schemas and terms stay on the program: the comparison is not vacuous.
    assert tally.valid > 300 and tally.invalid > 300
  end

  test "non-JSON terms give the same error on both paths" do
    schema = Schema.compile!(%{"type" => "object"})

    for _ <- 1..50 do
      {term, path} = TermGen.poisoned()
      assert {:error, [%{keyword: "json", path: ^path} = a]} = Schema.validate(schema, term)
      assert {:error, [b]} = Native.schema_validate_converting(schema, term)
      assert {:error, [c]} = Native.schema_validate_api(schema, term)
      assert a.message == b.message
      assert c == a
    end
  end

  test "the depth limit is the same on every path, for lists and maps" do
    schema = Schema.compile!(%{})

    for depth <- 126..130, wrap <- [&[&1], &%{"a" => &1}, &%{a: [&1]}] do
      term = Enum.reduce(1..depth, "leaf", fn _, acc -> wrap.(acc) end)
      direct = Native.schema_validate_dirty(schema, term)
      assert Native.schema_validate_api(schema, term) == direct
      assert normalize(Native.schema_validate_converting(schema, term)) == normalize(direct)
    end

    assert {:error, [%{message: message}]} =
             Schema.validate(schema, Enum.reduce(1..300, 1, fn _, acc -> [acc] end))

    assert message =~ "nested deeper than 128"
  end

  test "a key given as an atom and as a string in a small map is refused" do
    schema = Schema.compile!(%{"type" => "object"})

    assert {:error, [%{path: "/x", message: message}]} =
             Schema.validate(schema, %{"x" => %{:mode => 1, "mode" => 2}})

    assert message =~ ~s(key "mode" is given twice)
  end

  describe "numbers compare mathematically" do
    test "enum and const: 1 == 1.0" do
      s = Schema.compile!(%{"enum" => [1, "a"]})
      assert {:ok, _} = Schema.validate(s, 1.0)
      c = Schema.compile!(%{"const" => 2.0})
      assert {:ok, _} = Schema.validate(c, 2)
      assert {:error, _} = Schema.validate(c, 2.5)
    end

    test "uniqueItems: 1 and 1.0 are the same item" do
      s = Schema.compile!(%{"uniqueItems" => true})
      assert {:error, [%{keyword: "uniqueItems"}]} = Schema.validate(s, [1, 1.0])
      assert {:error, _} = Schema.validate(s, [%{"a" => 1}, %{a: 1.0}])
      assert {:ok, _} = Schema.validate(s, [1, 2, "1"])
    end

    test "every number form: small, negative, unsigned 64-bit, big, float" do
      s = Schema.compile!(%{"type" => "integer", "minimum" => -(2 ** 80)})

      for n <- [0, -5, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, 2 ** 100, -(2 ** 70), 3.0] do
        assert {:ok, ^n} = Schema.validate(s, n), inspect(n)
      end

      assert {:error, [%{keyword: "type"}]} = Schema.validate(s, 3.5)
      assert {:error, [%{keyword: "minimum"}]} = Schema.validate(s, -(2 ** 81))
    end
  end

  test "atom keys, atom values and large objects" do
    s =
      Schema.compile!(%{
        "type" => "object",
        "properties" => %{"mode" => %{"enum" => ["fast"]}, "k40" => %{"type" => "integer"}},
        "required" => ["mode", "k40"]
      })

    big = Map.new(1..100, &{"k#{&1}", &1})
    assert {:ok, _} = Schema.validate(s, Map.put(big, :mode, :fast))

    assert {:error, [%{path: "/k40"}]} =
             Schema.validate(s, %{big | "k40" => "x"} |> Map.put(:mode, "fast"))

    assert {:error, [%{message: msg}]} = Schema.validate(s, Map.put(big, :k3, 1))
    assert msg =~ ~s(key "k3" is given twice)
  end

  test "a large map crosses from the normal to the dirty scheduler without a false error" do
    s = Schema.compile!(%{"type" => "object"})
    files = Enum.map(1..6000, &%{"path" => "f#{&1}", "content" => String.duplicate("x", 300)})
    assert {:error, :yield} = Native.schema_validate(s, %{"files" => files})
    assert {:ok, _} = Schema.validate(s, %{"files" => files})
  end

  defp normalize({:ok, _}), do: :ok

  defp normalize({:error, errors}),
    do: errors |> Enum.map(&{&1.path, &1.keyword, &1.schema_path}) |> Enum.sort()
end
