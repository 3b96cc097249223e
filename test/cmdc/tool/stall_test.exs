defmodule CMDC.Tool.StallTest do
  # No NIF call holds a normal scheduler past ~1 ms, whatever the input (issue 16, item 1): the
  # normal-scheduler NIFs answer `{:error, :yield}` *before* doing long work, and the public functions
  # then finish it on a dirty scheduler. Figures (sleeper lateness against the VM's own
  # term_to_binary) are printed by bench/stall.exs; the timings here are loose upper bounds on
  # the best of several calls, far above what a fixed call takes and far below the old cost.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{JSON, Native, Schema}

  setup do
    %{any: Schema.compile!(%{})}
  end

  # Best of five, in microseconds: the least disturbed run on a busy machine.
  defp best_us(fun) do
    1..5 |> Enum.map(fn _ -> elem(:timer.tc(fun), 0) end) |> Enum.min()
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

  test "a 3M-element list yields after its first cells, not after counting it", %{any: any} do
    list = List.duplicate(1, 3_000_000)
    assert Native.schema_validate(any, list) == {:error, :yield}
    assert Native.json_encode(list, false) == {:error, :yield}
    assert best_us(fn -> Native.schema_validate(any, list) end) < 2_000
    assert best_us(fn -> Native.json_encode(list, false) end) < 2_000
    improper = list ++ [1 | 2]
    assert Native.schema_validate(any, improper) == {:error, :yield}
    assert {:error, [%{message: message}]} = Schema.validate(any, improper)
    assert message =~ "an improper list"
  end

  test "a map of 2M keys yields before any slot is reserved for it", %{any: any} do
    map = Map.new(1..2_000_000, &{Integer.to_string(&1), &1})
    assert Native.schema_validate(any, map) == {:error, :yield}
    assert best_us(fn -> Native.schema_validate(any, map) end) < 2_000
  end

  test "an error formats a bounded prefix of the term, not the whole term", %{any: any} do
    tuple = List.to_tuple(Enum.to_list(1..300_000))
    term = [%{"t" => tuple}]
    assert {:error, [%{path: "/0/t", message: message}]} = Schema.validate(any, term)
    assert message =~ ~r/^a tuple \(\{1,2,3,.*\.\.\.\) is not a JSON value$/
    assert String.length(message) < 120
    assert best_us(fn -> Native.schema_validate(any, term) end) < 2_000

    assert {:error, message} = JSON.encode(%{"k" => [List.duplicate(<<0xFF>>, 200_000)]})
    assert message =~ "/k/0/0: a binary that is not valid UTF-8 (<<255>>)"

    # Keys that are not strings are shown bounded too, in the message and the path.
    assert {:error, message} = JSON.encode(%{tuple => 1})
    assert String.length(message) < 200
  end
end
