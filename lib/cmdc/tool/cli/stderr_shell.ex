defmodule CMDC.Tool.StderrShell do
  @moduledoc false
  # A Mix shell that writes everything to stderr, for tasks whose stdout is a protocol channel.
  @behaviour Mix.Shell

  @impl true
  def print_app, do: if(name = Mix.Shell.printable_app_name(), do: info("==> #{name}"))

  @impl true
  def info(message), do: IO.puts(:stderr, IO.ANSI.format(message, false))

  @impl true
  def error(message), do: IO.puts(:stderr, IO.ANSI.format(message, false))

  @impl true
  def prompt(_message), do: ""

  @impl true
  def yes?(_message, _opts \\ []), do: false

  @impl true
  def cmd(command, opts \\ []) do
    Mix.Shell.cmd(command, opts, fn data -> IO.write(:stderr, data) end)
  end
end
