defmodule CMDC.Tool.Hooks.Listing do
  @moduledoc """
  What `mix cmdc.tools hooks` prints: every command hook of the settings files and enabled
  Claude Code plugins (event and whether it runs in the background, matcher and `if`
  condition, command, time-out, what its failure does, file or plugin, active or why not),
  then the files read and the problems found (a matcher that cannot be run is one: its hook
  fails on every call).

      iex> CMDC.Tool.Hooks.Listing.render(%CMDC.Tool.Hooks.Config{}, "/tmp")
      "no command hooks configured"
  """

  alias CMDC.Tool.Hooks.{Config, Failure, Matcher}

  @doc "The listing of a `CMDC.Tool.Hooks.Config` as text (paths relative to `cwd`)."
  @spec render(Config.t(), String.t()) :: String.t()
  def render(%Config{} = config, cwd) do
    rows =
      for hook <- config.hooks do
        [
          hook.event_name <> async(hook),
          Matcher.source(hook.matcher) <>
            if(hook.condition, do: " if " <> hook.condition.source, else: ""),
          hook.command,
          "#{div(hook.timeout_ms, 1000)}s",
          if(Failure.closed?(hook), do: "deny", else: "continue"),
          if(hook.plugin, do: "plugin #{hook.plugin}", else: relative(hook.source, cwd)),
          active(hook)
        ]
      end

    [
      if(rows == [],
        do: "no command hooks configured",
        else:
          table(["EVENT", "MATCHER", "COMMAND", "TIMEOUT", "ON FAILURE", "FILE", "ACTIVE"], rows)
      ),
      section("settings files", config.files, fn
        %{source: :plugin} = f ->
          "#{relative(f.path, cwd)} (plugin #{f.plugin})"

        f ->
          "#{relative(f.path, cwd)} (#{f.source}#{if f.active, do: "", else: ", inactive: the project is not trusted; pass --trust or list it in ~/.cmdc/trusted.json"})"
      end),
      section("problems", config.errors, fn e ->
        "#{relative(e.path, cwd)}#{if e.hook, do: " " <> e.hook}: #{e.reason}"
      end)
    ]
    |> Enum.reject(&(&1 == ""))
    |> Enum.join("\n\n")
  end

  defp active(%{active: false}), do: "no (project not trusted)"
  defp active(%{matcher: {:invalid, _, _}}), do: "fails (matcher cannot be run, see problems)"
  defp active(_hook), do: "yes"
  defp async(%{async: :async}), do: " (async)"
  defp async(%{async: :rewake}), do: " (asyncRewake)"
  defp async(_), do: ""

  defp section(_title, [], _fun), do: ""

  defp section(title, items, fun),
    do: "#{title} (#{length(items)}):\n" <> Enum.map_join(items, "\n", &("  - " <> fun.(&1)))

  defp relative(path, cwd), do: Path.relative_to(path, cwd)

  defp table(header, rows) do
    widths =
      Enum.reduce([header | rows], List.duplicate(0, length(header)), fn row, acc ->
        Enum.zip_with(row, acc, &max(String.length(&1), &2))
      end)

    Enum.map_join([header | rows], "\n", fn row ->
      row
      |> Enum.zip(widths)
      |> Enum.map_join("  ", fn {cell, w} -> String.pad_trailing(cell, w) end)
      |> String.trim_trailing()
    end)
  end
end
