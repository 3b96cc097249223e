defmodule CMDC.Tool.Providers.RealWorldTest do
  # Real-world tool schemas (test/support/real_world_schemas.json: Pydantic v2, zod 3 and 4,
  # the official MCP servers' input schemas, OpenAPI 3.0-derived; made by
  # test/support/corpus/) × every format × strict on/off:
  #   * every output is accepted by the provider's own package (provider_check.py);
  #   * every call the original accepts, sent as the model sends it under that output, goes
  #     through CMDC.Tool.Runner to the tool and arrives meaning what it meant (a strict-mode
  #     null for a field with a default arrives as the default), or is refused only where a
  #     warning said the output accepts less;
  #   * no strict-mode null reaches a tool (a leak).
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, ProviderCheck, Providers, Runner}

  @moduletag timeout: 900_000
  @corpus Path.expand("../../../support/real_world_schemas.json", __DIR__)

  # Hand-written edge cases beside them (test/support/corpus/edge_schemas.json: property-less
  # objects, mixed enums, Draft 7 `dependencies`, IDN formats, a root `anyOf`, 1,200 enum values).
  @edges Path.expand("../../../support/corpus/edge_schemas.json", __DIR__)

  setup_all do
    entries = JSON.decode!(File.read!(@corpus)) ++ JSON.decode!(File.read!(@edges))
    tools = Map.new(entries, &{&1["name"], echo_tool(&1)})
    %{entries: entries, tools: tools}
  end

  test "the corpus has at least 100 real-world schemas of each kind", %{entries: entries} do
    assert length(entries) >= 100
    kinds = entries |> Enum.map(&hd(String.split(&1["name"], "_"))) |> Enum.frequencies()
    for kind <- ~w(pydantic zod3 zod4 mcp openapi), do: assert(kinds[kind] >= 5, kind)
  end

  test "generated calls reach the tool meaning what they meant, or a warning said why not",
       %{entries: entries, tools: tools} do
    rows =
      for format <- Providers.formats(), strict <- [false, true] do
        counts =
          Enum.reduce(entries, %{outputs: 0, calls: 0, refused_warned: 0}, fn e, acc ->
            check_calls(e, tools[e["name"]], format, strict, acc)
          end)

        {format, strict, counts}
      end

    IO.puts(
      "\nreal-world corpus through the runner (format × strict: outputs, calls, refused as warned):"
    )

    for {format, strict, c} <- rows do
      IO.puts(
        "  #{format} strict=#{strict}: #{c.outputs} outputs, #{c.calls} calls ok, " <>
          "#{c.refused_warned} refused where a warning said so"
      )
    end
  end

  test "every output passes the providers' own packages", %{entries: entries, tools: tools} do
    case ProviderCheck.python() do
      {:ok, python} ->
        check_packages(python, entries, tools)

      {:skip, reason} ->
        IO.puts("\nskipped: the provider packages could not be installed: #{reason}")
    end
  end

  defp check_calls(entry, module, format, strict, acc) do
    {[tool], warnings} = Providers.convert([module], %{}, format: format, strict: strict)
    tightened = Enum.any?(warnings, &(&1.message =~ ~r/accepts less|refuses some|refused/))
    acc = Map.update!(acc, :outputs, &(&1 + 1))

    Enum.reduce(entry["args"], acc, fn args, acc ->
      sent = sent(tool, format, strict, args)
      result = Runner.run([module], %{id: "c", name: tool_name(tool), arguments: sent}, ctx())

      cond do
        not result.is_error ->
          got = JSON.decode!(result.content)

          assert arrived?(got, args, entry["schema"]),
                 "#{entry["name"]} #{format} strict=#{strict}: sent #{JSON.encode!(sent)}, " <>
                   "the tool got #{result.content}, meant #{JSON.encode!(args)}"

          Map.update!(acc, :calls, &(&1 + 1))

        tightened ->
          Map.update!(acc, :refused_warned, &(&1 + 1))

        true ->
          flunk(
            "#{entry["name"]} #{format} strict=#{strict}: #{JSON.encode!(sent)} refused " <>
              "with no warning: #{result.content}"
          )
      end
    end)
  end

  # The tool got what the call meant: the same values, a key absent from the call present
  # only with its default, or as a null the original schema takes there (strict mode's null is
  # then the model's: kept, as it may be meant; a null the original refuses there is a leak).
  defp arrived?(got, args, schema, root \\ nil)

  defp arrived?(got, args, %{"$ref" => "#/" <> ref}, root),
    do: arrived?(got, args, get_in(root, String.split(ref, "/")), root)

  defp arrived?(got, args, schema, nil), do: arrived?(got, args, schema, schema)

  defp arrived?(got, args, %{} = schema, root)
       when is_map_key(schema, "anyOf") or is_map_key(schema, "oneOf") do
    branches = schema["anyOf"] || schema["oneOf"]
    rest = Map.drop(schema, ["anyOf", "oneOf"])
    Enum.any?(branches, &arrived?(got, args, Map.merge(rest, &1), root))
  end

  defp arrived?(got, args, schema, root) when is_map(got) and is_map(args) do
    props = schema["properties"] || %{}

    Enum.all?(got, fn {k, v} ->
      case Map.fetch(args, k) do
        {:ok, meant} -> arrived?(v, meant, props[k] || %{}, root)
        :error -> v == get_in(props, [k, "default"]) or (v == nil and takes_null?(props[k]))
      end
    end) and Enum.all?(Map.keys(args), &Map.has_key?(got, &1))
  end

  defp arrived?(got, args, schema, root)
       when is_list(got) and is_list(args) and length(got) == length(args) do
    items = if is_map(schema["items"]), do: schema["items"], else: %{}
    Enum.zip(got, args) |> Enum.all?(fn {g, a} -> arrived?(g, a, items, root) end)
  end

  defp arrived?(got, args, _schema, _root), do: got == args

  defp takes_null?(nil), do: false

  defp takes_null?(schema) do
    match?({:ok, _}, CMDC.Tool.Schema.validate(CMDC.Tool.Schema.compile!(schema), nil))
  end

  defp check_packages(python, entries, tools) do
    cases =
      for e <- entries, format <- Providers.formats(), strict <- [false, true] do
        {tools_list, warnings} =
          Providers.convert([tools[e["name"]]], %{}, format: format, strict: strict)

        %{
          id: "#{e["name"]} #{format} strict=#{strict}",
          format: format,
          strict: strict,
          tools: tools_list,
          warned: Enum.map(warnings, & &1.message),
          original: e["schema"],
          dialect: dialect(e),
          args: e["args"],
          sent: Enum.map(e["args"], &sent(hd(tools_list), format, strict, &1))
        }
      end

    report = ProviderCheck.run(python, cases)

    per =
      Enum.frequencies_by(
        report["failures"],
        &(&1["id"] |> String.split(" ") |> tl() |> Enum.join(" "))
      )

    {warned, silent} = Enum.split_with(report["failures"], & &1["warned"])

    IO.puts(
      "\nprovider packages, real-world corpus: #{length(cases)} outputs; checks " <>
        "#{inspect(report["checked"])}; #{length(warned)} refused where a warning said so " <>
        "#{inspect(per)}"
    )

    for f <- warned, do: IO.puts("  (warned) #{f["id"]}: #{String.slice(f["error"], 0, 200)}")
    assert silent == [], Enum.map_join(silent, "\n", &"#{&1["id"]}: #{&1["error"]}")
  end

  defp dialect(%{"name" => "openapi_" <> _}), do: "4"
  defp dialect(_), do: "2020-12"

  # What the model sends for the call `args` under this output: OpenAI strict mode lists every
  # property, so the left-out ones come as null.
  defp sent(tool, format, true, args) when format in [:openai, :openai_responses] do
    params = tool["parameters"] || tool["function"]["parameters"]
    ProviderCheck.fill_nulls(params, args, params)
  end

  defp sent(_tool, _format, _strict, args), do: args

  defp tool_name(%{"function" => %{"name" => name}}), do: name
  defp tool_name(%{"name" => name}), do: name
  defp tool_name(%{"functionDeclarations" => [%{"name" => name}]}), do: name

  defp ctx, do: CMDC.Context.new(session_id: "real-world")

  # A tool that answers with the arguments it got, as JSON.
  defp echo_tool(%{"name" => name, "schema" => schema}) do
    module = Module.concat(__MODULE__, Macro.camelize(name))

    body =
      quote do
        @behaviour CMDC.Tool
        def name, do: unquote(name)
        def description, do: unquote("Real-world schema #{name}.")
        def parameters, do: unquote(Macro.escape(schema))
        def execute(args, _context), do: {:ok, CMDC.Tool.JSON.encode!(args)}
      end

    Module.create(module, body, Macro.Env.location(__ENV__))
    module
  end
end
