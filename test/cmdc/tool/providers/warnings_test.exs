defmodule CMDC.Tool.Providers.WarningsTest do
  # The `warnings:` option of to_schema/3 and to_schema_json/3, with and without deferred
  # loading: every tool's meaning changes are reported once, deferred or always loaded.
  use ExUnit.Case, async: true

  import ExUnit.CaptureLog

  alias CMDC.Tool.{Deferred, Registry, Runner}
  alias CMDC.Tool.Providers.Warnings
  alias CMDC.Tool.Search.Tool, as: SearchTool
  alias CMDC.Tool.Test.Factory

  doctest Warnings

  # Gemini has no `not`: dropped, with a warning ("accepts more").
  @lossy %{
    "type" => "object",
    "properties" => %{"mode" => %{"type" => "string", "not" => %{"const" => "rm"}}}
  }

  # Tool names unique to the test: what was logged is remembered VM-wide.
  defp unique(base), do: "#{base}_#{System.unique_integer([:positive])}"

  defp registry(names) do
    reg = Registry.new()
    tools = Enum.map(names, &Factory.tool(&1, "Does #{&1}.", @lossy))
    :ok = Registry.register(reg, [SearchTool | tools])
    reg
  end

  test "without deferral: each warning logged once per tool, format and change" do
    [a] = names = [unique("plain")]
    reg = registry(names)
    log = capture_log(fn -> CMDC.Tool.to_schema(reg, %{}, format: :gemini) end)
    assert log =~ "cmdc_tool gemini: #{a}: `not`"
    assert capture_log(fn -> CMDC.Tool.to_schema(reg, %{}, format: :gemini) end) == ""
  end

  test "deferred and always-loaded tools' warnings are logged, once" do
    [deferred, loaded] = names = [unique("deferred"), unique("loaded")]
    reg = registry(names)
    opts = [format: :gemini, defer: true, always_loaded: [loaded]]

    log =
      capture_log(fn ->
        [%{"functionDeclarations" => decls}] = CMDC.Tool.to_schema(reg, %{}, opts)
        # The deferred tool is left out of the list, its warning is not.
        refute Enum.any?(decls, &(&1["name"] == deferred))
      end)

    assert log =~ "#{deferred}: `not`" and log =~ "#{loaded}: `not`"
    assert capture_log(fn -> CMDC.Tool.to_schema(reg, %{}, opts) end) == ""
    # The full JSON Schema form keeps `not`: nothing to report there.
    assert capture_log(fn -> CMDC.Tool.to_schema(reg, %{}, format: :gemini_json_schema) end) ==
             ""

    log = capture_log(fn -> CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: true) end)
    refute log =~ deferred
  end

  test ":raise names the deferred tools' changes; :ignore says nothing" do
    [deferred] = names = [unique("raised")]
    reg = registry(names)

    for opts <- [
          [format: :gemini, defer: true],
          [format: :gemini, defer: [deferred]],
          [format: :gemini, defer: 0, always_loaded: ["search_tools"]]
        ] do
      error =
        assert_raise ArgumentError, fn ->
          CMDC.Tool.to_schema(reg, %{}, [{:warnings, :raise} | opts])
        end

      assert error.message =~ "gemini tools list changes what" and error.message =~ deferred

      assert_raise ArgumentError, ~r/#{deferred}/, fn ->
        CMDC.Tool.to_schema_json(reg, %{}, [{:warnings, :raise} | opts])
      end
    end

    [quiet] = names = [unique("quiet")]
    reg = registry(names)

    assert capture_log(fn ->
             CMDC.Tool.to_schema(reg, %{}, format: :gemini, defer: true, warnings: :ignore)
           end) == ""

    # Ignored is not remembered: the next list that logs says it.
    assert capture_log(fn -> CMDC.Tool.to_schema(reg, %{}, format: :gemini, defer: true) end) =~
             quiet

    assert_raise ArgumentError, ~r/warnings: expects :log, :raise or :ignore/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :gemini, defer: true, warnings: :loud)
    end
  end

  test "search_tools' own changes are not the user's; a tool_search_output reports the others'" do
    # A tool every strict mode takes as it is: only search_tools' schema is rewritten.
    clean =
      Factory.tool(unique("clean"), "Does clean work.", %{
        "type" => "object",
        "properties" => %{"q" => %{"type" => "string"}},
        "required" => ["q"],
        "additionalProperties" => false
      })

    reg = Registry.new()
    :ok = Registry.register(reg, [SearchTool, clean])

    for opts <- [
          [format: :openai, strict: true, defer: true],
          [format: :anthropic, strict: true, defer: true, search: :client],
          [format: :openai_responses, strict: true, defer: true, search: :client],
          [format: :mcp, defer: true]
        ] do
      assert capture_log(fn ->
               assert [_ | _] = CMDC.Tool.to_schema(reg, %{}, [{:warnings, :raise} | opts])
             end) == ""
    end

    # The registry's other tools are still reported, search or not.
    reg = registry([unique("found")])

    assert_raise ArgumentError, ~r/openai tools list changes/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :openai, strict: true, defer: true, warnings: :raise)
    end

    call = %{id: "s1", name: "search_tools", arguments: %{"query" => "does found"}}
    result = Runner.run(reg, call, %CMDC.Context{})
    refute result.is_error, result.content

    assert_raise ArgumentError, ~r/openai_responses tools list changes/, fn ->
      Deferred.openai_search_output(result, reg, strict: true, warnings: :raise)
    end

    assert %{"status" => "completed"} =
             Deferred.openai_search_output(result, reg, strict: true, warnings: :ignore)
  end
end
