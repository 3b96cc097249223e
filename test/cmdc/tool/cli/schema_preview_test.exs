defmodule CMDC.Tool.CLI.SchemaPreviewTest do
  # `mix cmdc.tools schema --format mcp` previews exactly what an MCP client's `tools/list`
  # gets from bin/cmdc-mcp (issue 40, item 2): the official Python SDK in both eras.
  use ExUnit.Case, async: true

  import ExUnit.CaptureIO

  alias CMDC.Tool.JSON

  @moduletag timeout: 600_000
  @root Path.expand("../../../..", __DIR__)

  setup do
    dir = Path.join(System.tmp_dir!(), "cmdc_preview_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf(dir) end)

    File.write!(Path.join(dir, "weather.ex"), ~S'''
    defmodule SchemaPreview.Weather do
      @behaviour CMDC.Tool
      def name, do: "preview_weather"
      def description, do: "Current weather for a city."
      def parameters do
        %{"type" => "object", "properties" => %{"city" => %{"type" => "string"}},
          "required" => ["city"], "additionalProperties" => false}
      end
      def examples, do: [%{"city" => "Paris"}, %{"city" => "Oslo"}]
      def execute(%{"city" => city}, _ctx), do: {:ok, city <> ": sunny"}
    end
    ''')

    %{dir: dir}
  end

  test "schema --format mcp is what tools/list sends, legacy and 2026-07-28", %{dir: dir} do
    preview =
      capture_io(fn -> CMDC.Tool.CLI.Commands.schema([dir], format: "mcp") end) |> JSON.decode!()

    assert [%{"name" => "preview_weather", "description" => description}] = preview
    assert description =~ ~s(Examples:\n{"city":"Paris"}\n{"city":"Oslo"})

    {:ok, python} = CMDC.Tool.PythonEnv.python()
    client = Path.join(@root, "test/support/mcp_list_client.py")
    server = Path.join(@root, "bin/cmdc-mcp")

    for mode <- ["legacy", "2026-07-28"] do
      {out, status} = System.cmd(python, [client, mode, server, dir], env: [{"MIX_ENV", "test"}])

      assert status == 0, out
      report = out |> String.split("\n", trim: true) |> List.last() |> JSON.decode!()
      assert report["protocol_version"] =~ if(mode == "legacy", do: "20", else: mode)

      listed =
        for tool <- report["tools"], do: Map.take(tool, ["name", "description", "inputSchema"])

      assert listed == Enum.map(preview, &Map.take(&1, ["name", "description", "inputSchema"])),
             "#{mode}: tools/list differs from the preview"
    end
  end
end
