defmodule CMDC.Tool.Permissions do
  @moduledoc """
  Tool settings held in Elixir (registry settings, metadata files, `tool_options/0`) read by the
  one permission normalizer of the native core, so every spelling means what it means for
  script tools (the table is in `docs/PERMISSIONS.md`).

  Settings that disagree resolve to the stricter; an unknown value means the strictest
  (`:ask_always` / `:always`) and logs a warning naming the tool and the setting.

      iex> CMDC.Tool.Permissions.normalize(%{"permissionLevel" => "sensitive", "requireResultApproval" => true}, "rm")
      %{policy: :ask_always, result_approval: :always}

      iex> CMDC.Tool.Permissions.normalize(%{policy: :auto, timeout_ms: 5000}, "echo")
      %{policy: :auto}
  """

  require Logger

  @policies %{
    "auto" => :auto,
    "ask-once" => :ask_once,
    "ask-always" => :ask_always,
    "deny" => :deny
  }
  @results %{"never" => :never, "on-error" => :on_error, "always" => :always}

  @doc """
  The `:policy` and `:result_approval` a settings map gives (only those it sets), whatever its
  spellings. `tool` names the tool in warnings.
  """
  @spec normalize(map(), String.t()) :: %{
          optional(:policy) => :auto | :ask_once | :ask_always | :deny,
          optional(:result_approval) => :never | :on_error | :always
        }
  def normalize(settings, tool) when is_map(settings) do
    raw = for {k, v} <- settings, v = plain(v), v != :skip, into: %{}, do: {to_string(k), v}

    if raw == %{} do
      %{}
    else
      {policy, result, warnings} =
        CMDC.Tool.Native.permissions_resolve(CMDC.Tool.JSON.encode!(raw), "settings of #{tool}")

      Enum.each(warnings, &Logger.warning("cmdc_tool: " <> &1))

      %{}
      |> put(:policy, policy && Map.fetch!(@policies, policy))
      |> put(:result_approval, result && Map.fetch!(@results, result))
    end
  end

  defp put(map, _key, nil), do: map
  defp put(map, key, value), do: Map.put(map, key, value)

  # Only what a setting can be; the normalizer ignores keys that are not permission settings.
  defp plain(v) when is_boolean(v) or is_nil(v), do: v
  defp plain(v) when is_atom(v), do: Atom.to_string(v)
  defp plain(v) when is_binary(v) or is_number(v), do: v

  defp plain(v) when is_map(v) and not is_struct(v),
    do: for({k, x} <- v, x = plain(x), x != :skip, into: %{}, do: {to_string(k), x})

  defp plain(_), do: :skip
end
