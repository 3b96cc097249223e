defmodule CMDC.Tool.GuidesTest do
  # The ```elixir blocks of README.md and docs/*.md run here, each file's in order with one
  # binding (a guide reads as one session). A block preceded by `<!-- not run: reason -->` is
  # not run (a config file, a supervision tree of your app) and the reason is printed. Blocks
  # check themselves with pattern matches: a block that raises fails its file's test.
  use ExUnit.Case, async: false

  @root Path.expand("../..", __DIR__)
  @files ["README.md" | @root |> Path.join("docs/*.md") |> Path.wildcard() |> Enum.sort()]
         |> Enum.map(&Path.relative_to(&1, @root))

  for file <- @files do
    @external_resource Path.join(@root, file)
  end

  @doc false
  # `{line, code}` of every elixir block, or `{line, {:skip, reason}}`.
  def blocks(text) do
    text
    |> String.split("\n")
    |> Enum.with_index(1)
    |> collect(nil, nil, [])
  end

  defp collect([], _open, _previous, acc), do: Enum.reverse(acc)

  defp collect([{"```elixir", n} | rest], nil, previous, acc) do
    skip =
      case previous && Regex.run(~r/^<!-- not run: (.+) -->$/, previous) do
        [_, reason] -> reason
        _ -> nil
      end

    collect(rest, {n + 1, [], skip}, nil, acc)
  end

  defp collect([{"```" <> _, _n} | rest], {line, lines, skip}, _previous, acc) do
    block =
      if skip, do: {line, {:skip, skip}}, else: {line, lines |> Enum.reverse() |> Enum.join("\n")}

    collect(rest, nil, nil, [block | acc])
  end

  defp collect([{text, _n} | rest], {line, lines, skip}, previous, acc),
    do: collect(rest, {line, [text | lines], skip}, previous, acc)

  defp collect([{text, _n} | rest], nil, previous, acc) do
    previous = if String.trim(text) == "", do: previous, else: String.trim(text)
    collect(rest, nil, previous, acc)
  end

  test "the block reader finds blocks, their lines and the ones not run" do
    text = """
    intro
    ```elixir
    1 = 1
    ```
    <!-- not run: a config file -->

    ```elixir
    import Config
    ```
    """

    assert blocks(text) == [{3, "1 = 1"}, {8, {:skip, "a config file"}}]
  end

  for file <- @files do
    test "the elixir blocks of #{file} run" do
      file = unquote(file)
      path = Path.join(@root, file)
      blocks = path |> File.read!() |> blocks()

      Enum.reduce(blocks, [], fn
        {line, {:skip, reason}}, binding ->
          IO.puts("#{file}:#{line}: not run: #{reason}")
          binding

        {line, code}, binding ->
          {_value, binding} = Code.eval_string(code, binding, file: path, line: line)
          binding
      end)
    end
  end
end
