defmodule CMDC.Tool.ProviderPackagesTest do
  # Every provider format, strict and not, of a corpus of hostile schemas, checked by the
  # providers' own Python packages (openai, anthropic, google-genai, mcp, jsonschema) in one
  # Python process; plus generated calls: what a strict schema makes the model send is accepted
  # and means what the original schema means.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, ProviderCheck, Providers}

  @moduletag timeout: 600_000
  @corpus Path.expand("../../../support/hostile_schemas.json", __DIR__)
  @formats [:openai, :openai_responses, :anthropic, :gemini, :gemini_json_schema, :mcp]

  test "the corpus has at least 30 hostile schemas" do
    assert length(corpus()) >= 30
  end

  test "every format of every schema passes the providers' own packages" do
    case ProviderCheck.python() do
      {:ok, python} ->
        check_with(python)

      {:skip, reason} ->
        IO.puts("\nskipped: the provider packages could not be installed: #{reason}")
    end
  end

  test "what strict mode makes the model send round-trips to what the original means" do
    for %{"name" => name, "schema" => schema, "args" => args_list} <- corpus() do
      module = CMDC.Tool.Test.Factory.tool(name, "Hostile: #{name}.", schema)
      {[tool], warnings} = Providers.convert([module], %{}, format: :openai, strict: true)
      strict = tool["function"]["parameters"]
      exact = warnings == []

      for args <- args_list do
        sent = fill_nulls(strict, args, strict)
        assert {:ok, back} = CMDC.Tool.validate(module, sent), "#{name}: #{JSON.encode!(sent)}"
        assert {:ok, _} = CMDC.Tool.validate(module, args)

        if exact,
          do: assert(without_extra_nulls(back, args) == args, "#{name}: #{inspect(back)}")
      end
    end
  end

  defp check_with(python) do
    cases =
      for %{"name" => name, "schema" => schema, "args" => args} <- corpus(),
          format <- @formats,
          strict <- [false, true] do
        module = CMDC.Tool.Test.Factory.tool(name, "Hostile: #{name}.", schema)
        {tools, warnings} = Providers.convert([module], %{}, format: format, strict: strict)

        sent =
          case {format, strict} do
            {f, true} when f in [:openai, :openai_responses] ->
              params =
                if f == :openai,
                  do: hd(tools)["function"]["parameters"],
                  else: hd(tools)["parameters"]

              Enum.map(args, &fill_nulls(params, &1, params))

            _ ->
              args
          end

        %{
          id: "#{name} #{format} strict=#{strict}",
          format: format,
          strict: strict,
          tools: tools,
          warned: Enum.map(warnings, & &1.message),
          original: schema,
          args: args,
          sent: sent
        }
      end

    report = ProviderCheck.run(python, cases)
    # cmdc's own shape (:openai, not strict) keeps the parameters as the module returns them,
    # even `true`, which the openai package refuses: the one refusal no warning announces.
    {kept, failures} =
      Enum.split_with(report["failures"], &(&1["id"] == "true_parameters openai strict=false"))

    assert length(kept) <= 1
    {warned, silent} = Enum.split_with(failures, & &1["warned"])

    IO.puts(
      "\nprovider packages: #{length(cases)} outputs; checks #{inspect(report["checked"])}; " <>
        "#{length(warned)} refused where a warning said so"
    )

    for f <- warned, do: IO.puts("  (warned) #{f["id"]}: #{String.slice(f["error"], 0, 160)}")
    assert silent == [], Enum.map_join(silent, "\n", &"#{&1["id"]}: #{&1["error"]}")
  end

  defp corpus, do: @corpus |> File.read!() |> JSON.decode!()

  defp fill_nulls(schema, v, root), do: ProviderCheck.fill_nulls(schema, v, root)

  defp without_extra_nulls(v, like) when is_map(v) and is_map(like) do
    for {k, x} <- v, not (x == nil and not Map.has_key?(like, k)), into: %{} do
      {k, if(Map.has_key?(like, k), do: without_extra_nulls(x, like[k]), else: x)}
    end
  end

  defp without_extra_nulls(v, like)
       when is_list(v) and is_list(like) and length(v) == length(like),
       do: Enum.zip_with(v, like, &without_extra_nulls/2)

  defp without_extra_nulls(v, _), do: v
end
