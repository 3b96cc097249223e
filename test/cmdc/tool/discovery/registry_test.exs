defmodule CMDC.Tool.DiscoveryRegistryTest do
  # Discovery, the native registry and the runner together, on a real folder.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Discovery, Registry, Runner}

  @moduletag :tmp_dir

  defp tool_source(mod, name) do
    """
    defmodule #{mod} do
      @behaviour CMDC.Tool
      def name, do: "#{name}"
      def description, do: "Say #{name}."
      def parameters, do: %{"type" => "object"}
      def execute(_, _), do: {:ok, "#{name}"}
    end
    """
  end

  test "load_into, metadata settings for the runner, refresh after add and delete", %{
    tmp_dir: dir
  } do
    suffix = System.unique_integer([:positive])
    tools = Path.join(dir, "tools")
    File.mkdir_p!(tools)
    File.write!(Path.join(tools, "hello.ex"), tool_source("DiscReg.Hello#{suffix}", "hello"))

    File.write!(
      Path.join(tools, "hello.json"),
      ~s({"timeout": 1234, "settings": {"policy": "deny"}})
    )

    reg = Registry.new()
    :ok = Registry.register(reg, [CMDC.Tool.Examples.Echo])
    {:ok, state} = Discovery.load_into(reg, cwd: dir, home: dir, paths: ["tools"])
    assert reg |> Registry.list() |> Enum.map(& &1.name()) |> Enum.sort() == ["echo", "hello"]

    {:ok, hello} = CMDC.Tool.find(reg, "hello")
    assert %{timeout_ms: 1234, policy: :deny} = Runner.settings(reg, hello, "hello")

    assert %{reason: :denied} =
             Runner.run(reg, %{id: "1", name: "hello", arguments: %{}}, CMDC.Context.new())

    File.write!(Path.join(tools, "bye.ex"), tool_source("DiscReg.Bye#{suffix}", "bye"))
    {:ok, state} = Discovery.refresh(reg, state)
    assert state.changes.added == ["bye"]

    assert %{content: "bye"} =
             Runner.run(reg, %{id: "2", name: "bye", arguments: %{}}, CMDC.Context.new())

    File.rm!(Path.join(tools, "hello.ex"))
    {:ok, _state} = Discovery.refresh(reg, state)
    assert reg |> Registry.list() |> Enum.map(& &1.name()) |> Enum.sort() == ["bye", "echo"]
  end
end
