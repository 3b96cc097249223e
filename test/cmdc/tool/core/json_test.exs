defmodule CMDC.Tool.JSONTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.JSON

  alias CMDC.Tool.JSON

  test "round trips every JSON value kind" do
    value = %{
      "s" => "héllo \"quoted\" \n\t\u0001 ☃",
      "i" => -42,
      "u" => 18_446_744_073_709_551_615,
      "f" => 1.5e-7,
      "b" => [true, false, nil],
      "o" => %{"nested" => %{"empty" => %{}, "list" => []}}
    }

    assert value |> JSON.encode!() |> JSON.decode!() == value
    assert value |> JSON.encode!(pretty: true) |> JSON.decode!() == value
  end

  test "pretty output is indented by two spaces" do
    assert JSON.encode!(%{"a" => [1]}, pretty: true) == "{\n  \"a\": [\n    1\n  ]\n}"
  end

  test "strings are escaped as serde_json escapes them, in every binary form" do
    # Control characters as \b \t \n \f \r or lowercase \u00XX, quote and backslash escaped,
    # everything else (/, DEL, non-ASCII) as it is.
    plain = "abcdefgh/\u007Fé☃"
    escaped = "\u0000\u0001\b\t\n\u000b\f\r\u001f\"\\"
    text = "\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\\\"\\\\"

    for s <- [plain, escaped, plain <> escaped <> plain, String.duplicate(escaped <> "x", 20)] do
      expected = ~s(") <> (s |> String.replace(escaped, text)) <> ~s(")
      # A heap binary, a reference-counted one, and a sub-binary of each.
      long = String.duplicate("-", 100) <> s
      sub = binary_part(long, 100, byte_size(s))
      heap_sub = binary_part("-" <> s, 1, byte_size(s))

      for form <- [s, sub, heap_sub] do
        assert JSON.encode!(form) == expected
        assert JSON.encode!(%{form => [form]}) == "{#{expected}:[#{expected}]}"
      end
    end

    # Invalid UTF-8 after a run of ASCII (checked eight bytes at a time) and after text.
    for bad <- [String.duplicate("a", 17) <> <<0xC3>>, "é" <> <<0xFF>>, "ab" <> <<0xE2, 0x98>>] do
      assert {:error, "a binary that is not valid UTF-8" <> _} = JSON.encode(bad)
    end
  end

  test "short strings: every length, a character to escape or a bad byte at every position" do
    escape = fn s ->
      for <<c::utf8 <- s>>, into: "" do
        case c do
          ?" -> "\\\""
          ?\\ -> "\\\\"
          ?\n -> "\\n"
          c when c < 0x20 -> "\\u00" <> String.downcase(Base.encode16(<<c>>))
          c -> <<c::utf8>>
        end
      end
    end

    for n <- 0..24, at <- 0..max(n - 1, 0), odd <- ["\"", "\\", "\n", "\u0001", "é", "☃"] do
      plain = String.duplicate("k", n)

      s =
        if n == 0,
          do: plain,
          else: binary_part(plain, 0, at) <> odd <> binary_part(plain, at + 1, n - at - 1)

      assert JSON.encode!(plain) == ~s(") <> plain <> ~s(")
      assert JSON.encode!(%{s => s}) == "{\"#{escape.(s)}\":\"#{escape.(s)}\"}"

      bad =
        if n == 0,
          do: <<0xFF>>,
          else: binary_part(plain, 0, at) <> <<0xFF>> <> binary_part(plain, at + 1, n - at - 1)

      assert {:error, _} = JSON.encode(bad)
      assert {:error, _} = JSON.encode(%{bad => 1})
    end
  end

  test "small and large integers, and text around the size first written on the stack" do
    ints = Enum.to_list(-120..120) ++ Enum.to_list(990..1010) ++ [1234, 5005, 9999, 10_000]
    ints = ints ++ [10_001, 99_999, -(2 ** 40), 2 ** 53]
    assert JSON.encode!(ints) == "[" <> Enum.map_join(ints, ",", &Integer.to_string/1) <> "]"

    for size <- [2030, 2040, 2046, 2047, 2048, 2049, 2050, 4100] do
      s = String.duplicate("x", size - 2)
      assert JSON.encode!(s) == ~s(") <> s <> ~s(")
      assert byte_size(JSON.encode!([s])) == size + 2
    end
  end

  test "numbers are written as serde_json writes them" do
    assert JSON.encode!([0, -1, 2 ** 59, -(2 ** 59) - 1, 2 ** 63, 2 ** 64 - 1]) ==
             "[0,-1,576460752303423488,-576460752303423489,9223372036854775808,18446744073709551615]"

    assert JSON.encode!([1.0, -0.0, 1.5e-7, 1.0e300, 0.1, 123_456.789]) ==
             "[1.0,-0.0,1.5e-7,1e+300,0.1,123456.789]"
  end

  test "big integers encode exactly" do
    assert JSON.encode!(2 ** 100) == "1267650600228229401496703205376"
  end

  test "decode errors say what and where" do
    assert {:error, "invalid JSON: the input is empty"} = JSON.decode("")
    assert {:error, msg} = JSON.decode(~s({"a": 1} x))
    assert msg =~ "trailing characters at line 1 column 10"
    assert {:error, msg} = JSON.decode(<<"\"", 0xFF, "\"">>)
    assert msg =~ "invalid JSON"
    assert {:error, msg} = JSON.decode(String.duplicate("[", 129) <> String.duplicate("]", 129))
    assert msg =~ "nested deeper than 128"
    assert {:error, msg} = JSON.decode(:not_text)
    assert msg =~ "expected a binary"
  end

  test "decode accepts iodata" do
    assert JSON.decode(["[1,", ["2]"]]) == {:ok, [1, 2]}
  end

  test "duplicate object keys: the last wins" do
    assert JSON.decode!(~s({"a": 1, "a": 2})) == %{"a" => 2}
  end

  test "encode errors name the path" do
    assert {:error, "/a/0: a pid" <> _} = JSON.encode(%{"a" => [self()]})
    assert {:error, "/k: a binary that is not valid UTF-8" <> _} = JSON.encode(%{k: <<0xC3>>})
    assert {:error, "key \"a\" is given twice" <> _} = JSON.encode(%{:a => 1, "a" => 2})
    assert {:error, "/b/c: a pid" <> _} = JSON.encode(%{"a" => 1, "b" => %{"c" => self()}})

    assert {:error, "a map key is a binary that is not valid UTF-8"} =
             JSON.encode(%{"a" => 1, <<0xFF>> => 2})

    # Atom keys come first in a small map; distinct names mix freely.
    assert JSON.encode!(%{:b => 1, "a" => 2, "c" => [3]}) == ~s({"b":1,"a":2,"c":[3]})
    assert_raise JSON.EncodeError, ~r/a tuple/, fn -> JSON.encode!({1}) end
    assert_raise JSON.DecodeError, ~r/invalid JSON/, fn -> JSON.decode!("nope") end
  end

  test "large documents go through the dirty scheduler and come back intact" do
    big = for i <- 1..20_000, do: %{"id" => i, "name" => "item #{i}", "tags" => ["a", "b"]}
    text = JSON.encode!(big)
    assert byte_size(text) > 16 * 1024
    assert JSON.decode!(text) == big
  end

  test "a long top-level list is written a slice per call on the caller's scheduler, exactly" do
    alias CMDC.Tool.Native

    # Slices stop at a normal call's budget and hand back the rest of the list.
    list = List.duplicate(1, 10_000)
    assert Native.json_encode(list, false) == {:error, :yield}
    assert {:ok, {"1," <> _ = first, rest}} = Native.json_encode_slice(list)
    assert rest != [] and length(rest) < 10_000
    assert String.split(first, ",") |> length() == 10_000 - length(rest)

    # Every shape of element, one element too big for a slice, and the result equals the
    # one-call (dirty) encoding byte for byte.
    mixed =
      for i <- 1..20_000 do
        cond do
          i == 15_000 -> %{"big" => List.duplicate("x", 50_000)}
          rem(i, 3) == 0 -> %{"i" => i, "s" => "v\"#{i}", "f" => i / 7, "n" => nil}
          rem(i, 3) == 1 -> ["é#{i}", true, [i]]
          true -> i * 1_000_000_000_000
        end
      end

    assert {:ok, text} = JSON.encode(mixed)
    assert {:ok, ^text} = Native.json_encode_dirty(mixed, false)
    assert JSON.decode!(text) == mixed

    # The last element over a slice's budget: the rest goes dirty.
    tail_big = List.duplicate(1, 5_000) ++ [List.duplicate("y", 100_000)]
    assert JSON.decode!(JSON.encode!(tail_big)) == tail_big

    # Errors keep their path from the top, and improper lists are refused.
    bad = List.duplicate(1, 10_000) ++ [%{"k" => {:x}}]
    assert JSON.encode(bad) == {:error, "/10000/k: a tuple ({x}) is not a JSON value"}
    improper = Enum.reduce(1..10_000, :tail, &[&1 | &2])
    assert {:error, message} = JSON.encode(improper)
    assert message =~ "improper list"
  end

  test "hostile nesting is refused when encoding" do
    deep = Enum.reduce(1..100_000, 1, fn _, acc -> [acc] end)
    assert {:error, message} = JSON.encode(deep)
    assert message =~ "nested deeper than 128"
  end
end
