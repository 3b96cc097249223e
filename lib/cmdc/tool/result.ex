defmodule CMDC.Tool.Result do
  @moduledoc """
  The end of one tool call, ready to go back to a model.

    * `:content` - the text the model reads (`nil` for an effect).
    * `:is_error` - the call failed: unknown tool, invalid arguments, denied, timed out, crashed,
      or the tool returned `{:error, text}`. Map it to the provider's flag
      (Anthropic `is_error`, MCP `isError`).
    * `:structured` - the structured output (a map) of a tool with an output schema, checked
      against it (`CMDC.Tool.Structured`); `:content` then holds the same value as JSON text.
    * `:effect` - the term of an `{:effect, term}` result, passed through untouched.
    * `:abort` - the tool asked to abort the whole turn (`CMDC.Context.abort/2`), with a reason.
    * `:duration_us` - wall time of the call in microseconds.
  """

  defstruct id: nil,
            name: nil,
            content: nil,
            structured: nil,
            is_error: false,
            effect: nil,
            abort: nil,
            reason: nil,
            duration_us: 0

  @type t :: %__MODULE__{
          id: String.t() | nil,
          name: String.t() | nil,
          content: String.t() | nil,
          structured: map() | nil,
          is_error: boolean(),
          effect: term(),
          abort: term(),
          reason: atom() | nil,
          duration_us: non_neg_integer()
        }

  @doc """
  An error result.

      iex> CMDC.Tool.Result.error("nope", :denied).is_error
      true
  """
  def error(text, reason \\ :error),
    do: %__MODULE__{content: text, is_error: true, reason: reason}
end
