defmodule CMDC.Tool.ProvidersTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Providers, Registry, Schema}
  alias CMDC.Tool.Test.Realistic

  doctest CMDC.Tool.Providers

  defmodule Counted do
    @moduledoc false
    # Tells the process in its context each time its description is computed.
    @behaviour CMDC.Tool
    def name, do: "counted"
    def description, do: "Counts its descriptions."

    def description(%{test: pid}) do
      send(pid, :described)
      description()
    end

    def description(_), do: description()
    def parameters, do: %{"type" => "object", "properties" => %{"n" => %{"type" => "integer"}}}
    def execute(_args, _ctx), do: {:ok, "counted"}
  end

  # Expected output for the realistic tool set (test/support/realistic_tools.ex), one tool per
  # line (for :gemini, one function declaration per line inside the single functionDeclarations
  # tool). Reviewed by hand against docs/../shared/NOTES.md's provider rules.
  @expected %{
    {:openai, false} => ~S"""
    {"function":{"description":"Current weather for a city.","name":"get_weather","parameters":{"additionalProperties":false,"properties":{"city":{"description":"City name","minLength":1,"type":"string"},"days":{"maximum":7,"minimum":1,"type":"integer"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"],"type":"object"}},"type":"function"},
    {"function":{"description":"Create a calendar event.","name":"create_event","parameters":{"$defs":{"time_range":{"properties":{"end":{"format":"date-time","type":"string"},"start":{"format":"date-time","type":"string"}},"required":["start"],"type":"object"}},"$schema":"http://json-schema.org/draft-07/schema#","properties":{"attendees":{"items":{"properties":{"email":{"format":"email","type":"string"},"optional":{"type":"boolean"}},"required":["email"],"type":"object"},"type":"array"},"kind":{"const":"meeting"},"tags":{"items":{"type":"string"},"type":"array","uniqueItems":true},"title":{"type":"string"},"when":{"$ref":"#/$defs/time_range"}},"required":["title","when"],"type":"object"}},"type":"function"},
    {"function":{"description":"Search the code base.","name":"search_code","parameters":{"properties":{"filters":{"properties":{"language":{"type":["string","null"]},"path_prefix":{"pattern":"^[a-z/]+$","type":"string"}},"type":"object"},"limit":{"exclusiveMinimum":0,"type":"integer"},"mode":{"default":"literal","enum":["literal","regex"]},"query":{"type":"string"}},"required":["query"],"type":"object"}},"type":"function"},
    {"function":{"description":"List the files of the working directory.","name":"list_files","parameters":{"properties":{},"type":"object"}},"type":"function"}
    """,
    {:openai, true} => ~S"""
    {"function":{"description":"Current weather for a city.","name":"get_weather","parameters":{"additionalProperties":false,"properties":{"city":{"description":"City name","type":"string"},"days":{"maximum":7,"minimum":1,"type":["integer","null"]},"unit":{"enum":["celsius","fahrenheit",null]}},"required":["city","days","unit"],"type":"object"},"strict":true},"type":"function"},
    {"function":{"description":"Create a calendar event.","name":"create_event","parameters":{"$defs":{"time_range":{"additionalProperties":false,"properties":{"end":{"format":"date-time","type":["string","null"]},"start":{"format":"date-time","type":"string"}},"required":["end","start"],"type":"object"}},"additionalProperties":false,"properties":{"attendees":{"items":{"additionalProperties":false,"properties":{"email":{"format":"email","type":"string"},"optional":{"type":["boolean","null"]}},"required":["email","optional"],"type":"object"},"type":["array","null"]},"kind":{"enum":["meeting",null]},"tags":{"items":{"type":"string"},"type":["array","null"]},"title":{"type":"string"},"when":{"$ref":"#/$defs/time_range"}},"required":["attendees","kind","tags","title","when"],"type":"object"},"strict":true},"type":"function"},
    {"function":{"description":"Search the code base.","name":"search_code","parameters":{"additionalProperties":false,"properties":{"filters":{"additionalProperties":false,"properties":{"language":{"type":["string","null"]},"path_prefix":{"pattern":"^[a-z/]+$","type":["string","null"]}},"required":["language","path_prefix"],"type":["object","null"]},"limit":{"exclusiveMinimum":0,"type":["integer","null"]},"mode":{"enum":["literal","regex",null]},"query":{"type":"string"}},"required":["filters","limit","mode","query"],"type":"object"},"strict":true},"type":"function"},
    {"function":{"description":"List the files of the working directory.","name":"list_files","parameters":{"additionalProperties":false,"properties":{},"required":[],"type":"object"},"strict":true},"type":"function"}
    """,
    {:openai_responses, false} => ~S"""
    {"description":"Current weather for a city.","name":"get_weather","parameters":{"additionalProperties":false,"properties":{"city":{"description":"City name","minLength":1,"type":"string"},"days":{"maximum":7,"minimum":1,"type":"integer"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"],"type":"object"},"strict":false,"type":"function"},
    {"description":"Create a calendar event.","name":"create_event","parameters":{"$defs":{"time_range":{"properties":{"end":{"format":"date-time","type":"string"},"start":{"format":"date-time","type":"string"}},"required":["start"],"type":"object"}},"$schema":"http://json-schema.org/draft-07/schema#","properties":{"attendees":{"items":{"properties":{"email":{"format":"email","type":"string"},"optional":{"type":"boolean"}},"required":["email"],"type":"object"},"type":"array"},"kind":{"const":"meeting"},"tags":{"items":{"type":"string"},"type":"array","uniqueItems":true},"title":{"type":"string"},"when":{"$ref":"#/$defs/time_range"}},"required":["title","when"],"type":"object"},"strict":false,"type":"function"},
    {"description":"Search the code base.","name":"search_code","parameters":{"properties":{"filters":{"properties":{"language":{"type":["string","null"]},"path_prefix":{"pattern":"^[a-z/]+$","type":"string"}},"type":"object"},"limit":{"exclusiveMinimum":0,"type":"integer"},"mode":{"default":"literal","enum":["literal","regex"]},"query":{"type":"string"}},"required":["query"],"type":"object"},"strict":false,"type":"function"},
    {"description":"List the files of the working directory.","name":"list_files","parameters":{"properties":{},"type":"object"},"strict":false,"type":"function"}
    """,
    {:openai_responses, true} => ~S"""
    {"description":"Current weather for a city.","name":"get_weather","parameters":{"additionalProperties":false,"properties":{"city":{"description":"City name","type":"string"},"days":{"maximum":7,"minimum":1,"type":["integer","null"]},"unit":{"enum":["celsius","fahrenheit",null]}},"required":["city","days","unit"],"type":"object"},"strict":true,"type":"function"},
    {"description":"Create a calendar event.","name":"create_event","parameters":{"$defs":{"time_range":{"additionalProperties":false,"properties":{"end":{"format":"date-time","type":["string","null"]},"start":{"format":"date-time","type":"string"}},"required":["end","start"],"type":"object"}},"additionalProperties":false,"properties":{"attendees":{"items":{"additionalProperties":false,"properties":{"email":{"format":"email","type":"string"},"optional":{"type":["boolean","null"]}},"required":["email","optional"],"type":"object"},"type":["array","null"]},"kind":{"enum":["meeting",null]},"tags":{"items":{"type":"string"},"type":["array","null"]},"title":{"type":"string"},"when":{"$ref":"#/$defs/time_range"}},"required":["attendees","kind","tags","title","when"],"type":"object"},"strict":true,"type":"function"},
    {"description":"Search the code base.","name":"search_code","parameters":{"additionalProperties":false,"properties":{"filters":{"additionalProperties":false,"properties":{"language":{"type":["string","null"]},"path_prefix":{"pattern":"^[a-z/]+$","type":["string","null"]}},"required":["language","path_prefix"],"type":["object","null"]},"limit":{"exclusiveMinimum":0,"type":["integer","null"]},"mode":{"enum":["literal","regex",null]},"query":{"type":"string"}},"required":["filters","limit","mode","query"],"type":"object"},"strict":true,"type":"function"},
    {"description":"List the files of the working directory.","name":"list_files","parameters":{"additionalProperties":false,"properties":{},"required":[],"type":"object"},"strict":true,"type":"function"}
    """,
    {:anthropic, false} => ~S"""
    {"description":"Current weather for a city.","input_schema":{"additionalProperties":false,"properties":{"city":{"description":"City name","minLength":1,"type":"string"},"days":{"maximum":7,"minimum":1,"type":"integer"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"],"type":"object"},"name":"get_weather"},
    {"description":"Create a calendar event.","input_schema":{"$defs":{"time_range":{"properties":{"end":{"format":"date-time","type":"string"},"start":{"format":"date-time","type":"string"}},"required":["start"],"type":"object"}},"$schema":"http://json-schema.org/draft-07/schema#","properties":{"attendees":{"items":{"properties":{"email":{"format":"email","type":"string"},"optional":{"type":"boolean"}},"required":["email"],"type":"object"},"type":"array"},"kind":{"const":"meeting"},"tags":{"items":{"type":"string"},"type":"array","uniqueItems":true},"title":{"type":"string"},"when":{"$ref":"#/$defs/time_range"}},"required":["title","when"],"type":"object"},"name":"create_event"},
    {"description":"Search the code base.","input_schema":{"properties":{"filters":{"properties":{"language":{"type":["string","null"]},"path_prefix":{"pattern":"^[a-z/]+$","type":"string"}},"type":"object"},"limit":{"exclusiveMinimum":0,"type":"integer"},"mode":{"default":"literal","enum":["literal","regex"]},"query":{"type":"string"}},"required":["query"],"type":"object"},"name":"search_code"},
    {"description":"List the files of the working directory.","input_schema":{"properties":{},"type":"object"},"name":"list_files"}
    """,
    {:anthropic, true} => ~S"""
    {"description":"Current weather for a city.","input_schema":{"additionalProperties":false,"properties":{"city":{"description":"City name\n\n{minLength: 1}","type":"string"},"days":{"description":"{maximum: 7, minimum: 1}","type":"integer"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"],"type":"object"},"name":"get_weather","strict":true},
    {"description":"Create a calendar event.","input_schema":{"$defs":{"time_range":{"additionalProperties":false,"properties":{"end":{"format":"date-time","type":"string"},"start":{"format":"date-time","type":"string"}},"required":["start"],"type":"object"}},"additionalProperties":false,"properties":{"attendees":{"items":{"additionalProperties":false,"properties":{"email":{"format":"email","type":"string"},"optional":{"type":"boolean"}},"required":["email"],"type":"object"},"type":"array"},"kind":{"const":"meeting"},"tags":{"description":"{uniqueItems: true}","items":{"type":"string"},"type":"array"},"title":{"type":"string"},"when":{"$ref":"#/$defs/time_range"}},"required":["title","when"],"type":"object"},"name":"create_event","strict":true},
    {"description":"Search the code base.","input_schema":{"additionalProperties":false,"properties":{"filters":{"additionalProperties":false,"properties":{"language":{"anyOf":[{"type":"string"},{"type":"null"}]},"path_prefix":{"description":"{pattern: \"^[a-z/]+$\"}","type":"string"}},"type":"object"},"limit":{"description":"{exclusiveMinimum: 0}","type":"integer"},"mode":{"enum":["literal","regex"]},"query":{"type":"string"}},"required":["query"],"type":"object"},"name":"search_code","strict":true},
    {"description":"List the files of the working directory.","input_schema":{"additionalProperties":false,"properties":{},"type":"object"},"name":"list_files","strict":true}
    """,
    {:gemini, false} => ~S"""
    {"description":"Current weather for a city.","name":"get_weather","parameters":{"properties":{"city":{"description":"City name","minLength":1,"type":"string"},"days":{"maximum":7,"minimum":1,"type":"integer"},"unit":{"enum":["celsius","fahrenheit"],"type":"string"}},"required":["city"],"type":"object"}},
    {"description":"Create a calendar event.","name":"create_event","parameters":{"properties":{"attendees":{"items":{"properties":{"email":{"type":"string"},"optional":{"type":"boolean"}},"required":["email"],"type":"object"},"type":"array"},"kind":{"enum":["meeting"],"type":"string"},"tags":{"items":{"type":"string"},"type":"array"},"title":{"type":"string"},"when":{"properties":{"end":{"format":"date-time","type":"string"},"start":{"format":"date-time","type":"string"}},"required":["start"],"type":"object"}},"required":["title","when"],"type":"object"}},
    {"description":"Search the code base.","name":"search_code","parameters":{"properties":{"filters":{"properties":{"language":{"nullable":true,"type":"string"},"path_prefix":{"pattern":"^[a-z/]+$","type":"string"}},"type":"object"},"limit":{"minimum":1,"type":"integer"},"mode":{"default":"literal","enum":["literal","regex"],"type":"string"},"query":{"type":"string"}},"required":["query"],"type":"object"}},
    {"description":"List the files of the working directory.","name":"list_files"}
    """,
    {:mcp, false} => ~S"""
    {"description":"Current weather for a city.","inputSchema":{"additionalProperties":false,"properties":{"city":{"description":"City name","minLength":1,"type":"string"},"days":{"maximum":7,"minimum":1,"type":"integer"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"],"type":"object"},"name":"get_weather"},
    {"description":"Create a calendar event.","inputSchema":{"$defs":{"time_range":{"properties":{"end":{"format":"date-time","type":"string"},"start":{"format":"date-time","type":"string"}},"required":["start"],"type":"object"}},"$schema":"http://json-schema.org/draft-07/schema#","properties":{"attendees":{"items":{"properties":{"email":{"format":"email","type":"string"},"optional":{"type":"boolean"}},"required":["email"],"type":"object"},"type":"array"},"kind":{"const":"meeting"},"tags":{"items":{"type":"string"},"type":"array","uniqueItems":true},"title":{"type":"string"},"when":{"$ref":"#/$defs/time_range"}},"required":["title","when"],"type":"object"},"name":"create_event"},
    {"description":"Search the code base.","inputSchema":{"properties":{"filters":{"properties":{"language":{"type":["string","null"]},"path_prefix":{"pattern":"^[a-z/]+$","type":"string"}},"type":"object"},"limit":{"exclusiveMinimum":0,"type":"integer"},"mode":{"default":"literal","enum":["literal","regex"]},"query":{"type":"string"}},"required":["query"],"type":"object"},"name":"search_code"},
    {"description":"List the files of the working directory.","inputSchema":{"properties":{},"type":"object"},"name":"list_files"}
    """
  }

  defp registry do
    reg = Registry.new()
    :ok = Registry.register(reg, Realistic.all())
    reg
  end

  # Tool names of a list in any format (Gemini's is one declarations object).
  defp names_in([%{"functionDeclarations" => decls}], _format), do: Enum.map(decls, & &1["name"])
  defp names_in(tools, _format), do: Enum.map(tools, &tool_name/1)

  defp tool_name(%{"function" => %{"name" => name}}), do: name
  defp tool_name(%{"name" => name}), do: name

  defp expected({format, _} = key) do
    tools = JSON.decode!("[" <> @expected[key] <> "]")
    if format == :gemini, do: [%{"functionDeclarations" => tools}], else: tools
  end

  for {format, strict} <- [
        {:openai, false},
        {:openai, true},
        {:openai_responses, false},
        {:openai_responses, true},
        {:anthropic, false},
        {:anthropic, true},
        {:gemini, false},
        {:mcp, false}
      ] do
    @format format
    @strict strict
    test "#{format} (strict: #{strict}) output of the realistic tools, from a registry and a list" do
      want = expected({@format, @strict})
      opts = [format: @format, strict: @strict]
      assert CMDC.Tool.to_schema(registry(), %{}, opts) == want
      assert CMDC.Tool.to_schema(Realistic.all(), %{}, opts) == want
      assert JSON.decode!(CMDC.Tool.to_schema_json(registry(), %{}, opts)) == want
      assert JSON.decode!(CMDC.Tool.to_schema_json(Realistic.all(), %{}, opts)) == want
    end
  end

  test "cmdc's default output for lists is unchanged: parameters exactly as returned" do
    modules = Realistic.all()

    want =
      Enum.map(modules, fn m ->
        %{
          "type" => "function",
          "function" => %{
            "name" => m.name(),
            "description" => m.description(),
            "parameters" => m.parameters()
          }
        }
      end)

    assert CMDC.Tool.to_schema(modules) == want
    assert CMDC.Tool.to_schema(modules, %{}) == want
    assert CMDC.Tool.to_schema(modules, %{}, []) == want
    # Atom keys survive on the list path, as in cmdc.
    defmodule AtomKeys do
      def name, do: "atom_keys"
      def description, do: "Atom keys."
      def parameters, do: %{type: "object", properties: %{a: %{type: "string"}}}
      def execute(_, _), do: {:ok, ""}
    end

    assert [%{"function" => %{"parameters" => %{type: "object"}}}] =
             CMDC.Tool.to_schema([AtomKeys])
  end

  test "numbers, nulls and nesting survive the native build exactly" do
    params = %{
      "type" => "object",
      "properties" => %{
        "n" => %{
          "type" => "number",
          "minimum" => -1.5,
          "maximum" => 1.0e300,
          "multipleOf" => 0.25
        },
        "i" => %{"type" => "integer", "minimum" => -4_294_967_296, "maximum" => 4_294_967_296},
        "j" => %{"enum" => [0, 255, 256, -1, -2_147_483_648, 2_147_483_648, nil, true, false]},
        "deep" => %{"type" => "array", "items" => %{"type" => "array"}, "examples" => [[], [[]]]},
        "ü" => %{"description" => "naïve ☃", "default" => 18_446_744_073_709_551_615}
      }
    }

    module = CMDC.Tool.Test.Factory.tool("numbers", "Numbers: ±∞.", params)
    reg = Registry.new()
    :ok = Registry.register(reg, module)

    assert [%{"function" => %{"parameters" => ^params, "description" => "Numbers: ±∞."}}] =
             CMDC.Tool.to_schema(reg)

    assert [%{"inputSchema" => mcp}] = CMDC.Tool.to_schema(reg, %{}, format: :mcp)
    assert mcp == params
  end

  test "warnings name the tool, the path and the keyword" do
    {_, warnings} = Providers.convert(registry(), %{}, format: :gemini)

    assert Enum.map(warnings, &{&1.tool, &1.path, &1.keyword}) == [
             {"get_weather", "", "additionalProperties"},
             {"create_event", "/properties/attendees/items/properties/email", "format"},
             {"create_event", "/properties/tags", "uniqueItems"},
             {"list_files", "", "properties"}
           ]

    text = Providers.format_warnings(warnings)
    assert text =~ "get_weather: `additionalProperties` at the root dropped"
    assert text =~ "Gemini"

    {_, warnings} = Providers.convert(Realistic.all(), %{}, format: :openai, strict: true)

    # Open objects are closed by strict mode: said for each, as accepting less.
    assert Enum.map(warnings, &{&1.tool, &1.path, &1.keyword}) == [
             {"get_weather", "/properties/city", "minLength"},
             {"create_event", "/$defs/time_range", "additionalProperties"},
             {"create_event", "/properties/attendees/items", "additionalProperties"},
             {"create_event", "/properties/tags", "uniqueItems"},
             {"create_event", "", "additionalProperties"},
             {"search_code", "/properties/filters", "additionalProperties"},
             {"search_code", "", "additionalProperties"},
             {"list_files", "", "additionalProperties"}
           ]

    assert Enum.find(warnings, &(&1.tool == "list_files")).message =~
             "a call with another key is refused"
  end

  test "limits a target enforces are reported" do
    defmodule Huge do
      def name, do: "huge"
      def description, do: "Too many properties."

      def parameters,
        do: %{
          "type" => "object",
          "properties" => Map.new(1..5001, &{"p#{&1}", %{"type" => "string"}}),
          "required" => [],
          "additionalProperties" => false
        }

      def execute(_, _), do: {:ok, ""}
    end

    {_, warnings} = Providers.convert([Huge], %{}, format: :openai, strict: true)
    assert [%{keyword: "limit", message: message}] = warnings
    assert message =~ "5001 object properties"
    assert message =~ "at most 5000"
  end

  test "Gemini property names and the no-parameters form" do
    defmodule Dashed do
      def name, do: "dashed"
      def description, do: "A property name Gemini refuses."

      def parameters,
        do: %{"type" => "object", "properties" => %{"max-results" => %{"type" => "integer"}}}

      def execute(_, _), do: {:ok, ""}
    end

    {[%{"functionDeclarations" => [decl]}], [warning]} =
      Providers.convert([Dashed], %{}, format: :gemini)

    assert decl["parameters"]["properties"]["max-results"] == %{"type" => "integer"}
    assert warning.keyword == "propertyName"
    assert warning.path == "/properties/max-results"

    # No properties: no `parameters` (Gemini refuses an empty object schema). The original is
    # open (it takes keys it does not list), the declaration takes none: said (issue 44).
    {[%{"functionDeclarations" => [decl]}], [warning]} =
      Providers.convert([Realistic.ListFiles], %{}, format: :gemini)

    refute Map.has_key?(decl, "parameters")
    assert {warning.path, warning.keyword} == {"", "properties"}
    assert warning.message =~ "additionalProperties: false"
  end

  test "bad options raise with the accepted values" do
    assert_raise ArgumentError, ~r/unknown format :claude.*:anthropic/, fn ->
      CMDC.Tool.to_schema(Realistic.all(), %{}, format: :claude)
    end

    assert_raise ArgumentError, ~r/strict/, fn ->
      CMDC.Tool.to_schema(registry(), %{}, strict: :yes)
    end
  end

  describe "cache" do
    test "contexts are cached separately and changes invalidate" do
      reg = registry()
      ctx = %{working_dir: "/srv"}
      [_, event | _] = CMDC.Tool.to_schema(reg, ctx, format: :mcp)
      assert event["description"] == "Create a calendar event (calendar in /srv)."
      [_, event | _] = CMDC.Tool.to_schema(reg, %{}, format: :mcp)
      assert event["description"] == "Create a calendar event."
      json = CMDC.Tool.to_schema_json(reg, ctx, format: :mcp)
      assert json =~ "calendar in /srv"
      assert CMDC.Tool.to_schema_json(reg, ctx, format: :mcp) == json

      :ok = Registry.register(reg, CMDC.Tool.Examples.Echo)
      assert length(CMDC.Tool.to_schema(reg, ctx, format: :mcp)) == 5
      assert JSON.decode!(CMDC.Tool.to_schema_json(reg, ctx, format: :mcp)) |> length() == 5

      :ok = Registry.unregister(reg, "get_weather")
      names = reg |> CMDC.Tool.to_schema(ctx, format: :anthropic) |> Enum.map(& &1["name"])
      assert names == ["create_event", "search_code", "list_files", "echo"]

      :ok = Registry.replace(reg, [CMDC.Tool.Examples.Echo])
      assert [%{"name" => "echo"}] = CMDC.Tool.to_schema(reg, ctx, format: :mcp)
      assert JSON.decode!(CMDC.Tool.to_schema_json(reg, ctx, format: :mcp)) |> length() == 1
    end

    test "lists built while the registry changes are always one consistent state" do
      reg = Registry.new()
      modules = for i <- 1..60, do: CMDC.Tool.Test.Factory.tool("w_#{i}")
      names = Enum.map(modules, & &1.name())

      writer = Task.async(fn -> Enum.each(modules, &(:ok = Registry.register(reg, &1))) end)

      readers =
        for format <- [:mcp, :anthropic, :openai] do
          Task.async(fn ->
            for _ <- 1..100 do
              seen = reg |> CMDC.Tool.to_schema(%{}, format: format) |> Enum.map(&tool_name/1)
              json = reg |> CMDC.Tool.to_schema_json(%{}, format: format) |> JSON.decode!()
              # Registration appends: every list is a prefix of the registration order.
              assert seen == Enum.take(names, length(seen))
              assert Enum.map(json, &tool_name/1) == Enum.take(names, length(json))
            end
          end)
        end

      Task.await_many([writer | readers], 60_000)
      assert reg |> CMDC.Tool.to_schema(%{}, format: :mcp) |> length() == 60
    end

    test "a cached list is not rebuilt: a context's descriptions are computed once per state" do
      reg = registry()
      :ok = Registry.register(reg, Counted)
      ctx = %{test: self()}

      for format <- Providers.formats() do
        tools = CMDC.Tool.to_schema(reg, ctx, format: format)
        assert_received :described
        assert CMDC.Tool.to_schema(reg, ctx, format: format) == tools
        json = CMDC.Tool.to_schema_json(reg, ctx, format: format)
        assert JSON.decode!(json) == tools
        assert CMDC.Tool.to_schema_json(reg, ctx, format: format) == json
        refute_received :described
      end

      # A change clears the cache: the next call builds (and describes) again.
      :ok = Registry.unregister(reg, "get_weather")
      _ = CMDC.Tool.to_schema_json(reg, ctx, format: :anthropic)
      assert_received :described
    end

    test "every change to the registry shows in convert and to_json, in every format" do
      reg = registry()
      ctx = %{working_dir: "/srv"}
      names = fn -> Enum.map(Realistic.all(), & &1.name()) end

      # Every format cached first, so each change below must clear it.
      check = fn expected ->
        for format <- Providers.formats(), strict <- [false, true] do
          opts = [format: format, strict: strict]
          {tools, _warnings} = Providers.convert(reg, ctx, opts)
          assert names_in(tools, format) == expected, "convert #{inspect(opts)}"
          json = reg |> Providers.to_json(ctx, opts) |> JSON.decode!()
          assert json == tools, "to_json #{inspect(opts)}"
        end
      end

      check.(names.())
      :ok = Registry.register(reg, CMDC.Tool.Examples.Echo)
      check.(names.() ++ ["echo"])
      :ok = Registry.unregister(reg, "search_code")
      check.(List.delete(names.(), "search_code") ++ ["echo"])
      :ok = Registry.replace(reg, [CMDC.Tool.Examples.Echo, Realistic.ListFiles])
      check.(["echo", "list_files"])
      :ok = Registry.replace(reg, [])
      check.([])
    end

    test "the cache stays bounded whatever the number of contexts" do
      reg = registry()

      for i <- 1..300 do
        ctx = %{working_dir: "/srv/#{i}"}
        [_, event | _] = CMDC.Tool.to_schema(reg, ctx, format: :mcp)
        assert event["description"] == "Create a calendar event (calendar in /srv/#{i})."
        assert CMDC.Tool.to_schema_json(reg, ctx, format: :anthropic) =~ "/srv/#{i})"
      end

      {entries, bytes} = CMDC.Tool.Native.registry_cache_info(reg.ref)
      assert entries <= 64
      assert bytes > 0
      # The oldest contexts were dropped, and are built again (correctly) when asked.
      [_, event | _] = CMDC.Tool.to_schema(reg, %{working_dir: "/srv/1"}, format: :mcp)
      assert event["description"] == "Create a calendar event (calendar in /srv/1)."
      assert elem(CMDC.Tool.Native.registry_cache_info(reg.ref), 0) <= 64
    end
  end

  # ---------------------------------------------------------------------------------------------
  # Property: after strict rewriting, every argument map the original schema accepted is still
  # accepted, with absent optional fields sent as null. Hand-written generators, native validator.

  describe "strict round trip" do
    test "the realistic tools" do
      seed(1)

      for module <- Realistic.all(), format <- [:openai, :anthropic] do
        accepted = check_round_trip(module.name(), module.parameters(), format, 300)
        # The generator aims at valid calls: nearly all of them must be.
        assert accepted > 270, "only #{accepted} of 300 generated calls were valid"
      end
    end

    test "random schemas" do
      seed(2)

      accepted =
        for _ <- 1..150, format <- [:openai, :anthropic], reduce: 0 do
          acc ->
            schema = gen_object(0) |> Map.put("$defs", %{"point" => point()})
            acc + check_round_trip("random", schema, format, 20)
        end

      assert accepted > 3_000, "only #{accepted} of 6000 generated calls were valid"
    end
  end

  defp seed(n), do: :rand.seed(:exsss, {n, n * 7, n * 13})

  defp check_round_trip(name, schema, format, runs) do
    module = CMDC.Tool.Test.Factory.tool(name, "round trip", schema)
    {[tool], warnings} = Providers.convert([module], %{}, format: format, strict: true)

    strict =
      if format == :anthropic, do: tool["input_schema"], else: tool["function"]["parameters"]

    original = Schema.compile!(schema)
    rewritten = Schema.compile!(strict)
    # A warned change that refuses values the original accepts: no round trip promised there.
    # (An open object closed refuses only keys it does not list, which no call here has.)
    tightened =
      Enum.any?(
        warnings,
        &(&1.message =~ ~r/accepts less|refuses some/ and not (&1.message =~ "the object is open"))
      )

    # Where nothing was said, the way back is exact too.
    exact = warnings == []

    accepted =
      Enum.count(1..runs, fn _ ->
        {args, sent} = gen_value(schema, schema)
        # Anthropic keeps `required` as written: the model leaves optional fields out.
        sent = if format == :anthropic, do: args, else: sent

        case Schema.validate(original, args) do
          {:ok, _} when tightened ->
            false

          {:ok, _} ->
            assert {:ok, _} = Schema.validate(rewritten, sent),
                   """
                   strict rewrite refused a call the original accepts
                   schema: #{JSON.encode!(schema)}
                   strict: #{JSON.encode!(strict)}
                   args:   #{JSON.encode!(args)}
                   sent:   #{JSON.encode!(sent)}
                   """

            # The way back: validate/2 (and so the runner) accepts what strict mode asked for,
            # and hands on what the original means (nulls it accepts stay).
            assert {:ok, back} = CMDC.Tool.validate(module, sent)
            assert {:ok, _} = Schema.validate(original, back)
            if exact, do: assert(without_extra_nulls(back, args) == args)
            true

          {:error, _} ->
            false
        end
      end)

    accepted
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

  defp point do
    %{
      "type" => "object",
      "properties" => %{"x" => %{"type" => "integer"}, "y" => %{"type" => "integer"}},
      "required" => ["x"]
    }
  end

  defp gen_schema(depth) do
    case :rand.uniform(if depth >= 3, do: 8, else: 13) do
      1 ->
        %{"type" => "string", "minLength" => :rand.uniform(3) - 1}

      2 ->
        %{"type" => "integer", "minimum" => 0, "maximum" => 50}

      3 ->
        %{"type" => "number", "exclusiveMinimum" => 0}

      4 ->
        %{"type" => "boolean"}

      5 ->
        %{"enum" => ["a", "b", "c"]}

      6 ->
        %{"const" => "fixed"}

      7 ->
        %{"type" => ["string", "null"]}

      8 ->
        %{"$ref" => "#/$defs/point"}

      9 ->
        %{"type" => "array", "items" => gen_schema(depth + 1), "maxItems" => 3}

      10 ->
        %{"anyOf" => [gen_schema(depth + 1), gen_schema(depth + 1)]}

      11 ->
        %{"oneOf" => [%{"type" => "string"}, %{"type" => "integer"}]}

      12 ->
        %{
          "allOf" => [
            gen_object(depth + 1),
            %{"properties" => %{"extra" => %{"type" => "boolean"}}}
          ]
        }

      13 ->
        gen_object(depth + 1)
    end
  end

  defp gen_object(depth) do
    props = for i <- 1..:rand.uniform(4), into: %{}, do: {"p#{depth}_#{i}", gen_schema(depth)}
    required = props |> Map.keys() |> Enum.filter(fn _ -> :rand.uniform(2) == 1 end)
    base = %{"type" => "object", "properties" => props, "required" => required}
    if :rand.uniform(2) == 1, do: Map.put(base, "additionalProperties", false), else: base
  end

  # {args as the model would send them to the original schema, the same with absent optional
  # properties as nil (what strict mode makes the model send)}
  defp gen_value(%{"$ref" => "#" <> pointer}, root) do
    path = pointer |> String.split("/", trim: true)
    gen_value(get_in(root, path), root)
  end

  defp gen_value(%{"anyOf" => branches}, root), do: gen_value(Enum.random(branches), root)
  defp gen_value(%{"oneOf" => branches}, root), do: gen_value(Enum.random(branches), root)

  defp gen_value(%{"allOf" => [first | rest]}, root) do
    merged =
      Enum.reduce(rest, first, fn part, acc ->
        Map.update(
          acc,
          "properties",
          part["properties"],
          &Map.merge(&1, part["properties"] || %{})
        )
      end)

    gen_value(merged, root)
  end

  defp gen_value(%{"enum" => values}, _root), do: same(Enum.random(values))
  defp gen_value(%{"const" => value}, _root), do: same(value)

  defp gen_value(%{"type" => types} = s, root) when is_list(types),
    do: gen_value(%{s | "type" => Enum.random(types)}, root)

  defp gen_value(%{"type" => "string"} = s, _root) do
    len = Map.get(s, "minLength", 0) + :rand.uniform(4) - 1

    case s do
      %{"format" => "date-time"} -> same("2026-11-23T01:00:00Z")
      %{"format" => "email"} -> same("a#{len}@example.com")
      %{"pattern" => _} -> same("src/lib")
      _ -> same(String.duplicate("s", len))
    end
  end

  defp gen_value(%{"type" => "integer"} = s, _root),
    do:
      same(
        Map.get(s, "minimum", 1) +
          :rand.uniform(Map.get(s, "maximum", 50) - Map.get(s, "minimum", 1) + 1) - 1
      )

  defp gen_value(%{"type" => "number"}, _root), do: same(:rand.uniform() * 100 + 0.5)
  defp gen_value(%{"type" => "boolean"}, _root), do: same(:rand.uniform(2) == 1)
  defp gen_value(%{"type" => "null"}, _root), do: same(nil)

  defp gen_value(%{"type" => "array"} = s, root) do
    items = for _ <- 1..(:rand.uniform(4) - 1)//1, do: gen_value(s["items"], root)
    items = if s["uniqueItems"], do: Enum.uniq_by(items, &elem(&1, 0)), else: items
    {Enum.map(items, &elem(&1, 0)), Enum.map(items, &elem(&1, 1))}
  end

  defp gen_value(%{} = s, root) do
    required = Map.get(s, "required", [])

    Enum.reduce(Map.get(s, "properties", %{}), {%{}, %{}}, fn {name, sub}, {args, sent} ->
      if name in required or :rand.uniform(2) == 1 do
        {a, b} = gen_value(sub, root)
        {Map.put(args, name, a), Map.put(sent, name, b)}
      else
        {args, Map.put(sent, name, nil)}
      end
    end)
  end

  defp same(value), do: {value, value}
end
