defmodule Examples.Tools.FileStats do
  @moduledoc "Line, word and byte counts of text files under the working directory."
  @behaviour CMDC.Tool

  @impl true
  def name, do: "file_stats"

  @impl true
  def description, do: "Count lines, words and bytes of text files under the working directory."

  @impl true
  def description(%{working_dir: dir}),
    do: "Count lines, words and bytes of text files under #{dir}."

  def description(_), do: description()

  @impl true
  def parameters do
    %{
      "type" => "object",
      "properties" => %{
        "paths" => %{
          "type" => "array",
          "items" => %{"type" => "string"},
          "minItems" => 1,
          "description" => "Files, relative to the working directory"
        }
      },
      "required" => ["paths"],
      "additionalProperties" => false
    }
  end

  @impl true
  def meta(%{"paths" => paths}), do: "count #{Enum.join(paths, ", ")}"

  @impl true
  def execute(%{"paths" => paths}, ctx) do
    root = Path.expand(ctx.working_dir || File.cwd!())

    paths
    |> Enum.map(&stats(root, &1))
    |> Enum.join("\n")
    |> then(&{:ok, &1})
  end

  defp stats(root, path) do
    full = Path.expand(path, root)

    with true <- full == root or String.starts_with?(full, root <> "/"),
         {:ok, text} <- File.read(full) do
      lines = text |> String.split("\n") |> length()
      words = text |> String.split(~r/\s+/, trim: true) |> length()
      "#{path}: #{lines} lines, #{words} words, #{byte_size(text)} bytes"
    else
      false -> "#{path}: outside the working directory"
      {:error, reason} -> "#{path}: #{:file.format_error(reason)}"
    end
  end
end
