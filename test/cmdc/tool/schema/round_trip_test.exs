defmodule CMDC.Tool.RoundTripTest do
  # Nothing is lost or changed silently: whatever `JSON.encode` writes, `JSON.decode` reads back
  # to an equal term, and validation reads the same term the encoder writes (issue 16, item 2).
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Schema, TermGen}

  describe "atoms of any script" do
    test "encode as their UTF-8 name, as keys and as values" do
      assert JSON.decode!(JSON.encode!(%{:"☃" => 1, :"★" => 2})) == %{"☃" => 1, "★" => 2}
      assert JSON.encode!([:日本語, :é, :ok]) == ~s(["日本語","é","ok"])
      assert JSON.encode!(%{:ключ => :значение}) == ~s({"ключ":"значение"})
    end

    test "validate as the strings they name" do
      schema =
        Schema.compile!(%{
          "type" => "object",
          "properties" => %{"☃" => %{"const" => "★"}},
          "required" => ["☃"]
        })

      assert {:ok, _} = Schema.validate(schema, %{:"☃" => :"★"})
      assert {:error, [%{keyword: "const"}]} = Schema.validate(schema, %{:"☃" => :"☆"})
    end

    test "an atom key and a string key with the same text are an error naming the key" do
      for {atom, string} <- [{:a, "a"}, {:"☃", "☃"}, {:é, "é"}] do
        term = %{"outer" => %{atom => 1, string => 2}}
        assert {:error, message} = JSON.encode(term)
        assert message =~ ~s(/outer: key "#{string}" is given twice)

        schema = Schema.compile!(%{"type" => "object"})
        assert {:error, [error]} = Schema.validate(schema, term)
        assert error.path == "/outer"
        assert error.message =~ ~s(key "#{string}" is given twice)
      end
    end
  end

  describe "integers of any size" do
    test "round trip exactly, both signs, far beyond a float's range" do
      for n <- [2 ** 64, -(2 ** 64) - 1, 10 ** 309, -(10 ** 400), 7 ** 2000] do
        assert JSON.decode!(JSON.encode!(n)) === n
        assert JSON.decode!(JSON.encode!(%{"n" => [n]})) === %{"n" => [n]}
      end
    end

    test "big integers in text over 16 KiB and under it decode the same" do
      n = 3 ** 5000
      small = JSON.encode!([n])
      large = JSON.encode!(Enum.map(1..20, fn _ -> n end))
      assert byte_size(large) > 16 * 1024
      assert JSON.decode!(small) == [n]
      assert JSON.decode!(large) == List.duplicate(n, 20)
    end

    test "validation reads the same integer" do
      schema = Schema.compile!(%{"type" => "integer", "minimum" => 10 ** 300})
      assert {:ok, _} = Schema.validate(schema, 10 ** 301)
      assert {:error, [%{keyword: "minimum"}]} = Schema.validate(schema, 10 ** 299)
      assert {:ok, _} = Schema.validate_json(schema, Integer.to_string(10 ** 301))
    end

    test "an integer past the work limit of one call is refused the same way in both directions" do
      # About 1.3 million digits: over the dirty scheduler's budget to convert (quadratic).
      huge = Bitwise.bsl(1, 4_500_000)
      assert {:error, encode_message} = JSON.encode(huge)
      assert encode_message =~ "too large"

      text = "1" <> String.duplicate("0", 1_400_000)
      assert {:error, decode_message} = JSON.decode(text)
      assert decode_message =~ "too large"
    end
  end

  describe "one depth limit in every direction" do
    test "128 nested containers pass encode, decode and validation; 129 fail all three" do
      schema = Schema.compile!(%{})

      for wrap <- [&[&1], &%{"a" => &1}] do
        ok = Enum.reduce(1..128, 1, fn _, acc -> wrap.(acc) end)
        ok_empty = Enum.reduce(1..127, [], fn _, acc -> wrap.(acc) end)
        deep = Enum.reduce(1..129, 1, fn _, acc -> wrap.(acc) end)
        deep_empty = Enum.reduce(1..128, [], fn _, acc -> wrap.(acc) end)

        for term <- [ok, ok_empty] do
          assert JSON.decode!(JSON.encode!(term)) == term
          assert {:ok, _} = Schema.validate(schema, term)
        end

        for term <- [deep, deep_empty] do
          assert {:error, message} = JSON.encode(term)
          assert message =~ "nested deeper than 128"
          assert {:error, [%{message: message}]} = Schema.validate(schema, term)
          assert message =~ "nested deeper than 128"
        end
      end

      text = String.duplicate("[", 128) <> String.duplicate("]", 128)
      assert {:ok, _} = JSON.decode(text)
      assert {:ok, _} = Schema.validate_json(schema, text)
      text = String.duplicate("[", 129) <> String.duplicate("]", 129)
      assert {:error, message} = JSON.decode(text)
      assert message =~ "nested deeper than 128"
    end
  end

  test "property: decode(encode(term)) equals the term, over random terms" do
    TermGen.seed(ExUnit.configuration()[:seed])

    for _ <- 1..3000 do
      term = TermGen.hostile_json(4)
      expected = TermGen.as_decoded(term)

      for pretty <- [false, true] do
        assert {:ok, text} = JSON.encode(term, pretty: pretty), inspect(term, limit: 20)
        assert JSON.decode(text) === {:ok, expected}, inspect(term, limit: 20)
      end
    end
  end

  test "property: terms that are not JSON are refused by encode and validation at the same path" do
    TermGen.seed(ExUnit.configuration()[:seed])
    schema = Schema.compile!(%{})

    for _ <- 1..200 do
      {term, path} = TermGen.poisoned()
      assert {:error, message} = JSON.encode(term)
      assert String.starts_with?(message, path <> ": ")
      assert {:error, [%{path: ^path}]} = Schema.validate(schema, term)
    end
  end
end
