defmodule CMDC.Tool.MCP.Catalog do
  @moduledoc """
  An MCP server for a large catalog: it lists a core set of tools plus `search_tools`
  (`CMDC.Tool.Search.Tool`, over the registry's native index), and each search adds the tools
  it found to the list, announced with `notifications/tools/list_changed`. MCP clients without
  tool search of their own then see a short list and grow it on demand.

      CMDC.Tool.MCP.Catalog.serve(registry, core: ["read_file", "bash"])

  Options: `:core` (names listed from the start), and every option of
  `CMDC.Tool.MCP.Server.serve/2` (`list_changed` is always on). Found tools stay listed for
  the life of the server. Names not in the registry are ignored.
  """

  alias CMDC.Tool.MCP.Server
  alias CMDC.Tool.Registry
  alias CMDC.Tool.Search.Tool, as: SearchTool

  @doc "Serves the catalog until the client closes the connection (see the module doc)."
  @spec serve(Registry.t(), keyword()) :: :ok
  def serve(%Registry{} = reg, opts \\ []) do
    core = modules(reg, Keyword.get(opts, :core, []))
    initial = Enum.uniq(core ++ [SearchTool])
    {:ok, listed} = Agent.start_link(fn -> initial end)
    server = self()
    on_found = fn names -> add(listed, server, modules(reg, names)) end

    context =
      Keyword.get_lazy(opts, :context, fn ->
        CMDC.Context.new(session_id: "mcp-#{System.unique_integer([:positive])}")
      end)

    context = %{
      context
      | assigns: Map.put(context.assigns, :cmdc_tool_search, %{registry: reg, on_found: on_found})
    }

    try do
      Server.serve(
        initial,
        opts |> Keyword.drop([:core]) |> Keyword.merge(list_changed: true, context: context)
      )
    after
      Agent.stop(listed)
    end
  end

  defp modules(reg, names) do
    for name <- names, {:ok, module} <- [Registry.find(reg, to_string(name))], do: module
  end

  # Called from the search tool's process: the server answers refresh/2 once it lists them.
  defp add(_listed, _server, []), do: :ok

  defp add(listed, server, found) do
    list =
      Agent.get_and_update(listed, fn list ->
        new = Enum.uniq(list ++ found)
        {new, new}
      end)

    Server.refresh(server, list)
  end
end
