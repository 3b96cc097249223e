defmodule CMDC.Tool.CLI.Output do
  @moduledoc false
  # Terminal output of the commands: tables, colours (plain when not on a terminal), progress.

  @doc "Columns padded to their widest cell, the header in bold."
  def table(header, rows) do
    widths =
      Enum.reduce([header | rows], List.duplicate(0, length(header)), fn row, acc ->
        Enum.zip_with(row, acc, &max(String.length(&1), &2))
      end)

    format = fn row ->
      row
      |> Enum.zip(widths)
      |> Enum.map_join("  ", fn {cell, w} -> String.pad_trailing(cell, w) end)
      |> String.trim_trailing()
    end

    Enum.map_join([bold(format.(header)) | Enum.map(rows, format)], "\n", & &1)
  end

  @doc "A titled list of items, nothing when empty."
  def section(_title, [], _fun), do: :ok

  def section(title, items, fun) do
    IO.puts("\n#{bold(title)} (#{length(items)}):")
    Enum.each(items, &IO.puts("  - " <> fun.(&1)))
  end

  @doc "Prints the load report's problems (errors on stderr too: a pipe reading stdout sees them)."
  def problems(report) do
    section("load errors", report.errors, fn e -> "#{e.path}: #{e.reason}" end)

    section("refused (name conflicts)", report.conflicts, fn c ->
      "#{c.refused}: #{c.reason}"
    end)

    section("untrusted folders (skipped)", report.untrusted, fn u ->
      "#{u.path}: #{u.reason}"
    end)

    section("ignored files", report.ignored, fn i -> "#{i.path}: #{i.reason}" end)
  end

  @doc "The first line of a text, cut to 70 characters."
  def one_line(text) do
    line = text |> String.split("\n", parts: 2) |> hd()
    if String.length(line) > 70, do: String.slice(line, 0, 67) <> "...", else: line
  end

  @doc "Runs `fun`, printing progress on stderr when it takes longer than a second."
  def with_progress(label, fun) do
    parent = self()

    ticker =
      spawn(fn ->
        receive do
          {:done, from} -> send(from, :progress_done)
        after
          1_000 ->
            IO.write(:stderr, "#{label}…")
            tick(parent)
        end
      end)

    try do
      fun.()
    after
      send(ticker, {:done, self()})

      receive do
        :progress_done -> :ok
      after
        1_000 -> :ok
      end
    end
  end

  defp tick(parent) do
    receive do
      {:done, from} ->
        IO.write(:stderr, " done\n")
        send(from, :progress_done)
    after
      1_000 ->
        if Process.alive?(parent), do: IO.write(:stderr, ".") && tick(parent), else: :ok
    end
  end

  defp ansi?, do: IO.ANSI.enabled?()
  def bold(text), do: if(ansi?(), do: IO.ANSI.bright() <> text <> IO.ANSI.reset(), else: text)
  def dim(text), do: if(ansi?(), do: IO.ANSI.faint() <> text <> IO.ANSI.reset(), else: text)
  def red(text), do: if(ansi?(), do: IO.ANSI.red() <> text <> IO.ANSI.reset(), else: text)
  def green(text), do: if(ansi?(), do: IO.ANSI.green() <> text <> IO.ANSI.reset(), else: text)
end
