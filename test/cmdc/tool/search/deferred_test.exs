defmodule CMDC.Tool.DeferredTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Deferred, JSON, Registry, Runner, Session}
  alias CMDC.Tool.Search.Tool, as: SearchTool
  alias CMDC.Tool.Test.Factory

  doctest CMDC.Tool.Deferred
  doctest CMDC.Tool.Session

  defp registry(with_search \\ true) do
    reg = Registry.new()

    tools = [
      Factory.tool("fs.read_file", "Read a file's text.", %{
        "type" => "object",
        "properties" => %{"path" => %{"type" => "string"}},
        "required" => ["path"]
      }),
      Factory.tool("git_commit", "Record changes to the repository.", %{
        "type" => "object",
        "properties" => %{"message" => %{"type" => "string"}}
      }),
      Factory.tool("get_forecast", "Get the weather forecast for a city.", %{
        "type" => "object",
        "properties" => %{"city" => %{"type" => "string"}}
      })
    ]

    :ok = Registry.register(reg, if(with_search, do: [SearchTool | tools], else: tools))
    reg
  end

  defp names(tools), do: Enum.map(tools, &(&1["name"] || get_in(&1, ["function", "name"])))

  test "Anthropic: defer_loading on deferred tools and the hosted search tool last" do
    reg = registry(false)

    tools =
      CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: true, always_loaded: ["git_commit"])

    assert names(tools) == ["fs_read_file", "git_commit", "get_forecast", "tool_search_tool_bm25"]
    assert Enum.map(tools, & &1["defer_loading"]) == [true, nil, true, nil]
    assert List.last(tools)["type"] == "tool_search_tool_bm25_20251119"

    regex =
      CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: ["fs.read_file"], search: :regex)

    assert List.last(regex) == %{
             "type" => "tool_search_tool_regex_20251119",
             "name" => "tool_search_tool_regex"
           }

    assert Enum.map(regex, & &1["defer_loading"]) == [true, nil, nil, nil]
  end

  test "a threshold defers only past that many tools" do
    reg = registry(false)

    assert CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: 3) ==
             CMDC.Tool.to_schema(reg, %{}, format: :anthropic)

    assert length(CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: 2)) == 4
  end

  test "OpenAI Responses: defer_loading and tool_search, hosted or client" do
    reg = registry()
    hosted = CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, defer: true)
    assert List.last(hosted) == %{"type" => "tool_search"}
    assert names(Enum.drop(hosted, -1)) == ["fs_read_file", "git_commit", "get_forecast"]
    assert Enum.all?(Enum.drop(hosted, -1), &(&1["defer_loading"] == true))

    client =
      CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, defer: true, search: :client)

    assert %{"type" => "tool_search", "execution" => "client", "parameters" => %{}} =
             List.last(client)
  end

  test "OpenAI chat, Gemini, MCP: deferred tools left out, search_tools listed, loaded ones kept" do
    reg = registry()

    for format <- [:openai, :gemini, :gemini_json_schema, :mcp] do
      tools = CMDC.Tool.to_schema(reg, %{}, format: format, defer: true, loaded: ["git_commit"])

      decls =
        if format in [:gemini, :gemini_json_schema],
          do: hd(tools)["functionDeclarations"],
          else: tools

      assert names(decls) == ["git_commit", "search_tools"], "#{format}"
    end
  end

  test "the client search tool must be in the registry the runner calls against" do
    reg = registry(false)

    assert_raise ArgumentError, ~r/needs CMDC.Tool.Search.Tool registered/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :openai, defer: true)
    end

    assert_raise ArgumentError, ~r/search: expects one of/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: true, search: :bogus)
    end

    assert_raise ArgumentError, ~r/defer: expects/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: :sometimes)
    end
  end

  test "the runner runs search_tools like any call; a session loads what it found" do
    reg = registry()
    session = Session.new(reg, format: :openai)
    assert names(Session.tools(session)) == ["search_tools"]

    call = %{
      id: "c1",
      name: "search_tools",
      arguments: JSON.encode!(%{"query" => "weather in Paris"})
    }

    result = Runner.run(reg, call, %CMDC.Context{}, subscriber: self())
    refute result.is_error, result.content
    assert_received {:cmdc_tool_event, :start, %{name: "search_tools"}}
    assert_received {:cmdc_tool_event, :end, %{name: "search_tools", is_error: false}}

    assert [%{"name" => "get_forecast", "parameters" => %{"type" => "object"}} | _] =
             result.structured["tools"]

    assert JSON.decode!(result.content) == result.structured
    session = Session.observe(session, result)
    assert "get_forecast" in Session.loaded(session)
    assert "get_forecast" in names(Session.tools(session))
    # A bad query is the tool's error, not a crash.
    bad =
      Runner.run(reg, %{call | arguments: ~s({"query": "(x", "mode": "regex"})}, %CMDC.Context{})

    assert bad.is_error and bad.content =~ "not accepted"
    assert Session.observe(session, bad) == session
    # Invalid arguments are refused by the schema like any tool's.
    assert Runner.run(reg, %{call | arguments: ~s({"query": ""})}, %CMDC.Context{}).reason ==
             :invalid
  end

  test "Anthropic tool_reference and OpenAI tool_search_output answers" do
    reg = registry()
    call = %{id: "toolu_1", name: "search_tools", arguments: %{"query" => "read a file"}}
    result = Runner.run(reg, call, %CMDC.Context{})

    assert %{"type" => "tool_result", "tool_use_id" => "toolu_1", "content" => [ref | _]} =
             Deferred.anthropic_result(result)

    assert ref == %{"type" => "tool_reference", "tool_name" => "fs_read_file"}

    out = Deferred.openai_search_output(%{result | id: "call_1"}, reg)
    assert %{"type" => "tool_search_output", "call_id" => "call_1", "status" => "completed"} = out
    assert [%{"name" => "fs_read_file", "type" => "function"} | _] = out["tools"]

    error = %CMDC.Tool.Result{id: "x", is_error: true, content: "bad"}
    assert Deferred.anthropic_result(error)["is_error"] == true
    assert Deferred.openai_search_output(error, reg)["status"] == "incomplete"
  end

  test "every output passes the providers' own SDK types" do
    case CMDC.Tool.DeferredCheck.python() do
      {:ok, python} -> check_with(python)
      {:skip, reason} -> IO.puts("\nskipped: #{reason} (provider_packages_test.exs creates it)")
    end
  end

  defp check_with(python) do
    reg = registry()
    search = %{id: "s", name: "search_tools", arguments: %{"query" => "read a file"}}
    result = Runner.run(reg, search, %CMDC.Context{})

    cases =
      for(
        t <- CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: true),
        do: anthropic_case(t)
      ) ++
        for(
          search <- [:regex, :client],
          t <- CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: true, search: search),
          do: anthropic_case(t)
        ) ++
        for(
          search <- [:hosted, :client],
          strict <- [false, true],
          t <-
            CMDC.Tool.to_schema(reg, %{},
              format: :openai_responses,
              defer: true,
              search: search,
              strict: strict
            ),
          do: responses_case(t)
        ) ++
        for(
          t <-
            CMDC.Tool.to_schema(reg, %{}, format: :openai, defer: true, loaded: ["git_commit"]),
          do: {"openai_chat", t}
        ) ++
        for(
          f <- [:gemini, :gemini_json_schema],
          t <-
            hd(CMDC.Tool.to_schema(reg, %{}, format: f, defer: true, loaded: ["git_commit"]))[
              "functionDeclarations"
            ],
          do: {"gemini_decl", t}
        ) ++
        for(
          t <- CMDC.Tool.to_schema(reg, %{}, format: :mcp, defer: true, loaded: ["git_commit"]),
          do: {"mcp_tool", t}
        ) ++
        [
          {"anthropic_tool_result", Deferred.anthropic_result(result)},
          {"openai_tool_search_output", Deferred.openai_search_output(result, reg)},
          {"openai_tool_search_output", Deferred.openai_search_output(result, reg, strict: true)}
        ]

    report = CMDC.Tool.DeferredCheck.run(python, cases)
    assert report["failures"] == [], inspect(report["failures"], pretty: true)
    assert report["checked"] == length(cases)
    assert length(cases) >= 25
  end

  defp anthropic_case(%{"type" => "tool_search_tool_bm25_20251119"} = t),
    do: {"anthropic_bm25", t}

  defp anthropic_case(%{"type" => "tool_search_tool_regex_20251119"} = t),
    do: {"anthropic_regex", t}

  defp anthropic_case(t), do: {"anthropic_tool", t}

  defp responses_case(%{"type" => "tool_search"} = t), do: {"openai_tool_search", t}
  defp responses_case(t), do: {"openai_responses_function", t}
end
