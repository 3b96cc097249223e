defmodule CMDC.Tool.Options do
  @moduledoc """
  Checks the options of the library's public functions, the way Req and NimbleOptions users
  expect: an unknown or misspelled key raises `ArgumentError` naming the function, the key, the
  closest known key ("did you mean") and every key the function accepts. A silently ignored
  `timout: 1` would run a call without a time-out; a raise shows the typo at once.

      iex> CMDC.Tool.Options.check!([timeout: 5], [:timeout, :approver], "Runner.run/4")
      [timeout: 5]

      iex> CMDC.Tool.Options.check!([timout: 5], [:timeout, :approver], "Runner.run/4")
      ** (ArgumentError) Runner.run/4: unknown option :timout (did you mean :timeout?); accepted options: :approver, :timeout

  ## Errors

  `check!/3` raises `ArgumentError` (the caller's bug, like `Keyword.validate!/2`); `suggest/2`
  never fails.
  """

  @doc """
  Returns `opts` when it is a keyword list (or a map with atom keys) whose keys are all in
  `allowed`; raises `ArgumentError` otherwise. `function` names the caller in the message.
  """
  @spec check!(keyword() | map(), [atom()], String.t()) :: keyword() | map()
  def check!(opts, allowed, function) when is_list(opts) do
    unless Keyword.keyword?(opts) do
      raise ArgumentError,
            "#{function}: options must be a keyword list (like [timeout: 5_000]), got: " <>
              inspect(opts)
    end

    reject_unknown(Keyword.keys(opts), allowed, function)
    opts
  end

  def check!(%{} = opts, allowed, function) do
    reject_unknown(Map.keys(opts), allowed, function)
    opts
  end

  def check!(opts, _allowed, function) do
    raise ArgumentError,
          "#{function}: options must be a keyword list (like [timeout: 5_000]), got: " <>
            inspect(opts)
  end

  defp reject_unknown(keys, allowed, function) do
    case Enum.reject(keys, &(&1 in allowed)) do
      [] ->
        :ok

      [key | _] ->
        hint =
          case suggest(key, allowed) do
            [] -> ""
            [best | _] -> " (did you mean #{inspect(best)}?)"
          end

        accepted = allowed |> Enum.sort() |> Enum.map_join(", ", &inspect/1)

        raise ArgumentError,
              "#{function}: unknown option #{inspect(key)}#{hint}; accepted options: #{accepted}"
    end
  end

  @doc """
  The candidates close to `given` (atoms or strings), closest first, as Mix does for task
  names: a Jaro distance of at least 0.8, or one contains the other.

      iex> CMDC.Tool.Options.suggest("lsit", ["list", "schema", "call"])
      ["list"]

      iex> CMDC.Tool.Options.suggest(:fromat, [:format, :strict])
      [:format]
  """
  @spec suggest(atom() | String.t(), [atom() | String.t()]) :: [atom() | String.t()]
  def suggest(given, candidates) do
    given = to_string(given)

    candidates
    |> Enum.map(&{&1, String.jaro_distance(given, to_string(&1))})
    |> Enum.filter(fn {c, d} ->
      c = to_string(c)

      d >= 0.8 or
        (byte_size(given) >= 3 and (String.contains?(c, given) or String.contains?(given, c)))
    end)
    |> Enum.sort_by(fn {_, d} -> -d end)
    |> Enum.map(&elem(&1, 0))
  end

  @doc """
  The message for a command-line switch `OptionParser` could not take (given as `{switch, nil}`
  in its invalid list) with the `switches` it was parsing: a known switch that takes a value
  was given none (`--timeout needs a value`), else an unknown one, with "did you mean".

      iex> CMDC.Tool.Options.switch_error("--timeout", timeout: :integer, yes: :boolean)
      "--timeout needs a value (an integer)"
      iex> CMDC.Tool.Options.switch_error("--yse", timeout: :integer, yes: :boolean)
      "unknown option --yse (did you mean --yes?)"
  """
  @spec switch_error(String.t(), keyword()) :: String.t()
  def switch_error(switch, switches) do
    known =
      Map.new(switches, fn {name, type} ->
        {"--" <> String.replace(to_string(name), "_", "-"), type}
      end)

    case Map.fetch(known, switch) do
      {:ok, type} when type not in [:boolean, :count] ->
        "#{switch} needs a value#{kind(type)}"

      _ ->
        hint =
          case suggest(switch, Map.keys(known)) do
            [best | _] -> " (did you mean #{best}?)"
            [] -> ""
          end

        "unknown option #{switch}#{hint}"
    end
  end

  defp kind(type) do
    case List.wrap(type) |> Enum.find(&(&1 in [:integer, :float, :string])) do
      :integer -> " (an integer)"
      :float -> " (a number)"
      _ -> ""
    end
  end
end
