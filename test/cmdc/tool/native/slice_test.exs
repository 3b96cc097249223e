defmodule CMDC.Tool.SliceTest do
  # A long top-level list is validated a slice of elements per native call on the caller's
  # scheduler (native/cmdc_tool_core/src/compiled/slice.rs, `run_slice` in the NIF's
  # compiled.rs, `CMDC.Tool.Schema.validate/2`): the answer must be the one a single dirty
  # call gives, for every schema, list and place a slice ends.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Native, Schema, TermGen}

  # Where each slice of `list` ended, from the first call to the answer that is not `:more`;
  # each rest handed back is the list's own tail at that index.
  defp slices(schema, list), do: slices(schema, list, list, 0, [])

  defp slices(schema, list, rest, index, ends) do
    case Native.schema_validate_slice(schema, rest, index) do
      {:more, rest, next} ->
        assert next > index
        assert rest == Enum.drop(list, next)
        slices(schema, list, rest, next, [next | ends])

      other ->
        {other, Enum.reverse(ends)}
    end
  end

  defp normalize({:ok, _}), do: :ok

  defp normalize({:error, errors}),
    do: errors |> Enum.map(&{&1.path, &1.keyword, &1.schema_path}) |> Enum.sort()

  test "a long list is checked a slice per call, each slice a tail of the caller's list" do
    any = Schema.compile!(%{})
    list = Enum.to_list(1..200_000)
    assert {:done, ends} = slices(any, list)
    assert length(ends) > 10
    assert {:ok, ^list} = Schema.validate(any, list)
  end

  test "a slice's work is charged to the caller: a loop of slices is switched out as often" do
    any = Schema.compile!(%{})
    list = List.duplicate(1, 200_000)
    {:reductions, before} = Process.info(self(), :reductions)
    {:ok, _} = Schema.validate(any, list)
    {:reductions, later} = Process.info(self(), :reductions)
    # ~17 slices, each charged ~30% of a time slice (4,000 reductions).
    assert later - before > 10_000
  end

  test "a pattern over 2,000 literal words is decided in slices, with the same verdict" do
    words = Enum.map_join(0..1999, "|", &"w#{&1}")
    schema = Schema.compile!(%{"items" => %{"pattern" => "^(#{words})$"}})
    strings = List.duplicate("w1999", 2_000)
    assert {:more, _, first} = Native.schema_validate_slice(schema, strings, 0)
    assert first in 100..1_999
    assert {:ok, ^strings} = Schema.validate(schema, strings)
    bad = strings ++ ["nope"]
    assert {:error, [%{path: "/2000", keyword: "pattern"}]} = Schema.validate(schema, bad)
  end

  test "a schema that looks at the whole list is not sliced" do
    list = Enum.to_list(1..50_000)

    for source <- [
          %{"uniqueItems" => true},
          %{"anyOf" => [%{"type" => "array"}]},
          %{"enum" => [[1]]},
          %{"type" => "object"},
          false
        ] do
      schema = Schema.compile!(source)
      assert Native.schema_validate_slice(schema, list, 0) == :undecided, inspect(source)

      assert normalize(Schema.validate(schema, list)) ==
               normalize(Native.schema_validate_dirty(schema, list))
    end
  end

  test "lengths, prefixes, bad elements and improper tails give a single call's answer" do
    list = Enum.to_list(1..60_000)

    for {draft, source} <- [
          {"7", %{"maxItems" => 59_999}},
          {"7", %{"minItems" => 60_001}},
          {"7", %{"minItems" => 60_000, "maxItems" => 60_000}},
          {"7", %{"items" => [%{"const" => 1}, %{"const" => 2}], "additionalItems" => false}},
          {"7", %{"items" => [%{"const" => 1}, %{"const" => 2}]}},
          {"2020-12", %{"prefixItems" => [%{"const" => 1}], "items" => %{"minimum" => 2}}},
          {"2020-12", %{"prefixItems" => [%{"const" => 2}]}},
          {"7", %{"items" => %{"maximum" => 59_999}}}
        ] do
      schema = Schema.compile!(source, draft: draft)

      for term <- [list, list ++ [%{"k" => self()}], list ++ [1 | 2], [0 | list]] do
        expected = normalize(Native.schema_validate_dirty(schema, term))
        assert normalize(Schema.validate(schema, term)) == expected, inspect(source)
      end
    end
  end

  # Thousands of cases: a loaded machine needs more than the default minute.
  @tag timeout: 600_000
  test "sliced and single-call validation agree on random schemas and long lists" do
    TermGen.seed(ExUnit.configuration()[:seed])

    tally =
      Enum.reduce(1..80, %{sliced: 0, valid: 0, invalid: 0}, fn _, tally ->
        draft = Enum.random(["7", "2020-12"])
        source = TermGen.schema(draft)

        case Schema.compile(source, draft: draft) do
          {:error, _} -> tally
          {:ok, schema} -> Enum.reduce(1..3, tally, fn _, t -> compare(schema, source, t) end)
        end
      end)

    IO.puts("\nsliced vs single-call validation of long lists: #{inspect(tally)}")
    # Many lists are valid over several slices: the comparison is not vacuous.
    assert tally.sliced > 30 and tally.valid > 30 and tally.invalid > 30
  end

  defp compare(schema, source, tally) do
    element = TermGen.json(2)
    # Over a slice's budget (12,000 units) even when each element costs one.
    list = List.duplicate(element, 13_000)
    at = :rand.uniform(13_000) - 1
    poisoned = List.insert_at(list, at, TermGen.json(2))

    Enum.reduce([list, poisoned], tally, fn term, tally ->
      expected = Native.schema_validate_dirty(schema, term)
      got = Schema.validate(schema, term)
      why = "schema #{inspect(source)} on #{inspect(Enum.take(term, 3))}... (#{length(term)})"
      assert normalize(got) == normalize(expected), why
      if match?({:ok, _}, got), do: assert(elem(got, 1) === term, why)

      sliced? = match?({:more, _, _}, Native.schema_validate_slice(schema, term, 0))
      key = if match?({:ok, _}, got), do: :valid, else: :invalid

      tally
      |> Map.update!(key, &(&1 + 1))
      |> Map.update!(:sliced, &(&1 + if(sliced?, do: 1, else: 0)))
    end)
  end
end
