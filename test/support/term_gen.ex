defmodule CMDC.Tool.TermGen do
  @moduledoc false
  # Hand-written random term generators (StreamData is a hex package, and hex is unreachable).
  # Seeded from ExUnit's seed so a failure replays with `mix test --seed N`.

  @keys ~w(a b c name count tags kind id x y)

  # Integers around the immediate (60-bit) and 64-bit limits, floats, bignums.
  @numbers [0, 1, 1.0, -1, 2.0, 2 ** 59 - 1, 2 ** 59, -(2 ** 59), -(2 ** 59) - 1] ++
             [2 ** 63, 2 ** 64, -(2 ** 70), 1.5e300, 9_007_199_254_740_993]

  def seed(test_seed), do: :rand.seed(:exsss, {test_seed, 7, 42})

  @doc "A random JSON-like term of at most `depth` levels."
  def json(depth \\ 3) do
    case :rand.uniform(if depth > 0, do: 12, else: 9) do
      1 -> nil
      2 -> :rand.uniform(2) == 1
      3 -> :rand.uniform(200) - 100
      4 -> (:rand.uniform(2000) - 1000) / 8
      5 -> Enum.random(@numbers)
      6 -> string()
      7 -> Enum.random([:fast, :slow])
      8 -> Enum.random(["fast", "slow", "1", "true"])
      9 -> Enum.random([1, "1", true, nil])
      10 -> for _ <- 1..:rand.uniform(4), do: json(depth - 1)
      _ -> map(depth - 1)
    end
  end

  @doc """
  A random string in every binary form the VM has: heap binaries (up to 64 bytes), reference-
  counted ones, sub-binaries of both; ASCII and not, at the lengths the ASCII check treats apart.
  """
  def string do
    case :rand.uniform(6) do
      1 ->
        Enum.random([
          "",
          "a",
          "ab☃",
          "héllo",
          "snow ☃",
          "x" <> Integer.to_string(:rand.uniform(9))
        ])

      2 ->
        Enum.random(["abcd", "abcdefgh", "abcdefghijklmnop", "añb", "abcdefg☃", "ünïcödé ☃☃☃☃"])

      3 ->
        String.duplicate("long ascii ", :rand.uniform(20))

      4 ->
        String.duplicate("ŀøñğ ☃ ", :rand.uniform(20))

      5 ->
        binary_part(String.duplicate("sub-binary ", 10), :rand.uniform(20), :rand.uniform(30))

      _ ->
        binary_part("short é", 0, :rand.uniform(4))
    end
  end

  def map(depth) do
    case :rand.uniform(12) do
      1 -> wide_map(depth, Enum.random([13, 33, 40]))
      _ -> small_map(depth)
    end
  end

  # Over 12 members the validator binary-searches sorted keys; over 32 the VM uses a hash map.
  defp wide_map(depth, size) do
    Map.new(1..size, fn i -> {"k#{i}", json(max(depth - 1, 0))} end)
  end

  defp small_map(depth) do
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

  @doc """
  A random JSON-like term with what a careless encoder loses: atoms of every script (as keys
  and values), integers far beyond 64 bits and a float's range, strings needing escapes,
  and now and then a chain nested up to the 128-level limit.
  """
  def hostile_json(depth) do
    case :rand.uniform(if depth > 0, do: 14, else: 10) do
      1 -> Enum.random([:"☃", :日本語, :é, :"emoji 🎉", :ok, :"with space"])
      2 -> Enum.random([1, -1]) * Enum.random([2 ** 64, 10 ** 20, 10 ** 309, 7 ** 900])
      3 -> Enum.random([2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1, 0, -0, 1.0e-300, -1.5e308])
      4 -> Enum.random(["\"quoted\" \\ /", "\u0000\u001f\n\t", "🎉 ☃ é", "\u2028\u2029"])
      5 -> :rand.uniform() * Enum.random([1, -1.0e10, 1.0e-10])
      n when n in 6..10 -> json(0)
      11 -> chain(Enum.random([1, 50, 100, 124 - depth]), hostile_json(0))
      12 -> for _ <- 1..:rand.uniform(5), do: hostile_json(depth - 1)
      _ -> hostile_map(depth - 1)
    end
  end

  defp chain(levels, leaf), do: Enum.reduce(1..levels, leaf, fn _, acc -> [acc] end)

  defp hostile_map(depth) do
    keys = Enum.take_random(@keys ++ ["☃", "日本語", "é", "\"", ""], :rand.uniform(6))

    Map.new(keys, fn key ->
      key = if :rand.uniform(3) == 1, do: String.to_atom(key), else: key
      {key, hostile_json(depth)}
    end)
    |> dedupe()
  end

  @doc "The term `CMDC.Tool.JSON.decode/1` gives for the JSON text of `term`."
  def as_decoded(term) when is_map(term),
    do: Map.new(term, fn {k, v} -> {as_key(k), as_decoded(v)} end)

  def as_decoded(term) when is_list(term), do: Enum.map(term, &as_decoded/1)
  def as_decoded(term) when term in [true, false, nil], do: term
  def as_decoded(term) when is_atom(term), do: Atom.to_string(term)
  def as_decoded(term), do: term

  defp as_key(key) when is_atom(key), do: Atom.to_string(key)
  defp as_key(key), do: key

  @doc "A term that is not JSON somewhere inside a JSON-like term, and the path to it."
  def poisoned do
    bad =
      Enum.random([
        {:tuple},
        self(),
        make_ref(),
        <<0xFF>>,
        String.duplicate("x", 70) <> <<0xFF>>,
        <<1::3>>,
        [1 | 2],
        [1, 2 | "tail"],
        fn -> :ok end,
        %{"fine" => 1, {:key} => 2},
        %{<<0xFE>> => 1}
      ])

    {%{"ok" => 1, "list" => [1, %{"deep" => bad}]}, "/list/1/deep"}
  end

  @patterns ["^[a-z]+$", "^x", "\\d", "^[\\w.-]+/[\\w.-]+$", "é", "^.{2,4}$"]
  @formats ["email", "date", "ipv4", "uri", "uuid"]
  @types ~w(null boolean object array number integer string)

  @doc """
  A random JSON Schema of at most `depth` levels over the keywords tool schemas use (the ones
  the compiled program implements) and a few it leaves to `jsonschema`, for `draft` ("7" or
  "2020-12"). `$ref`s point at the root or at `$defs`.
  """
  def schema(draft, depth \\ 3) do
    s = subschema(draft, depth)

    if is_map(s) and :rand.uniform(4) == 1 do
      Map.put(s, "$defs", %{"d" => subschema(draft, depth - 1)})
    else
      s
    end
  end

  defp subschema(draft, depth) do
    case :rand.uniform(12) do
      1 ->
        Enum.random([true, false, %{}])

      _ ->
        Map.new(
          Enum.take_random(keywords(draft, depth), :rand.uniform(4)),
          &{elem(&1, 0), elem(&1, 1).()}
        )
    end
  end

  defp keywords(draft, depth) do
    sub = fn -> subschema(draft, max(depth - 1, 0)) end
    subs = fn -> for _ <- 1..:rand.uniform(3), do: sub.() end
    number = fn -> Enum.random([0, 1, 2, -3, 2.5, 1.0, 100, 0.5, 9_007_199_254_740_992]) end
    count = fn -> Enum.random([0, 1, 2, 3]) end

    base = [
      {"type",
       fn ->
         if :rand.uniform(3) == 1, do: Enum.take_random(@types, 2), else: Enum.random(@types)
       end},
      {"enum", fn -> for _ <- 1..:rand.uniform(3), do: json(1) end},
      {"const", fn -> json(1) end},
      {"minLength", count},
      {"maxLength", count},
      {"pattern", fn -> Enum.random(@patterns) end},
      {"format", fn -> Enum.random(@formats) end},
      {"minimum", number},
      {"maximum", number},
      {"exclusiveMinimum", number},
      {"exclusiveMaximum", number},
      {"multipleOf", fn -> Enum.random([1, 2, 0.5, 1.5]) end},
      {"required", fn -> Enum.take_random(@keys, :rand.uniform(3)) end},
      {"minProperties", count},
      {"maxProperties", count},
      {"minItems", count},
      {"maxItems", count},
      {"uniqueItems", fn -> true end},
      {"$ref", fn -> Enum.random(["#", "#/$defs/d"]) end}
    ]

    nested = [
      {"properties", fn -> Map.new(Enum.take_random(@keys, :rand.uniform(4)), &{&1, sub.()}) end},
      {"additionalProperties", sub},
      {"items", sub},
      {"anyOf", subs},
      {"oneOf", subs},
      {"allOf", subs},
      {"not", sub},
      {"if", sub},
      {"then", sub},
      {"else", sub}
    ]

    by_draft =
      if draft == "2020-12",
        do: [{"prefixItems", subs}],
        else: [{"items", subs}, {"additionalItems", sub}]

    if depth > 0, do: base ++ nested ++ by_draft, else: base
  end
end
