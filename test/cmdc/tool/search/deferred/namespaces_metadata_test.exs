defmodule CMDC.Tool.Deferred.NamespacesMetadataTest do
  # A discovered tool's metadata namespace (`"namespace"` in its .json, `namespace:` in its .md
  # front matter) groups it in OpenAI Responses lists whether the tools come as a registry
  # filled by load_into/2 or as the plain module list discover/1 returns, and files it under
  # that namespace in the search index; a namespaced call runs it both ways.
  # Compiling tool files loads modules into the VM: run alone.
  use ExUnit.Case, async: false

  alias CMDC.Tool.{Discovery, Registry, Runner}

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_ns_meta_#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(root) end)
    # Unique modules and sources per run (modules are global; the compile cache keys sources).
    p = "NsMeta#{System.unique_integer([:positive])}R#{:rand.uniform(1_000_000_000)}"
    tools = Path.join(root, "tools")
    write(tools, "orders.ex", tool("#{p}.Orders", "list_open_orders", "List open orders."))
    write(tools, "orders.json", ~s({"namespace": "crm"}))
    write(tools, "read.ex", tool("#{p}.Read", "read_text", "Read a text file."))
    write(tools, "read.md", "---\ntitle: Read text\nnamespace: files\n---\nRead a text file.\n")
    write(tools, "plain.ex", tool("#{p}.Plain", "plain_tool", "A tool without a namespace."))

    opts = [paths: [tools], sources: [:explicit], home: root, cwd: root, cmdc_home: nil]
    %{opts: opts}
  end

  defp write(dir, rel, text) do
    File.mkdir_p!(dir)
    File.write!(Path.join(dir, rel), text)
  end

  defp tool(module, name, description) do
    """
    defmodule #{module} do
      @behaviour CMDC.Tool
      def name, do: #{inspect(name)}
      def description, do: #{inspect(description)}
      def parameters, do: %{"type" => "object", "properties" => %{"x" => %{"type" => "string"}}}
      def execute(_args, _ctx), do: {:ok, #{inspect(name)}}
    end
    """
  end

  # `namespace name => function names` and the top-level function names of a Responses list.
  defp grouping(tools) do
    for t <- tools, reduce: %{} do
      acc ->
        case t do
          %{"type" => "namespace", "name" => ns, "tools" => fs} ->
            Map.put(acc, ns, Enum.map(fs, & &1["name"]))

          %{"type" => "function", "name" => name} ->
            Map.update(acc, :top, [name], &(&1 ++ [name]))
        end
    end
  end

  @want %{"crm" => ["list_open_orders"], "files" => ["read_text"], :top => ["plain_tool"]}

  test "a plain module list groups by the metadata's namespace", %{opts: opts} do
    report = Discovery.discover(opts)
    assert report.errors == []
    modules = Enum.map(report.tools, & &1.module)

    tools = CMDC.Tool.to_schema(modules, %{}, format: :openai_responses, namespaces: true)
    assert grouping(tools) == @want

    # The call the model sends back runs the tool through the runner over the same list.
    call = %{id: "c1", name: "list_open_orders", namespace: "crm", arguments: %{"x" => "1"}}
    result = Runner.run(modules, call, %CMDC.Context{})

    assert {result.content, result.name, result.is_error} ==
             {"list_open_orders", "list_open_orders", false}
  end

  test "a registry filled by load_into/2 groups and searches by it", %{opts: opts} do
    reg = Registry.new()
    {:ok, _state} = Discovery.load_into(reg, opts)

    tools = CMDC.Tool.to_schema(reg, %{}, format: :openai_responses, namespaces: true)
    assert grouping(tools) == @want

    assert {:ok, [{"list_open_orders", _} | _]} =
             Registry.search(reg, "open orders", namespace: "crm")

    assert {:ok, []} = Registry.search(reg, "open orders", namespace: "files")
    assert {:ok, [{"read_text", _}]} = Registry.search(reg, "read text", namespace: "files")

    call = %{id: "c2", name: "read_text", namespace: "files", arguments: %{}}
    assert Runner.run(reg, call, %CMDC.Context{}).content == "read_text"
  end
end
