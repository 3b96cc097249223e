defmodule CMDC.Tool.StrictRoundTripTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Registry, RoundTrip, Runner}

  doctest CMDC.Tool.RoundTrip

  defmodule Booking do
    @behaviour CMDC.Tool
    def name, do: "fs.book"
    def description, do: "Book a trip."

    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "city" => %{"type" => "string"},
          "days" => %{"type" => "integer"},
          "note" => %{"type" => ["string", "null"]},
          "legs" => %{
            "type" => "array",
            "items" => %{
              "type" => "object",
              "properties" => %{
                "to" => %{"type" => "string"},
                "seat" => %{"$ref" => "#/$defs/seat"}
              },
              "required" => ["to"]
            }
          }
        },
        "required" => ["city"],
        "$defs" => %{
          "seat" => %{
            "type" => "object",
            "properties" => %{"row" => %{"type" => "integer"}, "side" => %{"enum" => ["l", "r"]}},
            "required" => ["row"]
          }
        }
      }
    end

    # The tool sees exactly the arguments it is given.
    def execute(args, _ctx), do: {:ok, CMDC.Tool.JSON.encode!(args)}
  end

  # What OpenAI strict mode makes the model send for {"city": "Oslo", "legs": [{"to": "Bergen",
  # "seat": {"row": 3}}]}: every optional field as null, at every depth.
  @sent %{
    "city" => "Oslo",
    "days" => nil,
    "note" => nil,
    "legs" => [%{"to" => "Bergen", "seat" => %{"row" => 3, "side" => nil}}]
  }
  # `note` accepts null in the original, so its null is the model's own and stays.
  @meant %{
    "city" => "Oslo",
    "note" => nil,
    "legs" => [%{"to" => "Bergen", "seat" => %{"row" => 3}}]
  }

  test "the strict schema asks for exactly these nulls" do
    [tool] = CMDC.Tool.to_schema([Booking], %{}, format: :openai, strict: true)
    strict = CMDC.Tool.Schema.compile!(tool["function"]["parameters"])
    assert {:ok, _} = CMDC.Tool.Schema.validate(strict, @sent)
    # ...which the original refuses as they are.
    assert {:error, _} =
             CMDC.Tool.Schema.validate(CMDC.Tool.Schema.compile!(Booking.parameters()), @sent)
  end

  test "validate/2,3 and validate_json/2,3 drop the nulls strict mode introduced, at any depth" do
    reg = Registry.new()
    :ok = Registry.register(reg, Booking)
    text = CMDC.Tool.JSON.encode!(@sent)

    assert CMDC.Tool.validate(Booking, @sent) == {:ok, @meant}
    assert CMDC.Tool.validate_json(Booking, text) == {:ok, @meant}
    assert CMDC.Tool.validate(reg, "fs.book", @sent) == {:ok, @meant}
    assert CMDC.Tool.validate_json(reg, "fs.book", text) == {:ok, @meant}
  end

  test "non-strict calls behave as before" do
    valid = %{"city" => "Oslo", "days" => 2}
    assert CMDC.Tool.validate(Booking, valid) == {:ok, valid}
    # A real error is still reported as itself.
    assert {:error, [%{path: "/days", keyword: "type"}]} =
             CMDC.Tool.validate(Booking, %{"city" => "Oslo", "days" => "two"})

    # A required field sent as null is not "absent": still refused.
    assert {:error, _} = CMDC.Tool.validate(Booking, %{"city" => nil})
  end

  test "the runner hands the tool what the original schema means, and maps names back" do
    reg = Registry.new()
    :ok = Registry.register(reg, Booking)

    # The name OpenAI was given, as the model calls it.
    [tool] = CMDC.Tool.to_schema(reg, %{}, format: :openai, strict: true)
    assert tool["function"]["name"] == "fs_book"

    for tools <- [reg, [Booking]] do
      call = %{id: "1", name: "fs_book", arguments: CMDC.Tool.JSON.encode!(@sent)}
      result = Runner.run(tools, call, %CMDC.Context{})
      refute result.is_error, result.content
      assert CMDC.Tool.JSON.decode!(result.content) == @meant
    end

    # Gemini and MCP take the name as it is.
    assert [%{"functionDeclarations" => [%{"name" => "fs.book"}]}] =
             CMDC.Tool.to_schema(reg, %{}, format: :gemini)

    assert [%{"name" => "fs.book"}] = CMDC.Tool.to_schema(reg, %{}, format: :mcp)

    unknown = Runner.run(reg, %{id: "2", name: "fs_look", arguments: %{}}, %CMDC.Context{})
    assert unknown.is_error and unknown.reason == :unknown_tool
  end

  test "the cluster validates where the call starts and hands on what the original means" do
    scope = :"strict_round_trip_#{System.unique_integer([:positive])}"
    {:ok, pid} = CMDC.Tool.Cluster.publish([Booking], scope: scope)

    call = %{id: "c", name: "fs.book", arguments: CMDC.Tool.JSON.encode!(@sent)}
    result = CMDC.Tool.Cluster.run(call, CMDC.Context.new(), scope: scope)
    refute result.is_error, result.content
    assert CMDC.Tool.JSON.decode!(result.content) == @meant
    CMDC.Tool.Cluster.unpublish(pid)
  end

  test "the MCP server hands the tool what the original schema means" do
    {:ok, out} = StringIO.open("")
    input = CMDC.Test.MCPIO.feeder()
    me = self()

    spawn_link(fn ->
      CMDC.Tool.MCP.Server.serve([Booking], input: input, output: out)
      send(me, :stopped)
    end)

    CMDC.Test.MCPIO.feed(input, %{"jsonrpc" => "2.0", "id" => 1, "method" => "initialize"})

    CMDC.Test.MCPIO.feed(input, %{
      "jsonrpc" => "2.0",
      "id" => 2,
      "method" => "tools/call",
      "params" => %{"name" => "fs.book", "arguments" => @sent}
    })

    [_, %{"id" => 2, "result" => result}] = CMDC.Test.MCPIO.await_frames(out, 2)
    CMDC.Test.MCPIO.eof(input)
    assert_receive :stopped
    assert %{"isError" => false, "content" => [%{"text" => text}]} = result
    assert CMDC.Tool.JSON.decode!(text) == @meant
  end

  defmodule Search do
    @behaviour CMDC.Tool
    def name, do: "search"
    def description, do: "Search (Pydantic's `lang: Optional[str] = \"en\"`)."

    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "q" => %{"type" => "string"},
          "lang" => %{"anyOf" => [%{"type" => "string"}, %{"type" => "null"}], "default" => "en"},
          "page" => %{"type" => "integer", "default" => 1}
        },
        "required" => ["q"]
      }
    end

    def execute(args, _ctx), do: {:ok, CMDC.Tool.JSON.encode!(args)}
  end

  test "a strict-mode null for an optional field with a default gives the tool the default" do
    sent = %{"q" => "x", "lang" => nil, "page" => nil}
    meant = %{"q" => "x", "lang" => "en", "page" => 1}
    assert {:ok, ^meant} = CMDC.Tool.validate(Search, sent)
    # A value the model chose stays.
    assert {:ok, %{"lang" => "fr"}} = CMDC.Tool.validate(Search, %{sent | "lang" => "fr"})

    reg = Registry.new()
    :ok = Registry.register(reg, [Search])

    for tools <- [[Search], reg] do
      result = Runner.run(tools, %{id: "1", name: "search", arguments: sent}, %CMDC.Context{})
      assert CMDC.Tool.JSON.decode!(result.content) == meant
    end

    scope = :"strict_defaults_#{System.unique_integer([:positive])}"
    {:ok, pid} = CMDC.Tool.Cluster.publish([Search], scope: scope)
    call = %{id: "c", name: "search", arguments: CMDC.Tool.JSON.encode!(sent)}
    result = CMDC.Tool.Cluster.run(call, CMDC.Context.new(), scope: scope)
    assert CMDC.Tool.JSON.decode!(result.content) == meant
    CMDC.Tool.Cluster.unpublish(pid)

    {:ok, out} = StringIO.open("")
    input = CMDC.Test.MCPIO.feeder()
    me = self()

    spawn_link(fn ->
      CMDC.Tool.MCP.Server.serve([Search], input: input, output: out)
      send(me, :stopped)
    end)

    CMDC.Test.MCPIO.feed(input, %{"jsonrpc" => "2.0", "id" => 1, "method" => "initialize"})

    CMDC.Test.MCPIO.feed(input, %{
      "jsonrpc" => "2.0",
      "id" => 2,
      "method" => "tools/call",
      "params" => %{"name" => "search", "arguments" => sent}
    })

    [_, %{"id" => 2, "result" => result}] = CMDC.Test.MCPIO.await_frames(out, 2)
    CMDC.Test.MCPIO.eof(input)
    assert_receive :stopped
    assert %{"content" => [%{"text" => text}]} = result
    assert CMDC.Tool.JSON.decode!(text) == meant
  end

  test "two names a provider would be given as one are refused with a clear error" do
    a = CMDC.Tool.Test.Factory.tool("fs.read")
    b = CMDC.Tool.Test.Factory.tool("fs_read")
    reg = Registry.new()
    :ok = Registry.register(reg, [a, b])

    for source <- [reg, [a, b]] do
      assert_raise ArgumentError, ~r/"fs.read" and "fs_read" would both be named "fs_read"/, fn ->
        CMDC.Tool.to_schema(source, %{}, format: :anthropic)
      end
    end

    # Gemini and MCP keep both names apart.
    assert [%{"functionDeclarations" => [_, _]}] = CMDC.Tool.to_schema(reg, %{}, format: :gemini)
  end

  test "check_name/1 and name_for/2: the one name rule and each provider's name, as the CLI shows" do
    assert {:ok, "fs.read"} = RoundTrip.check_name("fs.read")
    assert {:error, message} = RoundTrip.check_name(String.duplicate("a", 200))
    assert message =~ "128"
    assert RoundTrip.name_for("fs.read", :anthropic) == "fs_read"

    assert RoundTrip.original_name(["fs.read"], RoundTrip.name_for("fs.read", :openai)) ==
             {:ok, "fs.read"}

    assert_raise ArgumentError, ~r/format/, fn -> RoundTrip.name_for("echo", :no_such_format) end
  end
end
