defmodule CMDC.Tool.Result do
  @moduledoc """
  The end of one tool call, ready to go back to a model.

    * `:content` - the text the model reads (`nil` for an effect).
    * `:is_error` - the call failed: unknown tool, invalid arguments, denied, timed out, crashed,
      or the tool returned `{:error, text}`. Map it to the provider's flag
      (Anthropic `is_error`, MCP `isError`).
    * `:structured` - the structured output (a map) of a tool with an output schema, checked
      against it (`CMDC.Tool.Structured`); `:content` then holds the same value as JSON text.
    * `:reason` - with `is_error`, how the call failed, as an atom: `:unknown_tool`,
      `:invalid`, `:denied`, `:timeout`, `:cancelled`, `:crashed`, `:invalid_output`,
      `:withheld`, `:aborted`, `:node_down` (`CMDC.Tool.Cluster`), `:blocked` (a hook blocked
      the result, `CMDC.Tool.Hooks`), `:tool_error` (the tool returned `{:error, text}`), or
      `:error` (`error/2`'s default); `nil` otherwise.
    * `:effect` - the term of an `{:effect, term}` result, passed through untouched.
    * `:abort` - the tool asked to abort the whole turn (`CMDC.Context.abort/2`), with a reason.
    * `:duration_us` - wall time of the call in microseconds.
    * `:notes` - messages for the user, not the model: hooks' `systemMessage`s and their
      non-blocking errors (`CMDC.Tool.Hooks`).
  """

  @replacement "\uFFFD"

  defstruct id: nil,
            name: nil,
            content: nil,
            structured: nil,
            is_error: false,
            effect: nil,
            abort: nil,
            reason: nil,
            duration_us: 0,
            notes: []

  @type t :: %__MODULE__{
          id: String.t() | nil,
          name: String.t() | nil,
          content: String.t() | nil,
          structured: map() | nil,
          is_error: boolean(),
          effect: term(),
          abort: term(),
          reason: atom() | nil,
          duration_us: non_neg_integer(),
          notes: [String.t()]
        }

  @doc """
  An error result.

      iex> CMDC.Tool.Result.error("nope", :denied).is_error
      true
  """
  def error(text, reason \\ :error),
    do: %__MODULE__{content: text, is_error: true, reason: reason}

  @doc """
  Makes a result's text fit for a model (see `fit_text/2`); other results are unchanged.

      iex> CMDC.Tool.Result.fit(%CMDC.Tool.Result{content: "hé"}, 100).content
      "hé"
  """
  @spec fit(t(), non_neg_integer()) :: t()
  def fit(%__MODULE__{content: text} = result, max) when is_binary(text),
    do: %{result | content: fit_text(text, max)}

  def fit(%__MODULE__{} = result, _max), do: result

  @doc """
  The text a model gets: valid UTF-8, at most `max` bytes of `text` (cut on a character
  boundary), each invalid byte replaced by U+FFFD, with a note at the end saying what was cut
  or replaced. Linear in `max` (only the kept prefix is read), so any output comes back at once.

      iex> CMDC.Tool.Result.fit_text("héllo", 3)
      "hé\\n…[output truncated: 3 more bytes]"
      iex> CMDC.Tool.Result.fit_text(<<"a", 0xFF, "b">>, 100)
      "a\\uFFFDb\\n…[1 invalid UTF-8 byte replaced with U+FFFD]"
  """
  @spec fit_text(binary(), non_neg_integer()) :: String.t()
  def fit_text(text, max) when is_binary(text) and is_integer(max) and max >= 0 do
    kept = if byte_size(text) > max, do: binary_part(text, 0, boundary(text, max)), else: text
    {clean, replaced} = to_utf8(kept, [], 0)
    clean <> replaced_note(replaced) <> truncated_note(byte_size(text) - byte_size(kept))
  end

  # Where to cut at `max`: before the character the byte at `max` continues (UTF-8 continuation
  # bytes are 0b10xxxxxx; a character's lead byte is at most 3 bytes back), so no character is
  # split. Invalid text (no lead byte in reach) is cut at `max`.
  defp boundary(text, max), do: boundary(text, max, max, 4)

  defp boundary(_text, _max, 0, _), do: 0
  defp boundary(_text, max, _at, 0), do: max

  defp boundary(text, max, at, left) do
    case :binary.at(text, at) do
      byte when byte in 0x80..0xBF -> boundary(text, max, at - 1, left - 1)
      _ -> at
    end
  end

  # One pass. The VM's converter is fast on valid text and stops at each invalid byte, which
  # becomes U+FFFD; each stop costs a call, so after @switch_after stops (text that is mostly
  # invalid) the rest is walked byte by byte instead, which is cheaper per invalid byte.
  @switch_after 64

  defp to_utf8(bin, acc, n) when n >= @switch_after, do: walk(bin, bin, 0, acc, n)

  defp to_utf8(bin, acc, n) do
    case :unicode.characters_to_binary(bin) do
      good when is_binary(good) and acc == [] ->
        {good, n}

      good when is_binary(good) ->
        {IO.iodata_to_binary(Enum.reverse([good | acc])), n}

      {:error, good, <<_bad, rest::binary>>} ->
        to_utf8(rest, [@replacement, good | acc], n + 1)

      {:incomplete, good, rest} ->
        to_utf8(
          <<>>,
          [:binary.copy(@replacement, byte_size(rest)), good | acc],
          n + byte_size(rest)
        )
    end
  end

  # `start`: where the current run of valid characters began in `bin`.
  defp walk(<<_::utf8, rest::binary>>, bin, start, acc, n), do: walk(rest, bin, start, acc, n)

  defp walk(<<_bad, rest::binary>>, bin, start, acc, n) do
    at = byte_size(bin) - byte_size(rest) - 1
    walk(rest, bin, at + 1, [@replacement, binary_part(bin, start, at - start) | acc], n + 1)
  end

  defp walk(<<>>, bin, start, acc, n) do
    tail = binary_part(bin, start, byte_size(bin) - start)
    {IO.iodata_to_binary(Enum.reverse([tail | acc])), n}
  end

  defp replaced_note(0), do: ""
  defp replaced_note(1), do: "\n…[1 invalid UTF-8 byte replaced with U+FFFD]"
  defp replaced_note(n), do: "\n…[#{n} invalid UTF-8 bytes replaced with U+FFFD]"

  defp truncated_note(0), do: ""
  defp truncated_note(n), do: "\n…[output truncated: #{n} more bytes]"
end
