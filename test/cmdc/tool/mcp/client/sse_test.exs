defmodule CMDC.Tool.MCP.Client.SSETest do
  # The event-stream parser: the same events whatever the chunking, every line ending, and
  # bounded cost for streams that never end an event or a line.
  use ExUnit.Case, async: true

  alias CMDC.Tool.MCP.Client.SSE

  @stream "id: 1\r\nevent: note\r\ndata: a\r\ndata: b\r\n\r\n" <>
            ": comment\n\ndata: {\"x\":1}\n\n" <>
            "id: 2\rdata: cr only\r\rdata:no space\n\n"

  @events [
    %{event: "note", data: "a\nb", id: "1"},
    %{event: "message", data: ~s({"x":1}), id: "1"},
    %{event: "message", data: "cr only", id: "2"},
    %{event: "message", data: "no space", id: "2"}
  ]

  defp feed(text, size) do
    pieces = for <<piece::binary-size(size) <- text>>, do: piece
    tail = binary_part(text, length(pieces) * size, byte_size(text) - length(pieces) * size)

    {events, sse} =
      Enum.reduce(pieces ++ [tail], {[], SSE.new()}, fn piece, {acc, sse} ->
        {events, sse} = SSE.parse(sse, piece)
        {acc ++ events, sse}
      end)

    {events, sse}
  end

  test "every chunk size gives the same events; CRLF split across chunks is one line end" do
    for size <- 1..byte_size(@stream) do
      assert {@events, sse} = feed(@stream, size)
      assert SSE.pending_bytes(sse) == 0
    end
  end

  test "an event that never ends: pending bytes count its data, in linear time" do
    line = String.duplicate("data: x\n", 8_192)
    sse = Enum.reduce(1..64, SSE.new(), fn _, sse -> elem(SSE.parse(sse, line), 1) end)
    # 64 x 8,192 data lines of one byte, joined by "\n"
    assert SSE.pending_bytes(sse) == 64 * 8_192 * 2 - 1
    assert {[%{data: data}], sse} = SSE.parse(sse, "\n")
    assert byte_size(data) == 64 * 8_192 * 2 - 1
    assert SSE.pending_bytes(sse) == 0
  end

  test "a line that never ends is held as one buffer, counted" do
    chunk = String.duplicate("y", 65_536)
    {[], start} = SSE.parse(SSE.new(), "data: ")
    sse = Enum.reduce(1..32, start, fn _, sse -> elem(SSE.parse(sse, chunk), 1) end)
    assert SSE.pending_bytes(sse) == 6 + 32 * 65_536
    assert {[%{data: data}], _} = SSE.parse(sse, "\n\n")
    assert byte_size(data) == 32 * 65_536
  end
end
