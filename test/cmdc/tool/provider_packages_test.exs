defmodule CMDC.Tool.ProviderPackagesTest do
  # Every provider format, strict and not, of a corpus of hostile schemas, checked by the
  # providers' own Python packages (openai, anthropic, google-genai, mcp, jsonschema) in one
  # Python process; plus generated calls: what a strict schema makes the model send is accepted
  # and means what the original schema means.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Providers, Schema}

  @moduletag timeout: 600_000
  @corpus Path.expand("../../support/hostile_schemas.json", __DIR__)
  @checker Path.expand("../../support/provider_check.py", __DIR__)
  # The versions checked (see ../shared/NOTES.md).
  @packages ~w(openai==3.54.0 anthropic==2.12.0 google-genai==3.4.0 mcp==2.3.0 jsonschema==4.26.0)
  @formats [:openai, :openai_responses, :anthropic, :gemini, :gemini_json_schema, :mcp]

  test "the corpus has at least 30 hostile schemas" do
    assert length(corpus()) >= 30
  end

  test "every format of every schema passes the providers' own packages" do
    case python() do
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

    input =
      Path.join(
        System.tmp_dir!(),
        "cmdc_provider_check_#{System.unique_integer([:positive])}.json"
      )

    File.write!(input, JSON.encode!(cases))
    {out, status} = System.cmd(python, [@checker, input], stderr_to_stdout: false)
    File.rm(input)
    assert status == 0, out
    report = JSON.decode!(out)
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

  # What the model sends under a strict schema for the call `args`: every property the schema
  # lists and `args` leaves out, as null, at every depth.
  defp fill_nulls(%{"$ref" => ref}, v, root), do: fill_nulls(resolve(root, ref), v, root)

  defp fill_nulls(%{"anyOf" => branches}, v, root) do
    Enum.find_value(branches, v, fn b ->
      filled = fill_nulls(b, v, root)
      if valid?(b, filled, root), do: filled
    end)
  end

  defp fill_nulls(%{"properties" => props}, v, root) when is_map(v) do
    Map.new(props, fn {k, sub} ->
      {k, if(Map.has_key?(v, k), do: fill_nulls(sub, v[k], root), else: nil)}
    end)
    |> Map.merge(Map.drop(v, Map.keys(props)))
  end

  defp fill_nulls(%{"items" => items}, v, root) when is_list(v) and is_map(items),
    do: Enum.map(v, &fill_nulls(items, &1, root))

  defp fill_nulls(_, v, _), do: v

  defp resolve(root, "#" <> pointer) do
    pointer
    |> String.split("/", trim: true)
    |> Enum.reduce(
      root,
      &Map.fetch!(&2, String.replace(String.replace(&1, "~1", "/"), "~0", "~"))
    )
  end

  defp valid?(schema, value, root) do
    defs = Map.take(root, ["$defs", "definitions"])
    match?({:ok, _}, Schema.validate(Schema.compile!(Map.merge(defs, schema)), value))
  end

  defp without_extra_nulls(v, like) when is_map(v) and is_map(like) do
    for {k, x} <- v, not (x == nil and not Map.has_key?(like, k)), into: %{} do
      {k, if(Map.has_key?(like, k), do: without_extra_nulls(x, like[k]), else: x)}
    end
  end

  defp without_extra_nulls(v, like)
       when is_list(v) and is_list(like) and length(v) == length(like),
       do: Enum.zip_with(v, like, &without_extra_nulls/2)

  defp without_extra_nulls(v, _), do: v

  # A venv in the test cache outside the checkout with the pinned packages, made once.
  defp python do
    venv = CMDC.Tool.TestCache.dir("provider_check_venv")
    py = Path.join([venv, "bin", "python"])

    if ready?(py),
      do: {:ok, py},
      else: CMDC.Tool.TestCache.with_lock("provider_check_venv", fn -> create(venv, py) end)
  end

  defp ready?(py) do
    probe = "import openai, anthropic, google.genai, mcp, jsonschema"
    File.exists?(py) and match?({_, 0}, System.cmd(py, ["-c", probe], stderr_to_stdout: true))
  end

  defp create(venv, py) do
    if ready?(py) do
      {:ok, py}
    else
      python3 = System.find_executable("python3") || raise "python3 is needed for this test"

      with {_, 0} <- System.cmd(python3, ["-m", "venv", venv], stderr_to_stdout: true),
           {_, 0} <-
             System.cmd(py, ["-m", "pip", "install", "--quiet" | @packages],
               stderr_to_stdout: true
             ) do
        {:ok, py}
      else
        {out, _} ->
          if out =~
               ~r/(Could not find a version|Failed to establish|Temporary failure|Network is unreachable|No matching distribution)/i,
             do: {:skip, String.slice(out, -300, 300)},
             else: raise("creating #{venv} failed: #{out}")
      end
    end
  end
end
