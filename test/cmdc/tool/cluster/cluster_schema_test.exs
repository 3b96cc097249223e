defmodule CMDC.Tool.ClusterSchemaTest do
  # CMDC.Tool.Cluster.to_schema/1 with to_schema/3's options, on real peer nodes whose tools
  # exist there only (an MCP client's tools over the official Python SDK server, tools made on
  # the peer, a module compiled there): the output must be what CMDC.Tool.to_schema/3 gives
  # for the same tools here. Not async: peer nodes joining and leaving this node are seen by
  # every cluster view here, so the cluster modules run one at a time.
  use ExUnit.Case, async: false

  import CMDC.Tool.Eventually

  alias CMDC.Tool.{Cluster, DeferredCheck, MCPServers, Peers, Registry}
  alias CMDC.Tool.Examples.Echo
  alias CMDC.Tool.Test.Factory

  doctest Cluster

  @moduletag timeout: 180_000
  @moduletag :capture_log

  # Compiled on the peer and here: on the peer it is a module this node never loaded.
  @weather """
  defmodule CMDC.Tool.ClusterSchemaTest.Weather do
    @behaviour CMDC.Tool
    def name, do: "get_weather"
    def title, do: "Weather"
    def annotations, do: [read_only_hint: true]
    def description, do: "Current weather for a city."
    def tool_options, do: [namespace: "geo"]
    def examples, do: [%{"city" => "Paris"}, %{"city" => "Lyon", "units" => "c"}]

    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "city" => %{"type" => "string"},
          "units" => %{"type" => "string", "enum" => ["c", "f"]}
        },
        "required" => ["city"]
      }
    end

    def execute(%{"city" => city}, _ctx), do: {:ok, "sunny in " <> city}
  end
  """

  @made [
    {"github__create_issue", "Open an issue.",
     %{
       "type" => "object",
       "properties" => %{"title" => %{"type" => "string"}, "body" => %{"type" => "string"}},
       "required" => ["title"]
     }},
    {"github__list_issues", "List open issues.", %{"type" => "object"}},
    {"fs.read", "Read a file's text.",
     %{"type" => "object", "properties" => %{"path" => %{"type" => "string"}}}},
    {"list_orders", "List a customer's open orders.", %{"type" => "object"}}
  ]

  # What a discovered tool's metadata or a plugin stores in the registry's settings.
  @settings %{"list_orders" => %{"namespace" => "crm"}}

  setup_all do
    Peers.distribute!()

    case MCPServers.python_stdio() do
      {:ok, spec} -> cluster(spec)
      {:error, reason} -> raise "the Python SDK's MCP server is needed: #{inspect(reason)}"
    end
  end

  # Peer A: the MCP server's tools (slots made there) and the compiled module, as a module
  # list. Peer B: tools made there, in a registry with settings. This node: Echo.
  defp cluster(spec) do
    scope = :"schema_#{System.unique_integer([:positive])}"
    {peer_a, a} = Peers.start!(:schema_a)
    {peer_b, b} = Peers.start!(:schema_b)

    [{weather, _}] = :erpc.call(a, Code, :compile_string, [@weather])
    mcp_a = :erpc.call(a, Peers, :mcp_tools, ["py", spec], 120_000)
    {:ok, _} = :erpc.call(a, Cluster, :publish, [[weather | mcp_a], [scope: scope]])
    made_b = :erpc.call(b, Factory, :tools, [@made])
    {:ok, _} = :erpc.call(b, Peers, :publish_registry, [made_b, @settings, [scope: scope]])
    {:ok, local} = Cluster.publish([Echo], scope: scope)

    # The same tools here, for CMDC.Tool.to_schema/3.
    Code.compile_string(@weather)
    {:ok, sup} = Supervisor.start_link([], strategy: :one_for_one)
    client = {CMDC.Tool.MCP.Client, name: "py", transport: {:stdio, spec}, init_timeout: 60_000}
    {:ok, pid} = Supervisor.start_child(sup, client)
    :ok = CMDC.Tool.MCP.Client.await_ready(pid)
    here = [weather, Echo | Factory.tools(@made) ++ CMDC.Tool.MCP.Client.tools(pid)]
    total = length(here)

    eventually(fn -> length(Cluster.list(scope)) == total end,
      message: "the cluster view never held every tool"
    )

    on_exit(fn ->
      Cluster.unpublish(local)
      Process.exit(sup, :shutdown)
      for p <- [peer_a, peer_b], do: Peers.stop(p)
    end)

    %{scope: scope, here: Map.new(here, &{&1.name(), &1}), peer_b: b}
  end

  # The local modules in the view's order.
  defp same_tools(%{scope: scope, here: here}),
    do: Enum.map(Cluster.list(scope), &Map.fetch!(here, &1.name))

  # CMDC.Tool.to_schema/3's output over those modules.
  defp expected(ctx, opts) do
    modules = same_tools(ctx)

    if Keyword.has_key?(opts, :namespaces) do
      # A module list has no settings: give the crm tool its namespace as B's settings do.
      spec = put_crm(Keyword.fetch!(opts, :namespaces))
      CMDC.Tool.to_schema(modules, %{}, Keyword.put(opts, :namespaces, spec))
    else
      CMDC.Tool.to_schema(modules, %{}, opts)
    end
  end

  defp put_crm(true), do: %{"crm" => %{tools: ["list_orders"]}}
  defp put_crm(%{} = map), do: Map.put(map, "crm", %{tools: ["list_orders"]})

  defp cluster_schema(%{scope: scope}, opts), do: Cluster.to_schema([{:scope, scope} | opts])

  describe "the same output as CMDC.Tool.to_schema/3 over the same tools" do
    test "every format, plain and strict", ctx do
      assert cluster_schema(ctx, []) == CMDC.Tool.to_schema(same_tools(ctx))

      for format <- CMDC.Tool.Providers.formats(), strict <- [false, true] do
        opts = [format: format, strict: strict, warnings: :ignore]
        assert cluster_schema(ctx, opts) == expected(ctx, opts), "#{format} strict: #{strict}"
      end

      # The module's MCP fields and examples were read on its node.
      mcp = cluster_schema(ctx, format: :mcp, warnings: :ignore)
      weather = Enum.find(mcp, &(&1["name"] == "get_weather"))
      assert weather["title"] == "Weather" and weather["annotations"]["readOnlyHint"] == true
      assert weather["description"] =~ ~s(Examples:\n{"city":"Paris"})

      anthropic = cluster_schema(ctx, format: :anthropic, warnings: :ignore)
      weather = Enum.find(anthropic, &(&1["name"] == "get_weather"))
      assert length(weather["input_examples"]) == 2
    end

    test "OpenAI Responses with namespaces: each tool's own, read on its node", ctx do
      for strict <- [false, true] do
        opts = [format: :openai_responses, namespaces: true, strict: strict, warnings: :ignore]
        tools = cluster_schema(ctx, opts)
        assert tools == expected(ctx, opts)

        groups = for %{"type" => "namespace"} = ns <- tools, into: %{}, do: {ns["name"], ns}
        # The MCP server's (peer A's client), tool_options/0 (a module peer A compiled), the
        # registry settings (peer B).
        assert Map.has_key?(groups, "py") and Map.has_key?(groups, "geo")
        assert Enum.map(groups["crm"]["tools"], & &1["name"]) == ["list_orders"]
        assert Enum.map(groups["geo"]["tools"], & &1["name"]) == ["get_weather"]
      end

      # An explicit map on top, described.
      opts = [
        format: :openai_responses,
        namespaces: %{
          "github" => %{description: "GitHub issues", tools: ["github__create_issue"]}
        }
      ]

      tools = cluster_schema(ctx, [{:warnings, :ignore} | opts])
      assert tools == expected(ctx, [{:warnings, :ignore} | opts])
      github = Enum.find(tools, &(&1["name"] == "github"))
      assert github["description"] == "GitHub issues"
      assert Enum.map(github["tools"], & &1["name"]) == ["create_issue"]
    end

    test "defer: true (with namespaces, always_loaded, loaded, a threshold)", ctx do
      cases = [
        [format: :openai_responses, defer: true],
        [format: :openai_responses, defer: true, namespaces: true],
        [format: :openai_responses, defer: true, namespaces: true, always_loaded: ["echo"]],
        [format: :anthropic, defer: true, always_loaded: ["echo", "fs.read"]],
        [format: :anthropic, defer: true, search: :regex, loaded: ["get_weather"]],
        [format: :anthropic, defer: 3],
        [format: :anthropic, defer: 100],
        [format: :openai_responses, defer: ["fs.read", "list_orders"], strict: true]
      ]

      for opts <- cases do
        opts = [{:warnings, :ignore} | opts]
        assert cluster_schema(ctx, opts) == expected(ctx, opts), inspect(opts)
      end

      tools = cluster_schema(ctx, format: :anthropic, defer: true, always_loaded: ["echo"])
      assert %{"name" => "echo"} = echo = Enum.find(tools, &(&1["name"] == "echo"))
      refute Map.has_key?(echo, "defer_loading")
      assert Enum.count(tools, &(&1["defer_loading"] == true)) == map_size(ctx.here) - 1
      assert List.last(tools)["type"] == "tool_search_tool_bm25_20251119"
    end

    test "a registry published alone: as to_schema/3 over that registry (its settings)", ctx do
      scope = :"registry_#{System.unique_integer([:positive])}"
      # Registered in name order: the order a remote node's tools take in the view.
      made = Enum.sort_by(@made, &elem(&1, 0))
      modules = :erpc.call(ctx.peer_b, Factory, :tools, [made])

      {:ok, pub} =
        :erpc.call(ctx.peer_b, Peers, :publish_registry, [modules, @settings, [scope: scope]])

      eventually(fn -> length(Cluster.list(scope)) == length(made) end,
        message: "the cluster view never held every tool"
      )

      local = Registry.new()
      :ok = Registry.register(local, Factory.tools(made))
      for {name, map} <- @settings, do: :ok = Registry.put_settings(local, name, map)

      for opts <- [
            [format: :openai_responses, namespaces: true],
            [format: :openai_responses, namespaces: true, defer: true, strict: true],
            [format: :anthropic, defer: true, always_loaded: ["fs.read"]],
            [format: :mcp]
          ] do
        opts = [{:warnings, :ignore} | opts]

        assert Cluster.to_schema([{:scope, scope} | opts]) ==
                 CMDC.Tool.to_schema(local, %{}, opts)
      end

      tools = Cluster.to_schema(scope: scope, format: :openai_responses, namespaces: true)
      assert %{"tools" => [%{"name" => "list_orders"}]} = Enum.find(tools, &(&1["name"] == "crm"))
      :ok = :erpc.call(ctx.peer_b, Cluster, :unpublish, [pub])
    end

    test "every namespaced and deferred list passes the openai package's types", ctx do
      case DeferredCheck.python() do
        {:ok, python} ->
          cases =
            for defer <- [false, true],
                strict <- [false, true],
                tool <-
                  cluster_schema(ctx,
                    format: :openai_responses,
                    namespaces: true,
                    defer: defer,
                    strict: strict,
                    warnings: :ignore
                  ),
                do: {kind(tool), tool}

          report = DeferredCheck.run(python, cases)
          assert report["failures"] == [], inspect(report["failures"], pretty: true)
          assert report["checked"] == length(cases)

        {:skip, reason} ->
          IO.puts("\nskipped: #{reason} (provider_packages_test.exs creates it)")
      end
    end
  end

  defp kind(%{"type" => "tool_search"}), do: "openai_tool_search"
  defp kind(%{"type" => "namespace"}), do: "openai_namespace"
  defp kind(_), do: "openai_responses_function"

  defp outcome(fun) do
    {:ok, fun.()}
  rescue
    e in ArgumentError -> {:raised, e.message}
  end

  describe "bad options: to_schema/3's errors" do
    test "an unknown option names the function, the closest key and every accepted one", ctx do
      error = assert_raise ArgumentError, fn -> cluster_schema(ctx, fromat: :anthropic) end
      ours = error.message

      theirs =
        assert_raise(ArgumentError, fn -> CMDC.Tool.to_schema([Echo], %{}, fromat: :x) end).message

      assert ours =~
               "CMDC.Tool.Cluster.to_schema/1: unknown option :fromat (did you mean :format?)"

      assert theirs =~ "unknown option :fromat (did you mean :format?)"

      for key <- [:scope, :timeout | CMDC.Tool.Providers.schema_options()],
          do: assert(ours =~ inspect(key))
    end

    test "a bad value gets to_schema/3's message, even when no node answers", ctx do
      for bad <- [
            [format: :bogus],
            [strict: :yes],
            [warnings: :loud],
            [format: :anthropic, namespaces: true],
            [format: :openai_responses, namespaces: %{"bad name!" => "x"}],
            [format: :anthropic, defer: "all"],
            [format: :anthropic, defer: true, search: :hosted]
          ] do
        theirs = assert_raise(ArgumentError, fn -> CMDC.Tool.to_schema([Echo], %{}, bad) end)
        ours = assert_raise(ArgumentError, fn -> cluster_schema(ctx, bad) end)
        assert ours.message == theirs.message, inspect(bad)

        # An empty view is an empty list: to_schema/3 over [] says the same.
        assert outcome(fn -> Cluster.to_schema([{:scope, :none} | bad]) end) ==
                 outcome(fn -> CMDC.Tool.to_schema([], %{}, bad) end)
      end

      assert {:raised, "unknown format :bogus" <> _} =
               outcome(fn -> Cluster.to_schema(scope: :none, format: :bogus) end)
    end

    test "search: :client is refused with what to use instead", ctx do
      error =
        assert_raise ArgumentError, fn ->
          cluster_schema(ctx, format: :openai, defer: true)
        end

      assert error.message =~ "search: :client searches a CMDC.Tool.Registry's index"
      assert error.message =~ "CMDC.Tool.Cluster"
    end
  end
end
