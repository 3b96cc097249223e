defmodule CMDC.Tool.Providers.FidelityTest do
  # Issue 44: every call a provider form admits reaches the tool or a warning said the form
  # accepts more; every call the original admits is admitted by the form or a warning said it
  # accepts less. Calls are generated from both schemas (hypothesis-jsonschema), not chosen by
  # hand; the whole corpus × every format is bench/fidelity.exs.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Fidelity, JSON, Providers, Runner}

  @moduletag timeout: 600_000
  @support Path.expand("../../../support", __DIR__)

  setup_all do
    edges = JSON.decode!(File.read!(Path.join(@support, "corpus/edge_schemas.json")))
    real = JSON.decode!(File.read!(Path.join(@support, "real_world_schemas.json")))
    %{edges: Map.new(edges ++ real, &{&1["name"], &1})}
  end

  @modes for f <- [:openai, :openai_responses, :anthropic, :gemini, :gemini_json_schema, :mcp],
             s <- [false, true],
             do: {f, s}

  # The schemas of the issue: property-less tools (the official MCP servers' and an empty
  # schema), mixed enums (Pydantic `Literal[1, "a", None]`), Draft 7 `dependencies`,
  # `dependentRequired`, IDN formats under Draft 7, a discriminated union with defaulted tags
  # and a generic page with a Literal/tuple union (both made by Pydantic 2).
  @names ~w(edge_empty_schema edge_no_properties edge_empty_properties edge_closed_empty
            edge_nested_open_object edge_enum_mixed edge_dependencies_d7 edge_dependent_required
            edge_idn_email_d7 pydantic_discriminated_defaults pydantic_generic_literal
            mcp_everything_get_env mcp_everything_get_tiny_image
            mcp_filesystem_list_allowed_directories pydantic_literal_mixed pydantic_discriminated)

  test "no call is refused in silence, in either direction, for any format", %{edges: all} do
    case Fidelity.python() do
      {:skip, reason} ->
        IO.puts("\nskipped: hypothesis-jsonschema could not be installed: #{reason}")

      {:ok, python} ->
        entries = Enum.map(@names, &Map.fetch!(all, &1))
        %{rows: rows, silent: silent} = Fidelity.check(python, entries, @modes, 10)
        assert Enum.all?(rows, fn {_, _, c} -> c.sent_calls > 0 and c.original_calls > 0 end)

        assert silent == [],
               Enum.map_join(silent, "\n", fn {kind, id, {call, why}} ->
                 "#{kind} #{id}: #{JSON.encode!(call)} -> #{inspect(why)}"
               end)
    end
  end

  test "Gemini: a tool whose original takes any key says the declaration takes none" do
    for schema <- [%{}, %{"type" => "object"}, %{"type" => "object", "properties" => %{}}] do
      tool = Fidelity.echo_tool(%{"name" => "open_#{map_size(schema)}", "schema" => schema})
      {[decl], warnings} = Providers.convert([tool], %{}, format: :gemini)
      refute Map.has_key?(hd(decl["functionDeclarations"]), "parameters")
      assert [%{path: "", keyword: "properties", message: message}] = warnings
      assert message =~ "accepts less"
      # The runner still takes what the original takes.
      call = %{id: "1", name: tool.name(), arguments: %{"any" => 1}}
      refute Runner.run([tool], call, CMDC.Context.new(session_id: "f")).is_error
    end

    closed = %{"type" => "object", "properties" => %{}, "additionalProperties" => false}
    tool = Fidelity.echo_tool(%{"name" => "closed_tool", "schema" => closed})
    {_, warnings} = Providers.convert([tool], %{}, format: :gemini)
    refute Enum.any?(warnings, &(&1.keyword == "properties"))
  end

  test "Draft 7 asserts idn-email and idn-hostname like every other format" do
    schema = %{
      "$schema" => "http://json-schema.org/draft-07/schema#",
      "properties" => %{
        "mail" => %{"type" => "string", "format" => "idn-email"},
        "site" => %{"type" => "string", "format" => "idn-hostname"}
      }
    }

    compiled = CMDC.Tool.Schema.compile!(schema)

    for bad <- [
          %{"mail" => ""},
          %{"mail" => "a\u0001@b.c"},
          %{"mail" => "nope"},
          %{"site" => "-x-"}
        ] do
      assert {:error, [%{keyword: "format"} | _]} = CMDC.Tool.Schema.validate(compiled, bad)
    end

    for good <- [%{"mail" => "ä@example.com"}, %{"site" => "bücher.example"}] do
      assert {:ok, _} = CMDC.Tool.Schema.validate(compiled, good)
    end
  end
end
