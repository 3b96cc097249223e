defmodule CMDC.Tool.MCP.Client.LogLimit do
  @moduledoc false
  # A per-second budget of log lines for what a server writes (stderr, notifications/message):
  # a flood costs a counter, not a Logger queue. The first line of a new second reports how
  # many the previous one dropped.

  require Logger

  defstruct per_second: 20, second: nil, logged: 0, dropped: 0

  def new(per_second), do: %__MODULE__{per_second: per_second}

  @doc false
  # Logs `text.()` at `level` when the budget allows (the text is built only then).
  def log(%__MODULE__{} = limit, level, text) do
    second = System.monotonic_time(:second)
    limit = if limit.second == second, do: limit, else: roll(limit, level, second)

    if limit.logged < limit.per_second do
      Logger.log(level, text)
      %{limit | logged: limit.logged + 1}
    else
      %{limit | dropped: limit.dropped + 1}
    end
  end

  defp roll(limit, level, second) do
    if limit.dropped > 0,
      do: Logger.log(level, "(#{limit.dropped} more lines of this server were not logged)")

    %{limit | second: second, logged: 0, dropped: 0}
  end
end
