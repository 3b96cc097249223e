defmodule CMDC.Tool.MCP.Client.SSE do
  @moduledoc """
  An incremental parser of `text/event-stream` (Server-Sent Events), as Streamable HTTP
  responses carry them: feed it chunks as they arrive, get complete events.

  Each event is `%{event: type, data: text, id: id | nil}` (type `"message"` unless the stream
  says otherwise; `data` lines joined with `\\n`). Comment lines (`:`) and unknown fields are
  ignored; `\\r\\n`, `\\r` and `\\n` all end a line.

      iex> {events, _rest} = CMDC.Tool.MCP.Client.SSE.parse(CMDC.Tool.MCP.Client.SSE.new(),
      ...>   "id: 7\\ndata: {\\"a\\":\\ndata: 1}\\n\\n: keep-alive\\n\\nevent: x\\ndata: tail")
      iex> events
      [%{event: "message", data: "{\\"a\\":\\n1}", id: "7"}]
  """

  defstruct buffer: "", data: [], event: nil, id: nil

  @type t :: %__MODULE__{}
  @type event :: %{event: String.t(), data: String.t(), id: String.t() | nil}

  @doc "A parser with nothing buffered."
  @spec new() :: t()
  def new, do: %__MODULE__{}

  @doc "Feeds a chunk; returns the events it completed and the parser for the next chunk."
  @spec parse(t(), binary()) :: {[event()], t()}
  def parse(%__MODULE__{} = sse, chunk) do
    {lines, rest} = split_lines(sse.buffer <> chunk)
    {events, sse} = Enum.reduce(lines, {[], %{sse | buffer: rest}}, &line/2)
    {Enum.reverse(events), sse}
  end

  @doc """
  The bytes held for events not complete yet (the unfinished line and data lines): what a
  stream that never ends an event makes the parser keep.
  """
  @spec pending_bytes(t()) :: non_neg_integer()
  def pending_bytes(%__MODULE__{buffer: buffer, data: data}),
    do: byte_size(buffer) + Enum.reduce(data, 0, &(byte_size(&1) + &2))

  # A trailing "\r" may be the first half of "\r\n": keep it for the next chunk.
  defp split_lines(text) do
    parts = String.split(text, ~r/\r\n|\r(?!$)|\n/)
    {lines, [rest]} = Enum.split(parts, -1)
    {lines, rest}
  end

  defp line("", {events, %{data: []} = sse}), do: {events, %{sse | event: nil}}

  defp line("", {events, sse}) do
    event = %{
      event: sse.event || "message",
      data: sse.data |> Enum.reverse() |> Enum.join("\n"),
      id: sse.id
    }

    {[event | events], %{sse | data: [], event: nil}}
  end

  defp line(":" <> _comment, acc), do: acc

  defp line(text, {events, sse}) do
    {field, value} =
      case String.split(text, ":", parts: 2) do
        [field, " " <> value] -> {field, value}
        [field, value] -> {field, value}
        [field] -> {field, ""}
      end

    sse =
      case field do
        "data" -> %{sse | data: [value | sse.data]}
        "event" -> %{sse | event: value}
        "id" -> if String.contains?(value, <<0>>), do: sse, else: %{sse | id: value}
        _ -> sse
      end

    {events, sse}
  end
end
