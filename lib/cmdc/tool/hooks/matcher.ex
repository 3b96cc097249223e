defmodule CMDC.Tool.Hooks.Matcher do
  @moduledoc """
  Claude Code's matcher rule for hook groups: empty, missing or `*` matches everything; a string
  of only letters, digits, `_`, `-`, `,`, `|` and spaces is an exact name or a list of names
  (split on `|` and `,`); anything else is an unanchored regular expression.

      iex> {:ok, m} = CMDC.Tool.Hooks.Matcher.parse("Edit|Write")
      iex> {CMDC.Tool.Hooks.Matcher.match?(m, ["Write"]), CMDC.Tool.Hooks.Matcher.match?(m, ["WriteX"])}
      {true, false}
      iex> {:ok, m} = CMDC.Tool.Hooks.Matcher.parse("mcp__memory__.*")
      iex> CMDC.Tool.Hooks.Matcher.match?(m, ["memory__create", "mcp__memory__create"])
      true
      iex> CMDC.Tool.Hooks.Matcher.parse("read_(file")
      {:error, "the matcher \\"read_(file\\" is not a valid regular expression: missing ) at position 10"}
  """

  @type t :: :all | {:names, [String.t()]} | {:regex, Regex.t(), String.t()}

  @doc "Parses a matcher: `{:ok, matcher}` or `{:error, message}`."
  @spec parse(term()) :: {:ok, t()} | {:error, String.t()}
  def parse(nil), do: {:ok, :all}

  def parse(text) when is_binary(text) do
    trimmed = String.trim(text)

    cond do
      trimmed in ["", "*"] ->
        {:ok, :all}

      trimmed =~ ~r/^[A-Za-z0-9_\-,| ]+$/ ->
        names = trimmed |> String.split(["|", ","]) |> Enum.map(&String.trim/1)
        {:ok, {:names, Enum.reject(names, &(&1 == ""))}}

      true ->
        case Regex.compile(text) do
          {:ok, regex} ->
            {:ok, {:regex, regex, text}}

          {:error, {why, at}} ->
            {:error,
             "the matcher #{inspect(text)} is not a valid regular expression: #{why} at position #{at}"}
        end
    end
  end

  def parse(other), do: {:error, "the matcher must be a string (got #{inspect(other)})"}

  @doc "Whether the matcher matches any of `names` (a tool's names, or a session event's source)."
  @spec match?(t(), [String.t()]) :: boolean()
  def match?(:all, _names), do: true
  def match?({:names, list}, names), do: Enum.any?(names, &(&1 in list))
  def match?({:regex, regex, _}, names), do: Enum.any?(names, &Regex.match?(regex, &1))

  @doc "The matcher as it was written (`*` for everything)."
  @spec source(t()) :: String.t()
  def source(:all), do: "*"
  def source({:names, list}), do: Enum.join(list, "|")
  def source({:regex, _, text}), do: text
end
