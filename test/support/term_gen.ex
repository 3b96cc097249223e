defmodule CMDC.Tool.TermGen do
  @moduledoc false
  # Hand-written random term generators (StreamData is a hex package, and hex is unreachable).
  # Seeded from ExUnit's seed so a failure replays with `mix test --seed N`.

  @keys ~w(a b c name count tags kind id x y)

  def seed(test_seed), do: :rand.seed(:exsss, {test_seed, 7, 42})

  @doc "A random JSON-like term of at most `depth` levels."
  def json(depth \\ 3) do
    case :rand.uniform(if depth > 0, do: 12, else: 9) do
      1 -> nil
      2 -> :rand.uniform(2) == 1
      3 -> :rand.uniform(200) - 100
      4 -> (:rand.uniform(2000) - 1000) / 8
      5 -> Enum.random([0, 1, 1.0, -1, 2.0, 2 ** 64, -(2 ** 70), 1.5e300, 9_007_199_254_740_993])
      6 -> Enum.random(["", "a", "héllo", "snow ☃", "x" <> Integer.to_string(:rand.uniform(9))])
      7 -> Enum.random([:fast, :slow])
      8 -> Enum.random(["fast", "slow", "1", "true"])
      9 -> Enum.random([1, "1", true, nil])
      10 -> for _ <- 1..:rand.uniform(4), do: json(depth - 1)
      _ -> map(depth - 1)
    end
  end

  def map(depth) do
    keys = Enum.take_random(@keys, :rand.uniform(5))

    Map.new(keys, fn key ->
      key = if :rand.uniform(6) == 1, do: String.to_atom(key), else: key
      {key, json(depth)}
    end)
    |> dedupe()
  end

  # A map may not name one key as both an atom and a string: keep such pairs out of valid data.
  defp dedupe(map) do
    Enum.reduce(map, map, fn
      {k, _}, acc when is_atom(k) -> Map.delete(acc, Atom.to_string(k))
      _, acc -> acc
    end)
  end

  @doc "A term that is not JSON somewhere inside a JSON-like term, and the path to it."
  def poisoned do
    bad = Enum.random([{:tuple}, self(), make_ref(), <<0xFF>>, [1 | 2], fn -> :ok end])
    {%{"ok" => 1, "list" => [1, %{"deep" => bad}]}, "/list/1/deep"}
  end
end
