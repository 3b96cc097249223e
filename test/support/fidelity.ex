defmodule CMDC.Tool.Fidelity do
  @moduledoc false
  # Both directions of a provider output's meaning, on calls nobody chose by hand: calls are
  # generated (hypothesis-jsonschema, corpus/gen_calls.py) from the form sent to the provider
  # and from the original schema, then
  #   * every call the provider form admits is run through CMDC.Tool.Runner: it reaches the
  #     tool, or a warning said the form accepts more than the original (`:looser`);
  #   * every call the original admits is checked against the provider form (as the model must
  #     send it: strict OpenAI lists every key): admitted, or a warning said the form accepts
  #     less (`:tighter`).
  # A failure without such a warning is silent: what issue 44 counts. Gemini's OpenAPI form is
  # read as JSON Schema with `nullable` adding null; a declaration without `parameters` takes
  # no arguments.
  # Used by test/cmdc/tool/providers/fidelity_test.exs and bench/fidelity.exs.

  alias CMDC.Tool.{JSON, ProviderCheck, Providers, Runner, Schema}

  @gen Path.expand("corpus/gen_calls.py", __DIR__)
  @packages ~w(jsonschema==4.26.0 hypothesis==6.99.13 hypothesis-jsonschema==0.23.1)

  @looser ~r/accepts more|accepts some values the original refuses|no longer refused|now accepted|dropped/
  @tighter ~r/accepts less|refuses some|refused|can send no|takes none/

  @doc "The venv's python: `{:ok, path}` or `{:skip, reason}` (PyPI unreachable)."
  def python,
    do:
      CMDC.Tool.TestCache.venv(
        "fidelity_venv",
        @packages,
        "import hypothesis_jsonschema, jsonschema"
      )

  @doc """
  Checks `entries` (`%{"name", "schema", "args"}`) in every `{format, strict}` of `modes`;
  `n` calls generated per form. Returns `%{rows: [{format, strict, counts}], silent: [...]}`.
  """
  def check(python, entries, modes, n \\ 20) do
    cases =
      for e <- entries, {format, strict} <- modes do
        module = echo_tool(e)
        {[tool], warnings} = Providers.convert([module], %{}, format: format, strict: strict)
        sent = params(tool)

        %{
          entry: e,
          module: module,
          format: format,
          strict: strict,
          tool: tool,
          sent: sent,
          sent_schema: sent && as_json_schema(sent, format),
          warnings: Enum.map(warnings, & &1.message)
        }
      end

    requests =
      Enum.flat_map(cases, fn c ->
        [%{id: key(c, :sent), schema: c.sent_schema || %{"maxProperties" => 0}, n: n}] ++
          [%{id: key(c, :original), schema: c.entry["schema"], n: n}]
      end)
      |> Enum.uniq_by(& &1.id)

    generated = generate(python, requests)

    results = Enum.map(cases, &judge(&1, generated))

    rows =
      results
      |> Enum.group_by(&{&1.format, &1.strict})
      |> Enum.map(fn {{f, s}, rs} ->
        {f, s, Enum.reduce(rs, %{}, &Map.merge(&2, &1.counts, fn _, a, b -> a + b end))}
      end)
      |> Enum.sort()

    %{rows: rows, silent: Enum.flat_map(results, & &1.silent)}
  end

  defp key(c, :sent), do: "sent " <> JSON.encode!(c.sent_schema || %{"maxProperties" => 0})
  defp key(c, :original), do: "original " <> JSON.encode!(c.entry["schema"])

  defp judge(c, generated) do
    looser? = Enum.any?(c.warnings, &(&1 =~ @looser))
    tighter? = Enum.any?(c.warnings, &(&1 =~ @tighter))
    id = "#{c.entry["name"]} #{c.format} strict=#{c.strict}"

    admits = admitter(c)
    original = Schema.compile!(c.entry["schema"])

    # Only calls their own schema admits (the generator does not know every keyword, e.g.
    # `dependentRequired`).
    from_sent = calls(generated[key(c, :sent)]) |> Enum.filter(&(admits.(&1) == nil))

    from_original =
      (calls(generated[key(c, :original)]) ++ (c.entry["args"] || []))
      |> Enum.filter(&match?({:ok, _}, Schema.validate(original, &1)))

    sent_refused = for call <- from_sent, reason = refused_by_runner(c, call), do: {call, reason}

    original_refused = for call <- from_original, reason = admits.(call), do: {call, reason}

    silent =
      if(looser?, do: [], else: Enum.map(sent_refused, &{:runner_refused, id, &1})) ++
        if tighter?, do: [], else: Enum.map(original_refused, &{:form_refuses, id, &1})

    %{
      format: c.format,
      strict: c.strict,
      silent: silent,
      counts: %{
        sent_calls: length(from_sent),
        original_calls: length(from_original),
        runner_refused: length(sent_refused),
        runner_refused_silent: if(looser?, do: 0, else: length(sent_refused)),
        form_refuses: length(original_refused),
        form_refuses_silent: if(tighter?, do: 0, else: length(original_refused)),
        generation_errors:
          Enum.count(
            [generated[key(c, :sent)], generated[key(c, :original)]],
            &(&1["error"] != nil)
          )
      }
    }
  end

  defp calls(%{"calls" => calls}), do: Enum.filter(calls, &is_map/1)
  defp calls(_), do: []

  # nil when the runner takes the call to the tool; the error text otherwise.
  defp refused_by_runner(c, call) do
    result = Runner.run([c.module], %{id: "f", name: tool_name(c.tool), arguments: call}, ctx())
    if result.is_error, do: result.content
  end

  # nil when the provider form admits the call as the model sends it; the errors otherwise.
  defp admitter(%{sent: nil}), do: fn call -> if call != %{}, do: "no parameters are sent" end

  defp admitter(c) do
    case Schema.compile(c.sent_schema, draft: draft(c)) do
      {:ok, compiled} ->
        fn call ->
          case Schema.validate(compiled, as_model_sends(c, call)) do
            {:ok, _} -> nil
            {:error, errors} -> inspect(errors, limit: 3)
          end
        end

      {:error, message} ->
        fn _ -> "the provider form does not compile: #{message}" end
    end
  end

  defp draft(%{strict: true}), do: "2020-12"
  defp draft(%{format: f}) when f in [:mcp, :gemini, :gemini_json_schema], do: "2020-12"
  defp draft(_), do: nil

  defp as_model_sends(%{strict: true, format: f, sent: sent}, call)
       when f in [:openai, :openai_responses],
       do: ProviderCheck.fill_nulls(sent, call, sent)

  defp as_model_sends(_c, call), do: call

  @doc "A Gemini OpenAPI schema as the JSON Schema of what the model sends under it."
  def as_json_schema(schema, format) when format == :gemini, do: gemini(schema)
  def as_json_schema(schema, _format), do: schema

  defp gemini(%{} = s) do
    s =
      s
      |> Map.new(fn
        {"properties", props} -> {"properties", Map.new(props, fn {k, v} -> {k, gemini(v)} end)}
        {"items", items} -> {"items", gemini(items)}
        {"anyOf", bs} -> {"anyOf", Enum.map(bs, &gemini/1)}
        {"additionalProperties", %{} = v} -> {"additionalProperties", gemini(v)}
        other -> other
      end)
      |> Map.drop(["example", "propertyOrdering"])

    case Map.pop(s, "nullable") do
      {true, rest} -> %{"anyOf" => [rest, %{"type" => "null"}]}
      {_, rest} -> rest
    end
  end

  defp gemini(other), do: other

  defp params(%{"function" => %{"parameters" => p}}), do: p
  defp params(%{"parameters" => p}), do: p
  defp params(%{"input_schema" => p}), do: p
  defp params(%{"inputSchema" => p}), do: p

  defp params(%{"functionDeclarations" => [d]}),
    do: d["parameters"] || d["parametersJsonSchema"]

  defp params(_), do: nil

  defp tool_name(%{"function" => %{"name" => name}}), do: name
  defp tool_name(%{"functionDeclarations" => [%{"name" => name}]}), do: name
  defp tool_name(%{"name" => name}), do: name

  defp ctx, do: CMDC.Context.new(session_id: "fidelity")

  defp generate(python, requests) do
    input =
      Path.join(System.tmp_dir!(), "cmdc_fidelity_#{System.unique_integer([:positive])}.json")

    File.write!(input, JSON.encode!(requests))
    # hypothesis keeps a cache in its working directory: not in the checkout.
    {out, status} = System.cmd(python, [@gen, input], cd: System.tmp_dir!())
    File.rm(input)
    if status != 0, do: raise("gen_calls.py failed (#{status}): #{out}")
    JSON.decode!(out)
  end

  @doc "A tool with `entry`'s schema that answers with the arguments it got, as JSON."
  def echo_tool(%{"name" => name, "schema" => schema}) do
    module = Module.concat(__MODULE__, Macro.camelize(name))

    unless Code.ensure_loaded?(module) do
      body =
        quote do
          @behaviour CMDC.Tool
          def name, do: unquote(name)
          def description, do: unquote("Fidelity corpus schema #{name}.")
          def parameters, do: unquote(Macro.escape(schema))
          def execute(args, _context), do: {:ok, CMDC.Tool.JSON.encode!(args)}
        end

      Module.create(module, body, Macro.Env.location(__ENV__))
    end

    module
  end
end
