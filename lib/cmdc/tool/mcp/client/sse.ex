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

  # `data`: the event's data lines so far as one binary (nil before the first), appended in
  # place: a list of lines cost a sum per chunk and ~50 bytes of heap per line, so an event of
  # millions of one-byte lines held many times its size.
  defstruct buffer: "", data: nil, event: nil, id: nil

  @type t :: %__MODULE__{}
  @type event :: %{event: String.t(), data: String.t(), id: String.t() | nil}

  @doc "A parser with nothing buffered."
  @spec new() :: t()
  def new, do: %__MODULE__{}

  @doc "Feeds a chunk; returns the events it completed and the parser for the next chunk."
  @spec parse(t(), binary()) :: {[event()], t()}
  def parse(%__MODULE__{} = sse, chunk) do
    # A chunk without a line break ends no line: append it (the runtime appends in place), so
    # one endless line costs its length, not its square.
    if :binary.match(chunk, ["\n", "\r"]) == :nomatch,
      do: {[], %{sse | buffer: sse.buffer <> chunk}},
      else: parse_lines(sse, chunk)
  end

  defp parse_lines(sse, chunk) do
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
    do: byte_size(buffer) + if(data, do: byte_size(data), else: 0)

  # A trailing "\r" may be the first half of "\r\n": keep it for the next chunk. `:binary.split`
  # takes the longest pattern where several match (so "\r\n" is one line end); a regex split
  # took 44 ms for a 64 kB chunk of short lines.
  defp split_lines(text) do
    {text, held} =
      if String.ends_with?(text, "\r"),
        do: {binary_part(text, 0, byte_size(text) - 1), "\r"},
        else: {text, ""}

    parts = :binary.split(text, ["\r\n", "\r", "\n"], [:global])
    {lines, [rest]} = Enum.split(parts, -1)
    {lines, rest <> held}
  end

  defp line("", {events, %{data: nil} = sse}), do: {events, %{sse | event: nil}}

  defp line("", {events, sse}) do
    event = %{
      event: sse.event || "message",
      data: sse.data,
      id: sse.id
    }

    {[event | events], %{sse | data: nil, event: nil}}
  end

  defp line(":" <> _comment, acc), do: acc

  defp line(text, {events, sse}) do
    {field, value} =
      case :binary.split(text, ":") do
        [field, " " <> value] -> {field, value}
        [field, value] -> {field, value}
        [field] -> {field, ""}
      end

    sse =
      case field do
        "data" -> %{sse | data: append(sse.data, value)}
        "event" -> %{sse | event: value}
        "id" -> if String.contains?(value, <<0>>), do: sse, else: %{sse | id: value}
        _ -> sse
      end

    {events, sse}
  end

  defp append(nil, value), do: :binary.copy(value)
  defp append(data, value), do: <<data::binary, ?\n, value::binary>>
end
