defmodule CMDC.Tool.Runner.Settings do
  @moduledoc """
  A tool's settings as the runner applies them: the tool's own (`tool_options/0`, or a script
  tool's `__tool_settings__/0`) overridden by a registry's per-tool settings (which may come
  from metadata files, with string keys). Permission spellings are normalized by
  `CMDC.Tool.Permissions`; `timeout`/`timeout_ms` become `:timeout_ms`, `exclusive` a boolean.

      iex> CMDC.Tool.Runner.Settings.merge(CMDC.Tool.Examples.Echo, "echo", %{"timeout" => 5})
      %{timeout_ms: 5}
  """

  @doc "The settings of `module` (called `name`) in `tools`: a registry's override its own."
  @spec for_tool(term(), module(), String.t()) :: map()
  def for_tool(tools, module, name) do
    registry =
      case tools do
        %CMDC.Tool.Registry{} -> CMDC.Tool.Registry.settings(tools, name)
        _ -> %{}
      end

    merge(module, name, registry)
  end

  @doc "The module's own settings merged under `registry` (a registry's settings of the tool)."
  @spec merge(module(), String.t(), map()) :: map()
  def merge(module, name, registry) do
    own =
      cond do
        not Code.ensure_loaded?(module) -> %{}
        function_exported?(module, :tool_options, 0) -> Map.new(module.tool_options())
        function_exported?(module, :__tool_settings__, 0) -> module.__tool_settings__()
        true -> %{}
      end

    Map.merge(normalize(own, name), normalize(registry, name))
  end

  defp normalize(settings, name),
    do: Map.merge(plain(settings), CMDC.Tool.Permissions.normalize(settings, name))

  defp plain(settings) do
    Enum.reduce(settings, %{}, fn
      {k, v}, acc when k in ["timeout", "timeout_ms", :timeout] and is_integer(v) ->
        Map.put(acc, :timeout_ms, v)

      {"exclusive", v}, acc ->
        Map.put(acc, :exclusive, v == true)

      # Metadata's OpenAI Responses namespace: kept, so it travels with a wrapper.
      {"namespace", v}, acc when is_binary(v) and v != "" ->
        Map.put(acc, :namespace, v)

      {k, v}, acc when is_atom(k) ->
        Map.put(acc, k, v)

      {_k, _v}, acc ->
        acc
    end)
  end
end
