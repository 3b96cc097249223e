defmodule CMDC.ToolTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool
  doctest CMDC.Context

  alias CMDC.Tool
  alias CMDC.Tool.Examples.{Echo, ReadFile}

  defmodule Typical do
    @behaviour CMDC.Tool
    def name, do: "search_issues"
    def description, do: "Search the issue tracker."

    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "query" => %{"type" => "string", "minLength" => 1},
          "repo" => %{"type" => "string", "pattern" => "^[\\w.-]+/[\\w.-]+$"},
          "limit" => %{"type" => "integer", "minimum" => 1, "maximum" => 100},
          "state" => %{"enum" => ["open", "closed", "all"]},
          "labels" => %{"type" => "array", "items" => %{"type" => "string"}},
          "sort" => %{
            "type" => "object",
            "properties" => %{"field" => %{"type" => "string"}, "desc" => %{"type" => "boolean"}},
            "required" => ["field"]
          }
        },
        "required" => ["query", "repo"],
        "additionalProperties" => false
      }
    end

    def execute(args, _ctx), do: {:ok, inspect(args)}
  end

  defmodule BrokenSchema do
    @behaviour CMDC.Tool
    def name, do: "broken"
    def description, do: "Its schema has a typo."
    def parameters, do: %{"type" => "objct"}
    def execute(_, _), do: {:ok, ""}
  end

  @valid %{
    "query" => "crash",
    "repo" => "elixir-lang/elixir",
    "limit" => 10,
    "state" => "open",
    "labels" => ["bug", "nif"],
    "sort" => %{"field" => "created", "desc" => true}
  }

  describe "cmdc v0.5.1 API" do
    test "description/2 prefers description/1 and falls back to description/0" do
      assert Tool.description(ReadFile, %{working_dir: "/w"}) ==
               "Read a UTF-8 text file under /w."

      assert Tool.description(ReadFile) =~ "under the working directory"
      assert Tool.description(Echo, %{working_dir: "/w"}) == "Echo the given text back."
    end

    test "find/2 on a list of modules" do
      assert Tool.find([Echo, ReadFile, Typical], "search_issues") == {:ok, Typical}
      assert Tool.find([], "echo") == {:error, :not_found}
    end

    test "meta/2 uses meta/1 or the name" do
      assert Tool.meta(ReadFile, %{"path" => "a.txt"}) == "read a.txt"
      assert Tool.meta(Typical, @valid) == "search_issues"
    end

    test "to_schema/2 gives cmdc's shape, with context-aware descriptions" do
      assert [echo, read] = Tool.to_schema([Echo, ReadFile], %{working_dir: "/srv"})

      assert echo == %{
               "type" => "function",
               "function" => %{
                 "name" => "echo",
                 "description" => "Echo the given text back.",
                 "parameters" => Echo.parameters()
               }
             }

      assert read["function"]["description"] == "Read a UTF-8 text file under /srv."
    end

    test "to_schema/1 output encodes to JSON and back unchanged" do
      tools = Tool.to_schema([Typical, ReadFile])
      assert tools |> CMDC.Tool.JSON.encode!() |> CMDC.Tool.JSON.decode!() == tools
    end
  end

  describe "validate/2" do
    test "accepts a valid map and returns it unchanged" do
      assert Tool.validate(Typical, @valid) == {:ok, @valid}
    end

    test "reports every failure with path, keyword and message" do
      args = %{@valid | "limit" => 0, "state" => "stale"} |> Map.put("extra", 1)
      assert {:error, errors} = Tool.validate(Typical, args)
      by_keyword = Map.new(errors, &{&1.keyword, &1})
      assert by_keyword["minimum"].path == "/limit"
      assert by_keyword["minimum"].schema_path == "/properties/limit/minimum"
      assert by_keyword["enum"].path == "/state"
      assert by_keyword["additionalProperties"].message =~ "extra"
    end

    test "nested paths are JSON Pointers" do
      args = %{@valid | "labels" => ["ok", 5], "sort" => %{"desc" => "yes"}}
      assert {:error, errors} = Tool.validate(Typical, args)
      paths = errors |> Enum.map(&{&1.path, &1.keyword}) |> Enum.sort()
      assert {"/labels/1", "type"} in paths
      assert {"/sort", "required"} in paths
      assert {"/sort/desc", "type"} in paths
    end

    test "atom keys are read as strings" do
      assert {:ok, _} = Tool.validate(Echo, %{text: "hi"})
      assert {:error, [%{keyword: "type"}]} = Tool.validate(Echo, %{text: 1})
    end

    test "format_errors/2 gives one compact text a model can act on" do
      {:error, errors} = Tool.validate(Typical, Map.delete(%{@valid | "limit" => 500}, "repo"))
      text = Tool.format_errors(errors, Typical)
      assert text =~ "Invalid arguments:"
      assert text =~ "at /limit: 500 is greater than the maximum of 100 (maximum)"
      assert text =~ ~s|at the root: "repo" is a required property (required)|

      assert text =~
               "Accepted parameters: labels (array), limit (integer), query (string, required)"

      # Without a tool, no parameter list; with a plain schema map, it works too.
      refute Tool.format_errors(errors) =~ "Accepted"
      assert Tool.format_errors(errors, Typical.parameters()) =~ "Accepted parameters"
    end

    test "a broken schema is refused with a clear error, checked against its meta-schema" do
      assert {:error, [%{keyword: "schema", message: message}]} = Tool.validate(BrokenSchema, %{})
      assert message =~ "BrokenSchema"
      assert message =~ "invalid schema"
      assert message =~ "objct"
    end

    test "a module that is not a tool gives an error, not a crash" do
      assert {:error, [%{keyword: "schema", message: message}]} = Tool.validate(Enum, %{})
      assert message =~ "not a tool"
    end

    test "a hot-reloaded module gets its new schema, not a stale validator" do
      mod = Module.concat(__MODULE__, "Reloaded#{System.unique_integer([:positive])}")

      define = fn type ->
        Code.compiler_options(ignore_module_conflict: true)

        Code.compile_string("""
        defmodule #{inspect(mod)} do
          @behaviour CMDC.Tool
          def name, do: "reloaded"
          def description, do: "x"
          def parameters, do: %{"type" => "object", "properties" => %{"n" => %{"type" => "#{type}"}}}
          def execute(_, _), do: {:ok, ""}
        end
        """)
      end

      define.("integer")
      assert {:ok, _} = Tool.validate(mod, %{"n" => 1})
      assert {:error, _} = Tool.validate(mod, %{"n" => "1"})
      define.("string")
      assert {:error, _} = Tool.validate(mod, %{"n" => 1})
      assert {:ok, _} = Tool.validate(mod, %{"n" => "1"})
    end
  end

  describe "bad input never crashes" do
    test "non-JSON terms name their path" do
      cases = [
        {%{"text" => {:a, 1}}, "/text", "a tuple"},
        {%{"text" => self()}, "/text", "a pid"},
        {%{"text" => make_ref()}, "/text", "a reference"},
        {%{"text" => fn -> 1 end}, "/text", "a function"},
        {%{"text" => <<0xFF, 0xFE>>}, "/text", "not valid UTF-8"},
        {%{"list" => [1, [2 | 3]]}, "/list/1", "improper list"},
        {%{{:k} => 1}, "", "map key"},
        {%{<<0xFF>> => 1}, "", "map key"},
        {%{:text => "a", "text" => "b"}, "", "given twice"}
      ]

      for {args, path, words} <- cases do
        assert {:error, [error]} = Tool.validate(Echo, args)
        assert error.keyword == "json"
        assert error.path == path, "#{inspect(args)}: #{inspect(error)}"
        assert error.message =~ words
      end
    end

    test "nil, booleans, other atoms, big integers and floats are JSON" do
      schema = CMDC.Tool.Schema.compile!(%{"type" => "array"})
      big = 123_456_789_012_345_678_901_234_567_890
      assert {:ok, _} = CMDC.Tool.Schema.validate(schema, [nil, true, false, :other, big, 1.5])
      int = CMDC.Tool.Schema.compile!(%{"type" => "integer", "minimum" => 10})
      assert {:ok, ^big} = CMDC.Tool.Schema.validate(int, big)
      assert {:error, [%{keyword: "minimum"}]} = CMDC.Tool.Schema.validate(int, -big)
    end

    test "deep nesting is an error, not a stack overflow" do
      deep = Enum.reduce(1..10_000, "x", fn _, acc -> %{"a" => acc} end)
      assert {:error, [error]} = Tool.validate(Echo, deep)
      assert error.message =~ "nested deeper than 128"
    end

    test "huge maps are validated (on a dirty scheduler) without error" do
      big = Map.new(1..50_000, &{"k#{&1}", &1})
      schema = CMDC.Tool.Schema.compile!(%{"additionalProperties" => %{"type" => "integer"}})
      assert {:ok, ^big} = CMDC.Tool.Schema.validate(schema, big)
      assert {:error, [%{path: "/k7"}]} = CMDC.Tool.Schema.validate(schema, %{big | "k7" => "s"})
    end

    test "the arguments need not be a map to get a clear answer" do
      assert {:error, [%{keyword: "type", path: ""}]} = Tool.validate(Echo, "text")
      assert {:error, [%{keyword: "type"}]} = Tool.validate(Echo, nil)
    end
  end

  describe "validate_json/2" do
    test "decodes and validates in one call" do
      assert Tool.validate_json(Typical, CMDC.Tool.JSON.encode!(@valid)) == {:ok, @valid}
    end

    test "broken JSON is one error with keyword json" do
      for text <- [
            "",
            "{",
            ~s({"text": "a",}),
            ~s({"text": "\\x"}),
            <<"{\"text\": \"", 0xFF, "\"}">>
          ] do
        assert {:error, [%{keyword: "json", path: "", message: "invalid JSON" <> _}]} =
                 Tool.validate_json(Echo, text),
               inspect(text)
      end
    end

    test "not a binary" do
      assert {:error, [%{keyword: "json"}]} = Tool.validate_json(Echo, %{"text" => "a"})
    end

    test "schema errors come back like validate/2's" do
      assert {:error, [%{path: "/text", keyword: "type"}]} =
               Tool.validate_json(Echo, ~s({"text": 5}))
    end

    test "large JSON text is handled on a dirty scheduler" do
      text = CMDC.Tool.JSON.encode!(%{"text" => String.duplicate("é", 300_000)})
      assert {:ok, %{"text" => decoded}} = Tool.validate_json(Echo, text)
      assert String.length(decoded) == 300_000
    end
  end
end
