defmodule CMDC.Tool.CLI do
  @moduledoc false
  # What the terminal commands (`mix cmdc.tools`, `mix cmdc.mcp`) serve.

  @doc "The tools the commands show and serve."
  def tools,
    do: [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile, CMDC.Tool.Examples.Countdown]
end
