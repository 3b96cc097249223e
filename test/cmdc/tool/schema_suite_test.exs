defmodule CMDC.Tool.SchemaSuiteTest do
  # The official JSON Schema Test Suite (required cases), read from ../shared, never copied.
  # Documents are decoded by the NIF and validated through the public Elixir API.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Schema}

  @suite Path.expand("../../../../shared/json-schema-test-suite", __DIR__)
  @remotes Path.join(@suite, "remotes")

  # Cases the validator is known to get wrong, with the reason. Empty: every case passes.
  @known_gaps %{}

  for {draft, dir} <- [{"7", "draft7"}, {"2020-12", "draft2020-12"}] do
    @tag timeout: 120_000
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

    passed = Enum.count(results, &match?({_, :pass}, &1))
    gaps = Enum.count(results, fn {name, _} -> Map.has_key?(@known_gaps, name) end)

    IO.puts(
      "\nJSON Schema Test Suite #{dir}: #{passed}/#{length(results)} required cases passed" <>
        ", #{gaps} known gaps"
    )

    assert failures == [],
           "#{length(failures)} cases failed:\n" <>
             Enum.map_join(Enum.take(failures, 30), "\n", fn {n, why} -> "  #{n} -- #{why}" end)
  end

  defp run_case(draft, schema, %{"data" => data, "valid" => expected}) do
    case Schema.compile(schema, draft: draft, dirs: %{"http://localhost:1234/" => @remotes}) do
      {:ok, compiled} ->
        case {Schema.validate(compiled, data), expected} do
          {{:ok, _}, true} -> :pass
          {{:error, [_ | _]}, false} -> :pass
          {got, _} -> {:fail, "expected valid=#{expected}, got #{inspect(got, limit: 3)}"}
        end

      {:error, message} ->
        {:fail, "schema did not compile: #{message}"}
    end
  end
end
