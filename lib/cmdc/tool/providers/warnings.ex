defmodule CMDC.Tool.Providers.Warnings do
  @moduledoc """
  What `CMDC.Tool.to_schema/3` and `to_schema_json/3` do with a conversion's warnings (the
  `warnings:` option):

    * `:log` (default) - each warning is logged at `:warning` once per tool, format and change
      (the first list that has it; the same list built again logs nothing);
    * `:raise` - an `ArgumentError` listing them all (for tests and CI: a schema that changes
      meaning for a provider fails the build);
    * `:ignore` - nothing.

  The process started under `CMDC.Tool.Application` owns the table of what was logged; it
  holds at most #{10_000} entries and starts over when full (a warning may then be logged
  again, never lost).

      iex> CMDC.Tool.Providers.Warnings.report([], :openai, :raise)
      :ok
  """

  use GenServer
  require Logger

  @table __MODULE__
  @max 10_000

  @typedoc "The `warnings:` option."
  @type mode :: :log | :raise | :ignore

  @doc false
  def start_link(_), do: GenServer.start_link(__MODULE__, nil, name: __MODULE__)

  @impl true
  def init(nil) do
    :ets.new(@table, [:set, :public, :named_table, write_concurrency: true])
    {:ok, nil}
  end

  @doc "The `warnings:` option checked: `:log`, `:raise` or `:ignore`, else `ArgumentError`."
  @spec mode!(term()) :: mode()
  def mode!(mode) when mode in [:log, :raise, :ignore], do: mode

  def mode!(other),
    do: raise(ArgumentError, "warnings: expects :log, :raise or :ignore, got #{inspect(other)}")

  @doc """
  Reports the warnings of a list made for `format` as `mode` says: `:ok`, or raises.
  """
  @spec report([CMDC.Tool.Providers.warning()], atom(), mode()) :: :ok
  def report([], _format, _mode), do: :ok
  def report(_warnings, _format, :ignore), do: :ok

  def report(warnings, format, :raise) do
    raise ArgumentError,
          "the #{format} tools list changes what #{length(warnings)} schema part(s) mean:\n" <>
            format(warnings)
  end

  def report(warnings, format, :log) do
    for w <- warnings, new?({w.tool, format, w.path, w.keyword, :erlang.phash2(w.message)}) do
      Logger.warning("cmdc_tool #{format}: #{w.tool}: #{w.message}")
    end

    :ok
  end

  @doc """
  The warnings worth a person's action (what `mix cmdc.tools doctor` reports and
  `CMDC.Tool.Test.schemas!/2` fails on): all but a dropped `additionalProperties: false` — a
  format that cannot say an object is closed (Gemini's declarations) drops it, OpenAI strict
  mode needs it said, and the runner refuses unlisted keys whatever the model was told, so a
  schema cannot avoid one of the two and nothing changes for the tool. `tools` are the modules
  converted.
  """
  @spec notable([CMDC.Tool.Providers.warning()], [module()]) :: [CMDC.Tool.Providers.warning()]
  def notable(warnings, tools) when is_list(tools) do
    Enum.reject(warnings, fn w ->
      w.keyword == "additionalProperties" and w.message =~ " dropped: " and
        closed_at?(tools, w.tool, w.path)
    end)
  end

  # By the modules' own names: this module sits below `CMDC.Tool` (no call back into it).
  defp closed_at?(tools, name, path) do
    with module when module != nil <- Enum.find(tools, &(is_atom(&1) and &1.name() == name)),
         %{} = schema <- at(module.parameters(), path) do
      schema["additionalProperties"] == false
    else
      _ -> false
    end
  end

  defp at(schema, ""), do: schema

  defp at(schema, "/" <> pointer) do
    pointer
    |> String.split("/")
    |> Enum.map(&(&1 |> String.replace("~1", "/") |> String.replace("~0", "~")))
    |> Enum.reduce_while(schema, fn
      key, %{} = map -> {:cont, Map.get(map, key)}
      key, list when is_list(list) -> {:cont, Enum.at(list, String.to_integer(key))}
      _, _ -> {:halt, nil}
    end)
  rescue
    ArgumentError -> nil
  end

  # Without the table (the application not started) every warning is logged.
  defp new?(key) do
    if :ets.info(@table, :size) >= @max, do: :ets.delete_all_objects(@table)
    :ets.insert_new(@table, {key})
  rescue
    ArgumentError -> true
  end

  @doc "Warnings as text, one line each (`CMDC.Tool.Providers.format_warnings/1`)."
  @spec format([map()]) :: String.t()
  def format(warnings), do: Enum.map_join(warnings, "\n", fn w -> "#{w.tool}: #{w.message}" end)
end
