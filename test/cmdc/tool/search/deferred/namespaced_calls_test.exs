defmodule CMDC.Tool.Deferred.NamespacedCallsTest do
  # Issue 37 item 3: a call's namespace must hold its name, or the call is an unknown tool (with
  # the namespace's closest names) on every path: the runner, the MCP server/catalog (a relayed
  # call with a "namespace"); the cluster's is in cluster_test.exs. And issue 40 item 10: one
  # rule for what a tool's namespace is, and a warning for a namespaces: entry no tool is in.
  use ExUnit.Case, async: true

  import ExUnit.CaptureLog

  alias CMDC.Test.MCPIO
  alias CMDC.Tool.{Registry, Runner}
  alias CMDC.Tool.Deferred.Namespaces
  alias CMDC.Tool.Test.Factory

  doctest CMDC.Tool.Deferred.OwnNamespace

  defmodule ListOrders do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "list_orders"
    def description, do: "List a customer's orders."
    def parameters, do: %{"type" => "object"}
    def tool_options, do: [namespace: "crm"]
    def execute(_args, _ctx), do: {:ok, "orders listed"}
  end

  # Tools whose execute answers their own name: a call that reached one shows it.
  defp registry do
    reg = Registry.new()
    made = Factory.tools(["admin__wipe", "create_issue", "github__create_issue", "crm__export"])
    :ok = Registry.register(reg, [ListOrders | made])
    reg
  end

  defp call(name, ns), do: %{id: "c-#{ns}-#{name}", name: name, namespace: ns, arguments: %{}}

  test "the runner refuses a namespace that does not hold the name, with did-you-mean" do
    reg = registry()
    ctx = %CMDC.Context{}

    wipe = Runner.run(reg, call("admin__wipe", "crm"), ctx)
    assert {wipe.is_error, wipe.reason} == {true, :unknown_tool}
    refute wipe.content == "admin__wipe"
    assert wipe.content =~ "Unknown tool: admin__wipe in namespace crm"

    plain = Runner.run(reg, call("create_issue", "nonexistent"), ctx)
    assert {plain.is_error, plain.reason} == {true, :unknown_tool}
    assert plain.content =~ "no tool is in nonexistent (call create_issue without a namespace)"

    # The closest names of the namespace: list_orders (its own) and export (its prefix).
    near = Runner.run(reg, call("list_order", "crm"), ctx)
    assert near.reason == :unknown_tool
    assert near.content == "Unknown tool: list_order in namespace crm. Did you mean: list_orders?"

    # What the namespace does hold still runs: its own namespace, or its prefix.
    assert Runner.run(reg, call("list_orders", "crm"), ctx).content == "orders listed"
    assert Runner.run(reg, call("export", "crm"), ctx).content == "crm__export"
    assert Runner.run(reg, call("create_issue", "github"), ctx).content == "github__create_issue"
    # The same module list, not a registry: the same answers.
    list = Registry.list(reg)
    assert Runner.run(list, call("admin__wipe", "crm"), ctx).content == wipe.content
    # run_many too.
    assert [%{reason: :unknown_tool}, %{content: "orders listed"}] =
             Runner.run_many(reg, [call("admin__wipe", "crm"), call("list_orders", "crm")], ctx)
  end

  test "a namespaces: map given to the runner lets a call reach the tools it groups" do
    reg = registry()
    explicit = %{"ops" => %{description: "Operations", tools: ["admin__wipe"]}}
    ctx = %CMDC.Context{}

    assert Runner.run(reg, call("admin__wipe", "ops"), ctx).reason == :unknown_tool

    assert Runner.run(reg, call("admin__wipe", "ops"), ctx, namespaces: explicit).content ==
             "admin__wipe"

    # The map does not open other namespaces.
    assert Runner.run(reg, call("admin__wipe", "crm"), ctx, namespaces: explicit).reason ==
             :unknown_tool
  end

  test "an MCP call relayed with a namespace follows the same rule (catalog server)" do
    reg = registry()
    {:ok, out} = StringIO.open("")
    input = MCPIO.feeder()
    me = self()
    feed = fn msg -> MCPIO.feed(input, Map.put(msg, "jsonrpc", "2.0")) end

    spawn_link(fn ->
      CMDC.Tool.MCP.Catalog.serve(reg,
        core: ["admin__wipe", "create_issue", "list_orders"],
        input: input,
        output: out
      )

      send(me, :stopped)
    end)

    feed.(%{"id" => 1, "method" => "initialize", "params" => %{}})

    calls = [
      {2, "admin__wipe", "crm"},
      {3, "create_issue", "nonexistent"},
      {4, "list_orders", "crm"},
      {5, "admin__wipe", nil}
    ]

    for {id, name, ns} <- calls do
      params = %{"name" => name, "arguments" => %{}}
      params = if ns, do: Map.put(params, "namespace", ns), else: params
      feed.(%{"id" => id, "method" => "tools/call", "params" => params})
    end

    frames = MCPIO.await_frames(out, 5)
    by_id = Map.new(frames, &{&1["id"], &1})
    assert by_id[2]["error"]["message"] =~ "Unknown tool: admin__wipe in namespace crm"
    assert by_id[3]["error"]["message"] =~ "no tool is in nonexistent"
    assert [%{"text" => "orders listed"}] = by_id[4]["result"]["content"]
    # Without a namespace the name is the whole name, as MCP defines it.
    assert [%{"text" => "admin__wipe"}] = by_id[5]["result"]["content"]
    MCPIO.eof(input)
    assert_receive :stopped
  end

  describe "one rule for a tool's namespace (issue 40 item 10)" do
    test "search and to_schema agree: declared namespaces, not name prefixes" do
      reg = registry()
      grouped = CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: true)
      namespaces = for %{"type" => "namespace", "name" => n} <- grouped, do: n
      assert namespaces == ["crm"]
      assert {:ok, [{"list_orders", _}]} = Registry.search(reg, "orders", namespace: "crm")
      assert {:ok, []} = Registry.search(reg, "create issue", namespace: "github")
      assert Namespaces.own_namespace(reg, ListOrders, "list_orders") == "crm"

      # A namespace in the registry's settings (a discovered tool's metadata, its plugin's
      # name) is the tool's namespace for search, to_schema and calls alike.
      :ok = Registry.put_settings(reg, "admin__wipe", %{"namespace" => "ops"})
      assert {:ok, [{"admin__wipe", _}]} = Registry.search(reg, "wipe", namespace: "ops")
      grouped = CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: true)

      assert Enum.sort(for %{"type" => "namespace", "name" => n} <- grouped, do: n) == [
               "crm",
               "ops"
             ]

      ops = Runner.run(reg, call("admin__wipe", "ops"), %CMDC.Context{})
      assert ops.content == "admin__wipe"
      # Taken back: gone from the namespace everywhere.
      :ok = Registry.put_settings(reg, "admin__wipe", %{})
      assert {:ok, []} = Registry.search(reg, "wipe", namespace: "ops")
      assert Runner.run(reg, call("admin__wipe", "ops"), %CMDC.Context{}).reason == :unknown_tool
    end

    test "a namespaces: entry no tool ends up in is a warning (log, raise or ignore)" do
      reg = registry()
      opts = [format: :openai_responses, namespaces: %{"sales" => "Sales tools"}]

      log = capture_log(fn -> CMDC.Tool.to_schema(reg, %{}, opts) end)
      assert log =~ "namespaces: no tool is in sales"

      assert_raise ArgumentError, ~r/no tool is in sales/, fn ->
        CMDC.Tool.to_schema(reg, %{}, [warnings: :raise] ++ opts)
      end

      # Named tools that are not in the list say so; a namespace that got tools is quiet.
      missing = %{"sales" => %{tools: ["no_such_tool"]}, "crm" => "CRM"}

      assert_raise ArgumentError, ~r/none of its tools \(no_such_tool\)/, fn ->
        CMDC.Tool.to_schema(reg, %{},
          format: :openai_responses,
          namespaces: missing,
          warnings: :raise
        )
      end

      fine = %{"crm" => "Customers", "ops" => %{tools: ["admin__wipe"]}}

      assert [_ | _] =
               CMDC.Tool.to_schema(reg, %{},
                 format: :openai_responses,
                 namespaces: fine,
                 warnings: :raise
               )
    end
  end
end
