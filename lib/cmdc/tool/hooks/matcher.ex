defmodule CMDC.Tool.Hooks.Matcher do
  @moduledoc """
  Claude Code's matcher rule for hook groups, the one matcher of Elixir hooks (`match:`) and
  command hooks (`"matcher"`): empty, missing or `*` matches everything; a string of only
  letters, digits, `_`, `-`, `,`, `|` and spaces is an exact name or a list of names (split on
  `|` and `,`); anything else is an unanchored, case-sensitive regular expression.

  Regular expressions run on the native engine tool search uses (`native/cmdc_tool_core/src/
  matcher.rs`, the `regex` crate): finite automata, so a match takes time linear in the name
  whatever the pattern (`(a|aa)*b|delete` against `aaaa…_delete` matches at once, where a
  backtracking engine gives up and answers "no match"). They are compiled when the hook is read.
  What JavaScript (Claude Code) accepts and this engine cannot run, back-references and
  look-around, is an error naming the construct: `parse/1` answers `{:error, message}`, and a
  settings file's hook keeps its place with an `{:invalid, text, message}` matcher, reported by
  `mix cmdc.tools hooks` and `doctor` and failing as its hook's failure mode says whenever it
  would be asked (`CMDC.Tool.Hooks.Failure`): never a silent non-match.

      iex> {:ok, m} = CMDC.Tool.Hooks.Matcher.parse("Edit|Write")
      iex> {CMDC.Tool.Hooks.Matcher.match(m, ["Write"]), CMDC.Tool.Hooks.Matcher.match(m, ["WriteX"])}
      {{:ok, true}, {:ok, false}}
      iex> {:ok, m} = CMDC.Tool.Hooks.Matcher.parse("mcp__memory__.*")
      iex> CMDC.Tool.Hooks.Matcher.match(m, ["memory__create", "mcp__memory__create"])
      {:ok, true}
      iex> {:error, message} = CMDC.Tool.Hooks.Matcher.parse("read_(file")
      iex> message
      ~s(the matcher "read_(file" is not a valid regular expression: unclosed group)
      iex> {:error, message} = CMDC.Tool.Hooks.Matcher.parse("^(?!Bash).*")
      iex> message =~ "look-around"
      true
  """

  alias CMDC.Tool.Native
  require Native

  @type t ::
          :all
          | {:names, [String.t()]}
          | {:regex, reference(), String.t()}
          | {:invalid, String.t(), String.t()}

  @doc "Parses a matcher: `{:ok, matcher}` or `{:error, message}`."
  @spec parse(term()) :: {:ok, t()} | {:error, String.t()}
  def parse(nil), do: {:ok, :all}

  def parse(text) when is_binary(text) do
    trimmed = String.trim(text)

    cond do
      trimmed in ["", "*"] ->
        {:ok, :all}

      names?(trimmed) ->
        names = trimmed |> String.split(["|", ","]) |> Enum.map(&String.trim/1)
        {:ok, {:names, Enum.reject(names, &(&1 == ""))}}

      true ->
        case Native.matcher_compile(text) do
          {:ok, compiled} -> {:ok, {:regex, compiled, text}}
          {:error, message} -> {:error, message}
        end
    end
  end

  def parse(other), do: {:error, "the matcher must be a string (got #{inspect(other)})"}

  @doc """
  `parse/1` for a settings file: a matcher that cannot be run is kept as
  `{:invalid, text, message}` beside the message, so its hook is listed and fails when asked.
  """
  @spec parse_kept(term()) :: {:ok, t()} | {:error, t(), String.t()}
  def parse_kept(text) do
    case parse(text) do
      {:ok, matcher} -> {:ok, matcher}
      {:error, message} -> {:error, {:invalid, source_text(text), message}, message}
    end
  end

  defp names?(<<c, rest::binary>>)
       when c in ?a..?z or c in ?A..?Z or c in ?0..?9 or c in [?_, ?-, ?,, ?|, ?\s],
       do: names?(rest)

  defp names?(<<>>), do: true
  defp names?(_), do: false

  defp source_text(text) when is_binary(text), do: text
  defp source_text(other), do: inspect(other)

  @doc """
  Whether the matcher matches any of `names` (a tool's names, or a session event's source):
  `{:ok, boolean}`, or `{:error, message}` for a matcher that cannot be run. Never an error
  turned into `false`.
  """
  @spec match(t(), [String.t()]) :: {:ok, boolean()} | {:error, String.t()}
  def match(:all, _names), do: {:ok, true}
  def match({:names, list}, names), do: {:ok, Enum.any?(names, &(&1 in list))}
  def match({:invalid, _text, message}, _names), do: {:error, message}

  def match({:regex, compiled, text}, names) do
    case Native.with_dirty(matcher_match(compiled, names)) do
      {:ok, matched} -> {:ok, matched}
      {:error, message} -> {:error, "the matcher #{inspect(text)} failed: #{inspect(message)}"}
    end
  end

  @doc "The matcher as it was written (`*` for everything)."
  @spec source(t()) :: String.t()
  def source(:all), do: "*"
  def source({:names, list}), do: Enum.join(list, "|")
  def source({:regex, _, text}), do: text
  def source({:invalid, text, _}), do: text
end
