defmodule CMDC.Tool.Providers.Formats do
  @moduledoc """
  The provider formats' table as Elixir reads it: one row per format, from the native table
  (`native/cmdc_tool_core/src/providers/format.rs`), so a format's capabilities are written once
  and every pass (examples, deferral, namespaces, sessions) asks its row, never its name.
  """

  alias CMDC.Tool.Native

  @doc "The format names, in the table's order (`CMDC.Tool.Providers.formats/0`)."
  @spec names() :: [atom()]
  def names, do: Enum.map(rows(), & &1.format)

  @typedoc """
  A format's row of the native table (`format.rs`): what every Elixir pass asks instead of
  naming formats. `envelope` is `:chat_function`, `:typed_flat`, `:flat` or `:declarations`
  (one `functionDeclarations` list); `examples_field` the tool field for examples (`nil`: an
  "Examples:" block in the description); `defer_loading` whether deferred tools stay marked
  (and the provider searches them); `namespaces` whether functions can be grouped.
  """
  @type row :: %{
          format: atom(),
          strict: boolean(),
          envelope: :chat_function | :typed_flat | :flat | :declarations,
          examples_field: String.t() | nil,
          defer_loading: boolean(),
          namespaces: boolean()
        }

  @doc """
  The row of `format`; raises `ArgumentError` for an unknown format.

      iex> CMDC.Tool.Providers.Formats.row(:anthropic).examples_field
      "input_examples"
      iex> CMDC.Tool.Providers.Formats.row(:gemini).envelope
      :declarations
  """
  @spec row(atom()) :: row()
  def row(format) do
    Enum.find(rows(), &(&1.format == format)) ||
      raise ArgumentError,
            "unknown format #{inspect(format)}; expected one of #{inspect(names())}"
  end

  defp rows do
    case :persistent_term.get({__MODULE__, :rows}, nil) do
      nil ->
        rows = Native.providers_formats()
        :persistent_term.put({__MODULE__, :rows}, rows)
        rows

      rows ->
        rows
    end
  end
end
