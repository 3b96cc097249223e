defmodule CMDC.Test.MCPIO do
  @moduledoc """
  Drives `CMDC.Tool.MCP.Server.serve/2` in-process: an input device fed line by line by the
  test (StringIO cannot wait for more input) and the frames the server wrote to a StringIO.
  """

  @doc "An IO device that answers `get_line` with what `feed/2` gave it, waiting when empty."
  def feeder, do: spawn_link(fn -> feed_loop([]) end)

  @doc "Queues one JSON-RPC message (a map, encoded) or raw line for the server to read."
  def feed(input, message) when is_map(message),
    do: send(input, {:feed, CMDC.Tool.JSON.encode!(message) <> "\n"})

  def feed(input, line) when is_binary(line), do: send(input, {:feed, line})

  @doc "Ends the server's input (what a client closing stdin does)."
  def eof(input), do: send(input, :eof)

  @doc "The frames the server wrote so far, decoded."
  def frames(out) do
    {_, text} = StringIO.contents(out)
    text |> String.split("\n", trim: true) |> Enum.map(&CMDC.Tool.JSON.decode!/1)
  end

  @doc """
  Waits until the server wrote at least `n` frames and returns them; `timeout` (ms) only
  bounds a hang.
  """
  def await_frames(out, n, timeout \\ 30_000) do
    CMDC.Tool.Eventually.eventually(
      fn ->
        frames = frames(out)
        length(frames) >= n and frames
      end,
      within: timeout,
      message: fn -> "the server wrote not #{n} frames but: #{inspect(frames(out))}" end
    )
  end

  defp feed_loop(queue) do
    receive do
      {:feed, line} -> feed_loop(queue ++ [line])
      :eof -> feed_loop(queue ++ [:eof])
      {:io_request, from, ref, {:get_line, _enc, _prompt}} -> answer(from, ref, queue)
      {:io_request, from, ref, {:get_line, _prompt}} -> answer(from, ref, queue)
    end
  end

  defp answer(from, ref, []) do
    receive do
      {:feed, line} -> answer(from, ref, [line])
      :eof -> answer(from, ref, [:eof])
    end
  end

  defp answer(from, ref, [next | rest]) do
    send(from, {:io_reply, ref, next})
    feed_loop(rest)
  end
end
