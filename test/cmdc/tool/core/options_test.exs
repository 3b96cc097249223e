defmodule CMDC.Tool.OptionsTest do
  # Every public function that takes options, called with a misspelled key: each raises
  # ArgumentError naming the function, the key and the option meant. A new function with
  # options gets a row here.
  use ExUnit.Case, async: true
  doctest CMDC.Tool.Options

  alias CMDC.Tool.Examples.{Echo, ReadFile}

  defp ctx, do: %CMDC.Context{session_id: "options-test"}
  defp call, do: %{id: "1", name: "echo", arguments: %{"text" => "a"}}

  defp script_module do
    dir = Path.join(System.tmp_dir!(), "cmdc_opts_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf(dir) end)
    path = Path.join(dir, "t.py")
    File.write!(path, "def twice(x: int) -> int:\n    \"\"\"Twice.\"\"\"\n    return 2 * x\n")
    {:ok, %{tools: [module]}} = CMDC.Tool.Script.load(path)
    module
  end

  # {function, misspelled key, the key meant, the call}
  defp rows do
    reg = CMDC.Tool.Registry.new()
    script = script_module()

    [
      {"CMDC.Tool.to_schema/3", :fromat, :format,
       fn -> CMDC.Tool.to_schema([Echo], %{}, fromat: :anthropic) end},
      {"to_schema_json/3", :strcit, :strict,
       fn -> CMDC.Tool.to_schema_json([Echo], %{}, strcit: true) end},
      {"Providers.convert/3", :fromat, :format,
       fn -> CMDC.Tool.Providers.convert(reg, %{}, fromat: :gemini) end},
      {"CMDC.Tool.Runner.run/4", :timout, :timeout,
       fn -> CMDC.Tool.Runner.run([Echo], call(), ctx(), timout: 1) end},
      {"CMDC.Tool.Runner.async/4", :aprover, :approver,
       fn -> CMDC.Tool.Runner.async([Echo], call(), ctx(), aprover: nil) end},
      {"CMDC.Tool.Runner.await/2", :on_updat, :on_update,
       fn ->
         handle = CMDC.Tool.Runner.async([Echo], call(), ctx())
         CMDC.Tool.Runner.await(handle, on_updat: nil)
       end},
      {"CMDC.Tool.Runner.run_many/4", :max_concurency, :max_concurrency,
       fn -> CMDC.Tool.Runner.run_many([Echo], [call()], ctx(), max_concurency: 2) end},
      {"CMDC.Tool.Cluster.publish/2", :scop, :scope,
       fn -> CMDC.Tool.Cluster.publish([Echo], scop: :x) end},
      {"CMDC.Tool.Cluster.list/1", :timeot, :timeout,
       fn -> CMDC.Tool.Cluster.list(timeot: 1) end},
      {"CMDC.Tool.Cluster.conflicts/1", :scoep, :scope,
       fn -> CMDC.Tool.Cluster.conflicts(scoep: :x) end},
      {"CMDC.Tool.Cluster.find/2", :nod, :node, fn -> CMDC.Tool.Cluster.find("echo", nod: 1) end},
      {"CMDC.Tool.Cluster.to_schema/1", :scpoe, :scope,
       fn -> CMDC.Tool.Cluster.to_schema(scpoe: :x) end},
      {"CMDC.Tool.Cluster.run/3", :timout, :timeout,
       fn -> CMDC.Tool.Cluster.run(call(), ctx(), timout: 1) end},
      {"CMDC.Tool.Schema.compile/2", :darft, :draft,
       fn -> CMDC.Tool.Schema.compile(%{}, darft: "7") end},
      {"CMDC.Tool.Schema.compile/2", :documnets, :documents,
       fn -> CMDC.Tool.Schema.compile!(%{}, documnets: %{}) end},
      {"CMDC.Tool.Registry.new/1", :reserverd, :reserved,
       fn -> CMDC.Tool.Registry.new(reserverd: ["x"]) end},
      {"CMDC.Tool.JSON.encode/2", :prety, :pretty,
       fn -> CMDC.Tool.JSON.encode(%{}, prety: true) end},
      {"CMDC.Tool.JSON.encode/2", :prety, :pretty,
       fn -> CMDC.Tool.JSON.encode!(%{}, prety: true) end},
      {"CMDC.Tool.Exec.start/3", :timout, :timeout,
       fn -> CMDC.Tool.Exec.start("true", [], timout: 1) end},
      {"CMDC.Tool.Exec.start/3", :stdn, :stdin,
       fn -> CMDC.Tool.Exec.run("cat", [], stdn: "x") end},
      {"CMDC.Tool.Script.load/2", :max_worker, :max_workers,
       fn -> CMDC.Tool.Script.load("/nonexistent.py", max_worker: 1) end},
      {"CMDC.Tool.Script.load/2", :namspace, :namespace,
       fn -> CMDC.Tool.Script.load_many(["/nonexistent.py"], namspace: X) end},
      {"CMDC.Tool.Script.start_call/3", :timeuot, :timeout,
       fn -> CMDC.Tool.Script.call(script, %{"x" => 1}, timeuot: 1) end},
      {"CMDC.Tool.Script.await/2", :on_progres, :on_progress,
       fn -> CMDC.Tool.Script.await(make_ref(), on_progres: nil) end},
      {"CMDC.Tool.Discovery.discover/1", :path, :paths,
       fn -> CMDC.Tool.Discovery.discover(path: "x") end},
      {"CMDC.Tool.Discovery.discover/1", :trust_projcet, :trust_project,
       fn -> CMDC.Tool.Discovery.discover(trust_projcet: true) end},
      {"CMDC.Tool.Discovery.rediscover/1", :pahts, :paths,
       fn -> CMDC.Tool.Discovery.rediscover(pahts: []) end},
      {"CMDC.Tool.Discovery.load_into/2", :scrpit_loader, :script_loader,
       fn -> CMDC.Tool.Discovery.load_into(reg, scrpit_loader: nil) end},
      {"CMDC.Tool.Discovery.project_trusted?/1", :trustd, :trusted,
       fn -> CMDC.Tool.Discovery.project_trusted?(trustd: []) end},
      {"CMDC.Tool.Discovery.Trust.trust/2", :hme, :home,
       fn -> CMDC.Tool.Discovery.Trust.trust("/x", hme: "/tmp") end},
      {"CMDC.Tool.Discovery.Trust.untrust/2", :cmdc_hmoe, :cmdc_home,
       fn -> CMDC.Tool.Discovery.Trust.untrust("/x", cmdc_hmoe: "/tmp") end},
      {"CMDC.Tool.Discovery.Trust.list/1", :hoem, :home,
       fn -> CMDC.Tool.Discovery.Trust.list(hoem: "/tmp") end},
      {"CMDC.Tool.Project.tools/1", :exmaples, :examples,
       fn -> CMDC.Tool.Project.tools(exmaples: true) end},
      {"CMDC.Tool.CLI.watch/2", :turst, :trust, fn -> CMDC.Tool.CLI.load([], turst: true) end},
      {"CMDC.Tool.MCP.new/2", :page_szie, :page_size,
       fn -> CMDC.Tool.MCP.new([Echo], page_szie: 1) end},
      {"CMDC.Tool.MCP.Server.serve/2", :list_chagned, :list_changed,
       fn -> CMDC.Tool.MCP.Server.serve([Echo], list_chagned: true) end},
      {"CMDC.Tool.MCP.Servers.load/1", :init_timout, :init_timeout,
       fn -> CMDC.Tool.MCP.Servers.load(init_timout: 1) end},
      {"CMDC.Tool.MCP.Client.start_link/1", :trasport, :transport,
       fn -> CMDC.Tool.MCP.Client.start_link(name: "x", trasport: nil) end},
      {"CMDC.Tool.MCP.Client.request/4", :timout, :timeout,
       fn -> CMDC.Tool.MCP.Client.call_tool(self(), "t", %{}, timout: 1) end},
      # Issue 40 (item 9): the ones that took any key.
      {"CMDC.Tool.Registry.search/3", :limt, :limit,
       fn -> CMDC.Tool.Registry.search(reg, "issue", limt: 3) end},
      {"CMDC.Tool.Registry.search/3", :namepsace, :namespace,
       fn -> CMDC.Tool.Registry.search(reg, "issue", namepsace: "x") end},
      {"CMDC.Tool.Session.new/2", :defr, :defer,
       fn -> CMDC.Tool.Session.new(reg, defr: true) end},
      {"CMDC.Tool.Deferred.openai_search_output/3", :stirct, :strict,
       fn ->
         result = CMDC.Tool.Result.error("x", :tool_error)
         CMDC.Tool.Deferred.openai_search_output(result, reg, stirct: true)
       end},
      {"CMDC.Tool.Runner.session_event/4", :hoks, :hooks,
       fn -> CMDC.Tool.Runner.session_event([Echo], :switch, ctx(), hoks: []) end},
      {"CMDC.Tool.Script.cache_status/2", :cache_kye, :cache_key,
       fn -> CMDC.Tool.Script.cache_status([], cache_kye: "k") end},
      {"CMDC.Tool.Hooks.Config.load/1", :trust_projet, :trust_project,
       fn -> CMDC.Tool.Hooks.load(trust_projet: true) end},
      {"CMDC.Tool.Test.call/4", :timout, :timeout,
       fn -> CMDC.Tool.Test.call([Echo], "echo", %{}, timout: 1) end},
      {"CMDC.Tool.Test.schemas!/2", :fromats, :formats,
       fn -> CMDC.Tool.Test.schemas!([Echo], fromats: [:mcp]) end}
    ]
  end

  test "every public function with options raises on a misspelled one, with did-you-mean" do
    for {function, typo, meant, fun} <- rows() do
      error = assert_raise ArgumentError, fun

      assert error.message =~ function, "#{function}: #{error.message}"
      assert error.message =~ "unknown option #{inspect(typo)}", "#{function}: #{error.message}"
      assert error.message =~ "did you mean #{inspect(meant)}?", "#{function}: #{error.message}"
    end
  end

  test "options that are not a keyword list are refused too" do
    assert_raise ArgumentError, ~r/options must be a keyword list/, fn ->
      CMDC.Tool.Runner.run([Echo], call(), ctx(), [:timeout])
    end
  end

  test "the right options still work" do
    assert [%{"name" => "echo"}] = CMDC.Tool.to_schema([Echo], %{}, format: :anthropic)
    assert CMDC.Tool.Runner.run([ReadFile], call(), ctx(), timeout: 1_000).reason == :unknown_tool
    assert [] = CMDC.Tool.Cluster.list(scope: :options_test, timeout: 100)
    assert [] = CMDC.Tool.Cluster.list(:options_test)
  end

  test "the cluster's functions all take the scope as an option" do
    {:ok, pid} = CMDC.Tool.Cluster.publish([Echo], scope: :options_scope)
    on_exit(fn -> Process.exit(pid, :kill) end)
    assert [%{name: "echo"}] = CMDC.Tool.Cluster.list(scope: :options_scope)
    assert [%{name: "echo"}] = CMDC.Tool.Cluster.list(:options_scope)
    assert [] = CMDC.Tool.Cluster.conflicts(scope: :options_scope)
    assert {:ok, %{name: "echo"}} = CMDC.Tool.Cluster.find("echo", scope: :options_scope)

    assert [%{"function" => %{"name" => "echo"}}] =
             CMDC.Tool.Cluster.to_schema(scope: :options_scope)

    assert %{content: "a", is_error: false} =
             CMDC.Tool.Cluster.run(call(), ctx(), scope: :options_scope, timeout: 5_000)

    assert [] = CMDC.Tool.Cluster.list(scope: :another_scope)
  end
end
