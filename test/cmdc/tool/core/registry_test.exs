defmodule CMDC.Tool.RegistryTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Registry, Examples}
  alias CMDC.Tool.Test.Realistic

  doctest CMDC.Tool.Registry

  import CMDC.Tool.Test.Factory, only: [tool: 1, tool: 2, tool: 3]

  describe "register/3" do
    test "registers one module or a list; list/1 keeps the order" do
      reg = Registry.new()
      assert Registry.register(reg, Examples.ReadFile) == :ok
      assert Registry.register(reg, [Examples.Echo]) == :ok
      assert Registry.list(reg) == [Examples.ReadFile, Examples.Echo]
      assert Registry.size(reg) == 2
    end

    test "one bad module names itself and nothing of the batch is registered" do
      reg = Registry.new()
      bad = tool("read file")

      assert {:error, {:invalid_tool, ^bad, message}} =
               Registry.register(reg, [Examples.Echo, bad, Examples.ReadFile])

      assert message =~ inspect(bad)
      assert message =~ ~s(name "read file" contains ' ' at position 4)
      assert message =~ "^[A-Za-z0-9_.-]{1,128}$"
      assert Registry.list(reg) == []
    end

    test "names, descriptions and schemas are checked" do
      reg = Registry.new()

      for {module, pattern} <- [
            {tool("a:b"), ~r/contains ':' at position 1/},
            {tool(String.duplicate("a", 129)), ~r/129 characters/},
            {tool("mcp tool"), ~r/contains ' '/},
            {tool("blank", "  "), ~r/description is empty/},
            {tool("latin1", <<233>>), ~r/description\/0 returned a binary that is not UTF-8/},
            {tool(%{"a" => 1}), ~r/name\/0 must return a string/},
            {tool("bad_schema", "x", %{"type" => "strnig"}), ~r/invalid schema/},
            {String, ~r/not a CMDC.Tool: it does not define name\/0/},
            {NoSuchModule, ~r/cannot be loaded/}
          ] do
        assert {:error, {:invalid_tool, ^module, message}} = Registry.register(reg, module)
        assert message =~ pattern
        assert message =~ inspect(module)
      end

      assert {:error, {:invalid_tool, "x", _}} = Registry.register(reg, ["x"])
      assert Registry.size(reg) == 0
    end

    test "a name held by another module is a conflict naming the holder" do
      reg = Registry.new()
      :ok = Registry.register(reg, Examples.Echo)
      other = tool("echo")

      assert Registry.register(reg, [tool("fresh"), other]) ==
               {:error, {:conflict, "echo", Examples.Echo}}

      assert Registry.list(reg) == [Examples.Echo]
      # The same module again updates its entry.
      assert Registry.register(reg, Examples.Echo) == :ok
      # Twice in one batch by different modules.
      a = tool("twin")
      b = tool("twin")
      assert Registry.register(reg, [a, b]) == {:error, {:conflict, "twin", a}}
    end

    test "reserved names" do
      reg = Registry.new(reserved: ["bash", :read_file])

      assert Registry.register(reg, Examples.ReadFile) ==
               {:error, {:conflict, "read_file", :reserved}}

      assert Registry.replace(reg, [Examples.ReadFile]) ==
               {:error, {:conflict, "read_file", :reserved}}

      assert Registry.register(reg, Examples.Echo) == :ok
    end
  end

  test "unregister/2 and replace/2" do
    reg = Registry.new()
    :ok = Registry.register(reg, Realistic.all())
    assert Registry.unregister(reg, "create_event") == :ok
    assert Registry.unregister(reg, "create_event") == {:error, {:not_found, "create_event", []}}

    assert Registry.list(reg) == [Realistic.Weather, Realistic.SearchCode, Realistic.ListFiles]
    assert {:ok, Realistic.ListFiles} = Registry.fetch(reg, "list_files")

    :ok = Registry.put_settings(reg, "list_files", %{policy: :auto})
    :ok = Registry.put_settings(reg, "search_code", %{policy: :ask_once})
    bad = tool("bad name")
    assert {:error, {:invalid_tool, ^bad, _}} = Registry.replace(reg, [Examples.Echo, bad])
    assert Registry.size(reg) == 3

    assert Registry.replace(reg, [Examples.Echo, Realistic.ListFiles]) == :ok
    assert Registry.list(reg) == [Examples.Echo, Realistic.ListFiles]
    assert Registry.settings(reg, "list_files") == %{policy: :auto}
    assert Registry.settings(reg, "search_code") == %{}
  end

  test "fetch/2 answers unknown names with the nearest registered ones" do
    reg = Registry.new()
    :ok = Registry.register(reg, Realistic.all() ++ [Examples.ReadFile, Examples.Echo])
    assert Registry.fetch(reg, "get_weather") == {:ok, Realistic.Weather}

    assert Registry.fetch(reg, "getWeather") ==
             {:error, {:not_found, "getWeather", ["get_weather"]}}

    assert Registry.fetch(reg, "search") == {:error, {:not_found, "search", ["search_code"]}}
    assert Registry.fetch(reg, "deploy") == {:error, {:not_found, "deploy", []}}
    assert Registry.fetch(reg, :echo) == {:ok, Examples.Echo}
    assert CMDC.Tool.suggest(reg, "list-files") == ["list_files"]
    assert CMDC.Tool.suggest(Realistic.all(), "create_events") == ["create_event"]
    # Names rank the same as the modules that carry them (the cluster only has names).
    names = Enum.map(Realistic.all(), & &1.name())
    assert CMDC.Tool.suggest(names, "create_events") == ["create_event"]

    assert CMDC.Tool.unknown_tool_message(reg, "list-files") ==
             "Unknown tool: list-files. Did you mean: list_files?"

    assert CMDC.Tool.unknown_tool_message(reg, {:oops}) ==
             "Unknown tool: {:oops} (a tool name is a string)."
  end

  test "fetch/2 and validate/3 on a large registry (suggestions move to a dirty scheduler)" do
    reg = Registry.new()
    modules = CMDC.Tool.Test.Factory.tools(for i <- 1..1_100, do: "tool_#{i}")
    :ok = Registry.register(reg, modules)
    assert Registry.size(reg) == 1_100
    assert {:ok, _} = Registry.fetch(reg, "tool_1100")
    assert {:error, {:not_found, "tool_11000", suggestions}} = Registry.fetch(reg, "tool_11000")
    assert "tool_1100" in suggestions
    assert {:error, {:not_found, "tool_x", [_ | _]}} = CMDC.Tool.validate(reg, "tool_x", %{})

    assert {:error, {:not_found, "tool_x", [_ | _]}} =
             CMDC.Tool.validate_json(reg, "tool_x", "{}")
  end

  describe "CMDC.Tool on a registry" do
    setup do
      reg = Registry.new()
      :ok = Registry.register(reg, [Examples.Echo, Examples.ReadFile])
      %{reg: reg}
    end

    test "find/2 keeps cmdc's answers", %{reg: reg} do
      assert CMDC.Tool.find(reg, "read_file") == {:ok, Examples.ReadFile}
      assert CMDC.Tool.find(reg, "nope") == {:error, :not_found}
      assert CMDC.Tool.find([Examples.Echo], "echo") == {:ok, Examples.Echo}
    end

    test "validate/3 resolves and checks in one call", %{reg: reg} do
      assert CMDC.Tool.validate(reg, "read_file", %{"path" => "a"}) == {:ok, %{"path" => "a"}}

      assert {:error, [%{keyword: "additionalProperties"}]} =
               CMDC.Tool.validate(reg, "read_file", %{"path" => "a", "x" => 1})

      assert {:error, [%{keyword: "json", path: "/path"}]} =
               CMDC.Tool.validate(reg, "read_file", %{"path" => self()})

      assert CMDC.Tool.validate(reg, "readfile", %{}) ==
               {:error, {:not_found, "readfile", ["read_file"]}}

      # Large arguments take the dirty path and give the same answer.
      big = %{"path" => "a", "limit" => 1, "text" => Enum.map(1..10_000, &to_string/1)}

      assert {:error, [%{keyword: "additionalProperties"}]} =
               CMDC.Tool.validate(reg, "read_file", big)

      assert {:ok, _} =
               CMDC.Tool.validate(reg, "echo", %{
                 "text" => "x",
                 "pad" => List.duplicate(1, 10_000)
               })
    end

    test "validate_json/3", %{reg: reg} do
      assert CMDC.Tool.validate_json(reg, "echo", ~s({"text": "hi"})) == {:ok, %{"text" => "hi"}}
      assert {:error, [%{keyword: "json"}]} = CMDC.Tool.validate_json(reg, "echo", ~s({"text": ))
      assert {:error, [%{keyword: "required"}]} = CMDC.Tool.validate_json(reg, "echo", "{}")

      assert {:error, [%{keyword: "json"}]} =
               CMDC.Tool.validate_json(reg, "echo", %{"text" => "x"})

      long = ~s({"text": ") <> String.duplicate("a", 40_000) <> ~s("})
      assert {:ok, %{"text" => _}} = CMDC.Tool.validate_json(reg, "echo", long)
      assert {:error, {:not_found, "ecko", ["echo"]}} = CMDC.Tool.validate_json(reg, "ecko", "{}")
    end
  end

  test "settings" do
    reg = Registry.new()
    :ok = Registry.register(reg, Examples.Echo)
    assert Registry.settings(reg, "echo") == %{}
    :ok = Registry.put_settings(reg, "echo", %{policy: :ask_once, timeout_ms: 5000})
    assert Registry.settings(reg, "echo") == %{policy: :ask_once, timeout_ms: 5000}
    :ok = Registry.put_settings(reg, "echo", %{policy: :auto})
    assert Registry.settings(reg, "echo") == %{policy: :auto}
    :ok = Registry.unregister(reg, "echo")
    :ok = Registry.register(reg, Examples.Echo)
    assert Registry.settings(reg, "echo") == %{}
  end

  test "the default registry is shared and outlives the process that created it" do
    task = Task.async(fn -> Registry.default() end)
    from_task = Task.await(task)
    assert from_task == Registry.default()
    name = "default_probe_#{System.unique_integer([:positive])}"
    module = tool(name)
    :ok = Task.await(Task.async(fn -> Registry.register(Registry.default(), module) end))
    assert Registry.fetch(Registry.default(), name) == {:ok, module}
    assert inspect(Registry.default()) =~ "#CMDC.Tool.Registry<:default"
    :ok = Registry.unregister(Registry.default(), name)
  end

  test "a registry passed to other processes stays alive while they hold it" do
    reg = Registry.new(name: :session)
    :ok = Registry.register(reg, Examples.Echo)
    pid = spawn(fn -> receive(do: ({:get, from, r} -> send(from, Registry.fetch(r, "echo")))) end)
    send(pid, {:get, self(), reg})
    assert_receive {:ok, Examples.Echo}
  end

  test "100 processes registering and finding at once lose nothing" do
    reg = Registry.new()
    per_process = 10

    modules =
      for(p <- 1..100, i <- 1..per_process, do: "p#{p}_t#{i}")
      |> CMDC.Tool.Test.Factory.tools()
      |> Enum.chunk_every(per_process)

    modules
    |> Enum.with_index(1)
    |> Enum.map(fn {mine, p} ->
      Task.async(fn ->
        for {module, i} <- Enum.with_index(mine, 1) do
          :ok = Registry.register(reg, module)
          {:ok, ^module} = CMDC.Tool.find(reg, "p#{p}_t#{i}")
          # Read what others are writing too.
          _ = CMDC.Tool.find(reg, "p#{rem(p, 100) + 1}_t#{i}")
        end

        :done
      end)
    end)
    |> Task.await_many(30_000)

    assert Registry.size(reg) == 100 * per_process
    assert MapSet.new(Registry.list(reg)) == MapSet.new(List.flatten(modules))
  end

  test "concurrent replace: readers see a whole set, never a mix" do
    reg = Registry.new()
    set_a = for i <- 1..50, do: tool("a_#{i}")
    set_b = for i <- 1..50, do: tool("b_#{i}")
    :ok = Registry.replace(reg, set_a)

    writer =
      Task.async(fn ->
        for n <- 1..200,
            do: :ok = Registry.replace(reg, if(rem(n, 2) == 0, do: set_a, else: set_b))
      end)

    readers =
      for _ <- 1..4 do
        Task.async(fn ->
          for _ <- 1..200 do
            list = Registry.list(reg)
            assert list == set_a or list == set_b
          end
        end)
      end

    Task.await_many([writer | readers], 30_000)
  end

  describe "one validator per tool, one call" do
    defmodule Probe do
      @behaviour CMDC.Tool
      def name, do: "probe"
      def description, do: "Counts how often its schema is read."

      def parameters do
        if pid = Process.whereis(:cmdc_schema_probe), do: send(pid, :parameters_read)

        %{
          "type" => "object",
          "properties" => %{"n" => %{"type" => "integer"}, "note" => %{"type" => "string"}},
          "required" => ["n"]
        }
      end

      def execute(args, _ctx), do: {:ok, inspect(args)}
    end

    test "registries and CMDC.Tool.validate/2 share the module's one compiled schema" do
      Process.register(self(), :cmdc_schema_probe)

      on_exit(fn ->
        if Process.whereis(:cmdc_schema_probe), do: Process.unregister(:cmdc_schema_probe)
      end)

      {:ok, _schema} = CMDC.Tool.Schema.for_module(Probe)
      # Compiled by now (here or by an earlier test): nothing reads the schema again.
      receive do
        :parameters_read -> :ok
      after
        0 -> :ok
      end

      for _ <- 1..2, do: :ok = Registry.register(Registry.new(), Probe)
      assert CMDC.Tool.validate(Probe, %{"n" => 1}) == {:ok, %{"n" => 1}}
      assert {:error, [%{keyword: "type"}]} = CMDC.Tool.validate(Probe, %{"n" => "x"})
      assert {:ok, _schema} = CMDC.Tool.Schema.for_module(Probe)
      refute_received :parameters_read
    end

    test "a registry call gives the module, the validated args and the settings at once" do
      reg = Registry.new()
      :ok = Registry.register(reg, Probe)
      :ok = Registry.put_settings(reg, "probe", %{timeout_ms: 1234})

      assert Registry.call(reg, "probe", %{"n" => 2}) ==
               {:ok, {Probe, %{"n" => 2}, %{timeout_ms: 1234}}}

      # Strict mode's null for an absent optional field is dropped in the same call.
      assert Registry.call_json(reg, "probe", ~s({"n": 2, "note": null})) ==
               {:ok, {Probe, %{"n" => 2}, %{timeout_ms: 1234}}}

      assert {:error, [%{path: "/n", keyword: "type"}]} =
               Registry.call(reg, "probe", %{"n" => "2"})

      assert Registry.call(reg, "prob", %{}) == {:error, {:not_found, "prob", ["probe"]}}
    end

    test "the runner on a registry uses the registry's settings and validated args" do
      reg = Registry.new()
      :ok = Registry.register(reg, Probe)
      :ok = Registry.put_settings(reg, "probe", %{policy: :deny})
      ctx = %CMDC.Context{}

      denied = CMDC.Tool.Runner.run(reg, %{id: "1", name: "probe", arguments: %{"n" => 1}}, ctx)
      assert {denied.is_error, denied.reason} == {true, :denied}

      :ok = Registry.put_settings(reg, "probe", %{})
      call = %{id: "2", name: "probe", arguments: ~s({"n": 1, "note": null})}
      assert %{is_error: false, content: ~s(%{"n" => 1})} = CMDC.Tool.Runner.run(reg, call, ctx)

      invalid = CMDC.Tool.Runner.run(reg, %{id: "3", name: "probe", arguments: %{}}, ctx)
      assert {invalid.is_error, invalid.reason} == {true, :invalid}
      assert invalid.content =~ "Accepted parameters: n (integer, required), note (string)."
    end
  end
end
