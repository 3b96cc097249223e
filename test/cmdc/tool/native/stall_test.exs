defmodule CMDC.Tool.StallTest do
  # No NIF call holds a normal scheduler past ~1 ms, whatever the input (issue 16, item 1): the
  # normal-scheduler NIFs answer `{:error, :yield}` *before* doing long work, and the public functions
  # then finish it on a dirty scheduler. Figures (sleeper lateness against the VM's own
  # term_to_binary) belong in a bench; these tests assert the mechanism only (no timings): the
  # normal-scheduler call yields before the work, and the public function's answer is right.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Native, Schema}

  setup do
    %{any: Schema.compile!(%{})}
  end

  test "a big integer is not converted on a normal scheduler: the NIF yields first", %{any: any} do
    big = Bitwise.bsl(1, 800_000)
    assert Native.json_encode(big, false) == {:error, :yield}
    assert Native.schema_validate(any, big) == {:error, :yield}
    assert Native.schema_validate(any, %{"n" => [big]}) == {:error, :yield}
    assert {:ok, text} = JSON.encode(big)
    assert {:ok, ^big} = JSON.decode(text)
    assert Native.json_decode(binary_part(text, 0, 10_000)) == {:error, :yield}
    assert {:ok, ^big} = Schema.validate(any, big)

    # Small big integers stay on the normal scheduler.
    assert {:ok, _} = Native.json_encode(2 ** 100, false)
    assert {:ok, _} = Native.schema_validate(any, 2 ** 100)
  end

  # Issue 37: a 200,000-digit integer (~83 KB, 10,382 words; its decimal conversion is
  # quadratic, ~9 ms alone) is charged by its size on every entry a model's call or a tool's
  # result takes: each normal-scheduler NIF yields before converting it, and the public
  # function then answers from a dirty scheduler (figures: bench/stall.exs, "200,000-digit").
  test "a 200,000-digit integer goes dirty on every entry", %{any: any} do
    big = Integer.pow(10, 200_000) - 1
    text = Integer.to_string(big)
    integer = Schema.compile!(%{"type" => "integer", "maximum" => 5})
    object = Schema.compile!(%{"properties" => %{"n" => %{"type" => "integer"}}})

    assert Native.json_encode(big, false) == {:error, :yield}
    assert Native.json_encode(%{"n" => [big]}, false) == {:error, :yield}
    assert Native.json_encode_slice([big]) == {:error, :yield}
    assert Native.json_decode(text) == {:error, :yield}
    assert Native.json_decode(~s({"n": [#{text}]})) == {:error, :yield}

    for {schema, term} <- [{any, big}, {integer, big}, {object, %{"n" => big}}] do
      assert Native.schema_validate(schema, term) == {:error, :yield}
    end

    assert Native.schema_validate_json(object, ~s({"n": #{text}})) == {:error, :yield}

    tool =
      CMDC.Tool.Test.Factory.tool("big_n", "Takes n.", %{
        "type" => "object",
        "properties" => %{"n" => %{"type" => "integer", "minimum" => 0}}
      })

    reg = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(reg, tool)
    assert Native.registry_validate(reg.ref, "big_n", %{"n" => big}) == {:error, :yield}

    assert Native.registry_validate_json(reg.ref, "big_n", ~s({"n": #{text}})) ==
             {:error, :yield}

    assert Native.module_validate(tool, tool.module_info(:md5), %{"n" => big}) ==
             {:error, :yield}

    # The public functions answer, from the dirty twins.
    assert {:ok, ^text} = JSON.encode(big)
    assert {:ok, ^big} = JSON.decode(text)
    assert {:ok, ^big} = Schema.validate(any, big)
    assert {:error, [%{keyword: "maximum"}]} = Schema.validate(integer, big)
    assert {:ok, %{"n" => ^big}} = CMDC.Tool.validate(tool, %{"n" => big})
  end

  test "a 3M-element list yields after its first cells, not after counting it", %{any: any} do
    list = List.duplicate(1, 3_000_000)
    assert Native.schema_validate(any, list) == {:error, :yield}
    assert Native.json_encode(list, false) == {:error, :yield}
    assert {:ok, ^list} = Schema.validate(any, list)
    assert {:ok, "[1,1," <> _} = JSON.encode(list)
    improper = list ++ [1 | 2]
    assert Native.schema_validate(any, improper) == {:error, :yield}
    assert {:error, [%{message: message}]} = Schema.validate(any, improper)
    assert message =~ "an improper list"
  end

  test "a map of 2M keys yields before any slot is reserved for it", %{any: any} do
    map = Map.new(1..2_000_000, &{Integer.to_string(&1), &1})
    assert Native.schema_validate(any, map) == {:error, :yield}
    assert {:ok, ^map} = Schema.validate(any, map)
  end

  test "an error formats a bounded prefix of the term, not the whole term", %{any: any} do
    tuple = List.to_tuple(Enum.to_list(1..300_000))
    term = [%{"t" => tuple}]
    assert {:error, [%{path: "/0/t", message: message}]} = Schema.validate(any, term)
    assert message =~ ~r/^a tuple \(\{1,2,3,.*\.\.\.\) is not a JSON value$/
    assert String.length(message) < 120

    assert {:error, message} = JSON.encode(%{"k" => [List.duplicate(<<0xFF>>, 200_000)]})
    assert message =~ "/k/0/0: a binary that is not valid UTF-8 (<<255>>)"

    # Keys that are not strings are shown bounded too, in the message and the path.
    assert {:error, message} = JSON.encode(%{tuple => 1})
    assert String.length(message) < 200
  end

  test "an error's work is reported to the VM: a loop of cheap errors is charged for it", %{
    any: any
  } do
    # Each error (~1.6 µs of formatting and maps) counts as work; calls under 1% of a time slice
    # add up, so a process looping over them is switched out as often as its work warrants.
    # Before, such a call cost the caller ~7 reductions, a valid one's price (~6).
    tuple = [List.to_tuple(Enum.to_list(1..300_000))]
    {:reductions, before} = Process.info(self(), :reductions)
    for _ <- 1..1000, do: {:error, _} = Schema.validate(any, tuple)
    {:reductions, later} = Process.info(self(), :reductions)
    assert later - before > 10_000
  end

  test "a pattern that can backtrack: its superset refuses on a normal scheduler, the match runs dirty" do
    schema = Schema.compile!(%{"type" => "string", "pattern" => "^(a*)*\\1b$"})
    # A string the pattern's linear superset (^(a*)*(?:a*)?b$) accepts needs the bounded
    # match: never on a normal scheduler.
    assert Native.schema_validate(schema, "aab") == {:error, :yield}
    assert {:ok, "aab"} = Schema.validate(schema, "aab")

    # A string it refuses is invalid, answered on the normal scheduler with no match at all,
    # and the error reads as the pattern's own (what the crate's match reported before).
    expected = %{
      path: "",
      keyword: "pattern",
      message: ~S["ac" does not match "^(a*)*\1b$"],
      schema_path: "/pattern"
    }

    assert Native.schema_validate(schema, "ac") == {:error, [expected]}
    assert Schema.validate(schema, "ac") == {:error, [expected]}

    nested = Schema.compile!(%{"properties" => %{"w" => %{"pattern" => "^(a*)*\\1b$"}}})

    assert {:error, [%{path: "/w", schema_path: "/properties/w/pattern", message: message}]} =
             Native.schema_validate(nested, %{"w" => "ac"})

    assert message == expected.message

    # The 30 a's the bounded match gave up on (over its limit) are refused outright now.
    hostile = String.duplicate("a", 30)
    assert {:error, [failure]} = Native.schema_validate(schema, hostile)
    assert failure.message == ~s["#{hostile}" does not match "^(a*)*\\1b$"]

    # A hostile string the superset accepts still takes the one bounded match, dirty, and
    # ends in the clear error past its limit.
    accepts = Schema.compile!(%{"type" => "string", "pattern" => "^(a*)*b\\1$"})
    over = String.duplicate("a", 28) <> "b" <> String.duplicate("a", 29)
    assert Native.schema_validate(accepts, over) == {:error, :yield}
    assert {:error, [failure]} = Schema.validate(accepts, over)
    assert failure.keyword == "pattern"
    assert failure.schema_path == "/pattern"
    assert failure.message =~ "backtracking steps"
  end

  test "a pattern over 2,000 strings yields on a normal scheduler, then answers dirty" do
    words = Enum.map_join(0..1999, "|", &"w#{&1}")
    # A regex of 2,000 alternatives costs by its size.
    schema = Schema.compile!(%{"items" => %{"pattern" => "^(?:#{words})$"}})
    strings = List.duplicate("w1999", 2_000)
    assert Native.schema_validate(schema, strings) == {:error, :yield}
    assert {:ok, ^strings} = Schema.validate(schema, strings)
    bad = strings ++ ["nope"]
    assert {:error, [%{path: "/2000", keyword: "pattern"}]} = Schema.validate(schema, bad)

    # A literal alternation is a binary search (~0.2 µs a string): decided on the normal
    # scheduler a slice of strings per call (slice_test.exs), with the same verdict.
    schema = Schema.compile!(%{"items" => %{"pattern" => "^(#{words})$"}})
    assert Native.schema_validate(schema, strings) == {:error, :yield}
    assert {:more, _, _} = Native.schema_validate_slice(schema, strings, 0)
    assert {:ok, ^strings} = Schema.validate(schema, strings)
    assert {:error, [%{path: "/2000", keyword: "pattern"}]} = Schema.validate(schema, bad)

    # patternProperties takes the generic validator: its regexes are charged there too.
    props = Map.new(1..500, &{"k#{&1}", &1})
    schema = Schema.compile!(%{"patternProperties" => %{"^k(?=\\d)" => %{"type" => "integer"}}})
    assert Native.schema_validate(schema, props) == {:error, :yield}
    assert {:ok, ^props} = Schema.validate(schema, props)
  end

  test "listing a registry of over 2,000 tools yields on a normal scheduler, then answers dirty" do
    reg = CMDC.Tool.Registry.new()
    mods = CMDC.Tool.Test.Factory.tools(for i <- 1..2_001, do: "big_list_#{i}")
    :ok = CMDC.Tool.Registry.register(reg, mods)
    assert Native.registry_list(reg.ref) == {:error, :yield}
    assert CMDC.Tool.Registry.list(reg) == mods
  end

  # Item 5: a thread keeps its index buffers between calls only while they are small, so a big
  # input does not pin its memory on the scheduler thread that read it. (RSS figures under
  # concurrent 1 MB validations are in bench/stall.exs.)
  test "the per-thread index buffers are back under their cap after a big input" do
    big = Map.new(1..50_000, &{"k#{&1}", [&1, "v"]})
    {:ok, {items, keys}} = Native.memory_kept_after(big)
    assert items <= 4096 and keys <= 4096

    # A small input's buffers are kept (the next call allocates nothing).
    {:ok, {items, keys}} = Native.memory_kept_after(%{"a" => [1, 2, 3]})
    assert items > 0 and keys > 0 and items <= 4096 and keys <= 4096
  end
end
