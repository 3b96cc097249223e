defmodule CMDC.Tool.SchemaSuiteTest do
  # The official JSON Schema Test Suite (required cases), read from ../shared (or
  # $JSON_SCHEMA_TEST_SUITE), never copied. Documents are decoded by the NIF and validated
  # through the public Elixir API, through the `jsonschema` path alone, and through the compiled
  # program alone (direct and API term reads): each must give the suite's answer wherever it
  # decides.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Native, Schema}

  @suite System.get_env(
           "JSON_SCHEMA_TEST_SUITE",
           Path.expand("../../../../../shared/json-schema-test-suite", __DIR__)
         )
  @remotes Path.join(@suite, "remotes")

  # Any user's clone lacks ../shared: the suite is then skipped with the reason printed, not failed.
  @missing not File.dir?(Path.join(@suite, "tests")) &&
             "the JSON Schema Test Suite is not at #{@suite}; set JSON_SCHEMA_TEST_SUITE to a " <>
               "checkout of https://github.com/json-schema-org/JSON-Schema-Test-Suite to run it"

  if @missing, do: IO.puts(:stderr, "\nskipping CMDC.Tool.SchemaSuiteTest: #{@missing}")

  # Cases the validator is known to get wrong, with the reason. Empty: every case passes.
  @known_gaps %{}

  for {draft, dir} <- [{"7", "draft7"}, {"2020-12", "draft2020-12"}] do
    @tag timeout: 120_000
    if @missing, do: @tag(skip: @missing)

    test "every required case of #{dir}" do
      run_draft(unquote(draft), unquote(dir))
    end
  end

  defp run_draft(draft, dir) do
    files = Path.wildcard(Path.join([@suite, "tests", dir, "*.json"]))
    assert files != [], "the test suite is missing at #{@suite}"

    results =
      for file <- files,
          group <- JSON.decode!(File.read!(file)),
          test <- group["tests"] do
        name = "#{dir}/#{Path.basename(file)}: #{group["description"]}: #{test["description"]}"
        {name, run_case(draft, group["schema"], test)}
      end

    failures =
      for {name, {:fail, why}} <- results, not Map.has_key?(@known_gaps, name), do: {name, why}

    passed = Enum.count(results, &match?({_, {:pass, _}}, &1))
    decided = Enum.count(results, &match?({_, {:pass, true}}, &1))
    gaps = Enum.count(results, fn {name, _} -> Map.has_key?(@known_gaps, name) end)

    IO.puts(
      "\nJSON Schema Test Suite #{dir}: #{passed}/#{length(results)} required cases passed" <>
        ", #{gaps} known gaps; the compiled program decided #{decided} of them itself"
    )

    assert failures == [],
           "#{length(failures)} cases failed:\n" <>
             Enum.map_join(Enum.take(failures, 30), "\n", fn {n, why} -> "  #{n} -- #{why}" end)
  end

  defp run_case(draft, schema, %{"data" => data, "valid" => expected}) do
    case Schema.compile(schema, draft: draft, dirs: %{"http://localhost:1234/" => @remotes}) do
      {:ok, compiled} ->
        public = Schema.validate(compiled, data)
        jsonschema = Native.schema_validate_api(compiled, data)
        program = Native.schema_validate_compiled(compiled, data, false)
        program_api = Native.schema_validate_compiled(compiled, data, true)

        cond do
          not agrees?(public, expected) ->
            {:fail, "public API: expected valid=#{expected}, got #{inspect(public, limit: 3)}"}

          not agrees?(jsonschema, expected) ->
            {:fail, "jsonschema path: expected valid=#{expected}, got #{inspect(jsonschema)}"}

          program != program_api ->
            {:fail, "program: direct reads #{program}, API reads #{program_api}"}

          program in [:valid, :invalid] and program != if(expected, do: :valid, else: :invalid) ->
            {:fail, "compiled program: expected valid=#{expected}, got #{program}"}

          true ->
            {:pass, program in [:valid, :invalid]}
        end

      {:error, message} ->
        {:fail, "schema did not compile: #{message}"}
    end
  end

  defp agrees?({:ok, _}, true), do: true
  defp agrees?(:ok, true), do: true
  defp agrees?({:error, [_ | _]}, false), do: true
  defp agrees?(_, _), do: false
end
