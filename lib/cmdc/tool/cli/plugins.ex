defmodule CMDC.Tool.CLI.Plugins do
  @moduledoc """
  What `mix cmdc.tools plugins` prints: every Claude Code plugin installed or enabled
  (`CMDC.Tool.Discovery.ClaudePlugins`), its status and which settings file decided it, where
  it lives, what it brings (hooks by event, MCP servers by the name they get, tool paths), then
  each refused plugin's problems and those of the files listing plugins.

      iex> CMDC.Tool.CLI.Plugins.render(%{plugins: [], problems: [], settings: []}, "/home/u")
      "no Claude Code plugins installed (~/.claude/plugins/installed_plugins.json)"
  """

  alias CMDC.Tool.CLI.Output
  alias CMDC.Tool.Discovery.ClaudePlugins

  @doc """
  The listing of a `CMDC.Tool.Discovery.ClaudePlugins.load/1` report as text (paths under
  `home` written `~/…`).
  """
  @spec render(ClaudePlugins.report(), String.t() | nil) :: String.t()
  def render(%{plugins: plugins, problems: problems}, home) do
    rows =
      for p <- plugins do
        [p.id, p.version || "", status(p, home), p.scope || "", tilde(p.root, home), brings(p)]
      end

    refused = for p <- plugins, p.problems != [], do: p

    [
      if(rows == [],
        do: "no Claude Code plugins installed (~/.claude/plugins/installed_plugins.json)",
        else: Output.table(["PLUGIN", "VERSION", "STATUS", "SCOPE", "FOLDER", "BRINGS"], rows)
      ),
      section("plugins refused", refused, &"#{&1.id}: #{Enum.join(&1.problems, "; ")}"),
      section("problems", problems, &"#{tilde(&1.path, home)}: #{&1.reason}")
    ]
    |> Enum.reject(&(&1 == ""))
    |> Enum.join("\n\n")
  end

  defp status(%{status: status, decided_by: nil}, _home), do: to_string(status)

  defp status(%{status: status, decided_by: file}, home),
    do: "#{status} (#{tilde(file, home)})"

  defp tilde(path, home) when path in [nil, ""] or home in [nil, ""], do: path || ""

  defp tilde(path, home) do
    case Path.relative_to(path, home) do
      ^path -> path
      rel -> "~/" <> rel
    end
  end

  defp brings(%{status: status}) when status in [:not_installed, :broken], do: "-"

  defp brings(p) do
    %{hooks: hooks, servers: servers, tools: tools} = ClaudePlugins.brings(p)

    [
      if(hooks != %{},
        do: "hooks: " <> Enum.map_join(Enum.sort(hooks), ", ", fn {e, n} -> "#{e}×#{n}" end)
      ),
      if(servers != [], do: "MCP: " <> Enum.join(servers, ", ")),
      if(tools != [], do: "tools: " <> Enum.join(tools, ", "))
    ]
    |> Enum.reject(&is_nil/1)
    |> case do
      [] -> "nothing this library uses"
      parts -> Enum.join(parts, "; ")
    end
  end

  defp section(_title, [], _fun), do: ""

  defp section(title, items, fun),
    do: "#{title} (#{length(items)}):\n" <> Enum.map_join(items, "\n", &("  - " <> fun.(&1)))
end
