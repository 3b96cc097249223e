defmodule CMDC.Tool.Deferred.NamespacesTest do
  # OpenAI Responses namespaces over a real MCP server (the official Python SDK's, over stdio),
  # a tool whose metadata names its namespace and one whose tool_options/0 does; every output
  # checked with the openai package's own types.
  use ExUnit.Case, async: true

  alias CMDC.Tool.Deferred.Namespaces
  alias CMDC.Tool.{Deferred, DeferredCheck, JSON, MCPServers, Registry, Runner, Session}
  alias CMDC.Tool.MCP.Client
  alias CMDC.Tool.Search.Tool, as: SearchTool
  alias CMDC.Tool.Test.Factory

  doctest Namespaces

  @moduletag timeout: 120_000
  @moduletag :capture_log

  defmodule Billing do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "refund_invoice"
    def description, do: "Refund an invoice in full."
    def tool_options, do: [namespace: "billing"]

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{"invoice" => %{"type" => "string"}},
        "required" => ["invoice"]
      }

    def execute(%{"invoice" => id}, _ctx), do: {:ok, "refunded " <> id}
  end

  setup_all do
    {:ok, spec} = MCPServers.python_stdio()
    {:ok, sup} = Supervisor.start_link([], strategy: :one_for_one)

    {:ok, client} =
      Supervisor.start_child(
        sup,
        {Client, name: "py", transport: {:stdio, spec}, init_timeout: 60_000}
      )

    :ok = Client.await_ready(client)
    on_exit(fn -> Process.exit(sup, :shutdown) end)
    %{mcp_tools: Client.tools(client)}
  end

  defp registry(%{mcp_tools: mcp_tools}) do
    reg = Registry.new()

    orders =
      Factory.tool("list_open_orders", "List open orders for a customer.", %{
        "type" => "object",
        "properties" => %{"customer_id" => %{"type" => "string"}},
        "required" => ["customer_id"]
      })

    read = Factory.tool("fs.read_file", "Read a file's text.", %{"type" => "object"})
    :ok = Registry.register(reg, [SearchTool, orders, read, Billing | mcp_tools])
    # What a discovered tool's metadata ("namespace": "crm" in its .json) stores.
    :ok = Registry.put_settings(reg, "list_open_orders", %{"namespace" => "crm"})
    reg
  end

  defp namespace(tools, name),
    do: Enum.find(tools, &(&1["type"] == "namespace" and &1["name"] == name))

  defp names(ns), do: Enum.map(ns["tools"], & &1["name"])

  test "namespaces: true groups MCP tools by server, metadata and tool_options namespaces", ctx do
    reg = registry(ctx)
    tools = CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: true)

    py = namespace(tools, "py")
    assert "add" in names(py) and "weather" in names(py)
    assert py["description"] =~ "Tools in py: " and py["description"] =~ "add"
    assert names(namespace(tools, "crm")) == ["list_open_orders"]
    assert names(namespace(tools, "billing")) == ["refund_invoice"]
    # The search index files it under the same namespace.
    assert {:ok, [{"refund_invoice", _}]} =
             Registry.search(reg, "refund an invoice", namespace: "billing")

    # Tools without a namespace stay top-level functions, with their provider names.
    top = for %{"type" => "function", "name" => n} <- tools, do: n
    assert Enum.sort(top) == ["fs_read_file", "search_tools"]
    # The function inside keeps its definition; only the name loses the prefix.
    add = Enum.find(py["tools"], &(&1["name"] == "add"))
    assert add["parameters"]["required"] == ["a", "b"] and add["strict"] == false
  end

  test "deferred: defer_loading on the functions, never on the namespace; tool_search last",
       ctx do
    reg = registry(ctx)

    tools =
      CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: true, defer: true)

    assert List.last(tools) == %{"type" => "tool_search"}

    for %{"type" => "namespace"} = ns <- tools do
      refute Map.has_key?(ns, "defer_loading")
      assert Enum.all?(ns["tools"], &(&1["defer_loading"] == true)), ns["name"]
    end

    # always_loaded works on registered names inside namespaces too.
    kept =
      CMDC.Tool.to_schema(reg, %{},
        format: :openai_responses,
        namespaces: true,
        defer: true,
        always_loaded: ["py__add"]
      )

    add = Enum.find(namespace(kept, "py")["tools"], &(&1["name"] == "add"))
    refute Map.has_key?(add, "defer_loading")
  end

  test "an explicit map names namespaces, their description and their tools", ctx do
    reg = registry(ctx)

    tools =
      CMDC.Tool.to_schema(reg, %{},
        format: :openai_responses,
        namespaces: %{
          "fs" => %{description: "Read and write local files.", tools: ["fs.read_file"]},
          "py" => "Arithmetic and weather from the Python SDK server."
        }
      )

    files = namespace(tools, "fs")
    assert files["description"] == "Read and write local files."
    assert names(files) == ["read_file"]
    assert namespace(tools, "py")["description"] =~ "Arithmetic"
    # Automatic grouping still applies to the others.
    assert names(namespace(tools, "crm")) == ["list_open_orders"]
  end

  test "a namespaced function_call round-trips through the runner to the MCP server", ctx do
    reg = registry(ctx)

    item = %{
      "type" => "function_call",
      "id" => "fc_1",
      "call_id" => "call_1",
      "name" => "add",
      "namespace" => "py",
      "arguments" => ~s({"a": 2, "b": 3}),
      "status" => "completed"
    }

    {:ok, call} = Namespaces.call(item)
    result = Runner.run(reg, call, %CMDC.Context{})
    refute result.is_error, result.content
    assert {result.content, result.name, result.id} == {"5", "py__add", "call_1"}

    # Metadata and tool_options namespaces resolve the same way; a prefix-less name too.
    orders = %{
      id: "c2",
      name: "list_open_orders",
      namespace: "crm",
      arguments: %{"customer_id" => "7"}
    }

    assert Runner.run(reg, orders, %CMDC.Context{}).content == "list_open_orders"

    refund = %{
      id: "c3",
      name: "refund_invoice",
      namespace: "billing",
      arguments: %{"invoice" => "9"}
    }

    assert Runner.run(reg, refund, %CMDC.Context{}).content == "refunded 9"

    # Several at once, as a response's output items come.
    assert ["5", "refunded 9"] ==
             Runner.run_many(reg, [call, refund], %CMDC.Context{}) |> Enum.map(& &1.content)

    # A function the namespace does not have is the usual unknown-tool error.
    missing = Runner.run(reg, %{call | name: "subtract"}, %CMDC.Context{})
    assert missing.reason == :unknown_tool

    # Invalid arguments are refused before the wire, as for any call.
    bad = Runner.run(reg, %{call | arguments: ~s({"a": "two", "b": 3})}, %CMDC.Context{})
    assert bad.reason == :invalid
  end

  test "client tool_search: the output loads found functions inside their namespace", ctx do
    reg = registry(ctx)
    opts = [format: :openai_responses, namespaces: true, defer: true, search: :client]
    session = Session.new(reg, opts)
    request = Session.tools(session)

    search_item = %{
      "type" => "tool_search_call",
      "id" => "ts_1",
      "call_id" => "call_s",
      "execution" => "client",
      "status" => "completed",
      "arguments" => %{"query" => "add two integers"}
    }

    {:ok, call} = Namespaces.call(search_item)
    result = Runner.run(reg, call, %CMDC.Context{})
    refute result.is_error, result.content
    out = Session.search_output(session, result)
    assert %{"type" => "tool_search_output", "call_id" => "call_s", "status" => "completed"} = out

    py = namespace(out["tools"], "py")
    assert "add" in names(py)
    # Described as in the request, listing only what was found.
    assert py["description"] == namespace(request, "py")["description"]
    assert length(py["tools"]) < length(namespace(request, "py")["tools"])
    refute Enum.any?(py["tools"], &Map.has_key?(&1, "defer_loading"))
  end

  test "bad namespaces options and collisions are clear errors", ctx do
    reg = registry(ctx)

    assert_raise ArgumentError, ~r/OpenAI Responses feature/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :anthropic, namespaces: true)
    end

    assert_raise ArgumentError, ~r/namespaces: expects true or a map/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: :yes)
    end

    assert_raise ArgumentError, ~r/must be 1 to 64 letters/, fn ->
      CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: %{"a b" => "x"})
    end

    # `fs.read_file` and a tool already named `read_file`, both in `fs`: one name, two tools.
    clash = Factory.tool("read_file", "Another reader.", %{"type" => "object"})
    :ok = Registry.register(reg, clash)

    assert_raise ArgumentError, ~r/in fs, read_file would name both/, fn ->
      CMDC.Tool.to_schema(reg, %{},
        format: :openai_responses,
        namespaces: %{"fs" => %{description: "Files", tools: ["fs.read_file", "read_file"]}}
      )
    end

    assert {:error, _} = Namespaces.call(%{"type" => "message"})
  end

  test "every namespaced output passes the openai package's types", ctx do
    case DeferredCheck.python() do
      {:ok, python} -> check_with(python, ctx)
      {:skip, reason} -> IO.puts("\nskipped: #{reason} (provider_packages_test.exs creates it)")
    end
  end

  defp check_with(python, ctx) do
    reg = registry(ctx)
    search = %{id: "s", name: "search_tools", arguments: %{"query" => "weather for a city"}}
    result = Runner.run(reg, search, %CMDC.Context{})

    lists =
      for defer <- [false, true], strict <- [false, true], search <- [:hosted, :client] do
        CMDC.Tool.to_schema(reg, %{},
          format: :openai_responses,
          namespaces: true,
          defer: defer,
          strict: strict,
          search: search
        )
      end

    cases =
      for(list <- lists, tool <- list, do: responses_case(tool)) ++
        for strict <- [false, true] do
          out = Deferred.openai_search_output(result, reg, namespaces: true, strict: strict)
          assert Enum.any?(out["tools"], &(&1["type"] == "namespace"))
          {"openai_tool_search_output", out}
        end ++
        [
          {"openai_function_call",
           %{
             "type" => "function_call",
             "id" => "fc_1",
             "call_id" => "call_1",
             "name" => "add",
             "namespace" => "py",
             "arguments" => ~s({"a":1,"b":2}),
             "status" => "completed"
           }}
        ]

    report = DeferredCheck.run(python, cases)
    assert report["failures"] == [], inspect(report["failures"], pretty: true)
    assert report["checked"] == length(cases) and length(cases) >= 30
  end

  defp responses_case(%{"type" => "tool_search"} = t), do: {"openai_tool_search", t}
  defp responses_case(%{"type" => "namespace"} = t), do: {"openai_namespace", t}
  defp responses_case(t), do: {"openai_responses_function", t}

  test "a discovered plugin's tools share the plugin's namespace; metadata can name another" do
    prefix = "NsPlugin#{System.unique_integer([:positive])}"
    plugin = ".cmdc/plugins/deploy_kit"

    tools =
      for {file, name} <- [{"a.ex", "deploy_app"}, {"b.ex", "rollback_app"}] do
        {"#{plugin}/tools/#{file}",
         """
         defmodule #{prefix}.#{Macro.camelize(name)} do
           @behaviour CMDC.Tool
           def name, do: #{inspect(name)}
           def description, do: "#{name} tool"
           def parameters, do: %{"type" => "object", "properties" => %{"env" => %{"type" => "string"}}}
           def execute(%{"env" => env}, _ctx), do: {:ok, #{inspect(name)} <> " " <> env}
         end
         """}
      end

    reg =
      CMDC.Tool.Test.Discovered.registry(
        [
          {"#{plugin}/cmdc-plugin.json", ~s({"name": "deploy_kit", "version": "1.0.0"})},
          {"#{plugin}/tools/b.json", ~s({"namespace": "ops"})} | tools
        ],
        [:plugins]
      )

    tools = CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: true)
    assert names(namespace(tools, "deploy_kit")) == ["deploy_app"]
    assert names(namespace(tools, "ops")) == ["rollback_app"]

    call = %{id: "d1", name: "deploy_app", namespace: "deploy_kit", arguments: %{"env" => "prod"}}
    assert Runner.run(reg, call, %CMDC.Context{}).content == "deploy_app prod"
  end

  test "the JSON text of a namespaced list is what to_schema gives", ctx do
    reg = registry(ctx)
    opts = [format: :openai_responses, namespaces: true, defer: true]

    assert JSON.decode!(CMDC.Tool.to_schema_json(reg, %{}, opts)) ==
             CMDC.Tool.to_schema(reg, %{}, opts)
  end
end
