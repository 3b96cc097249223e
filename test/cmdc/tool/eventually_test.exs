defmodule CMDC.Tool.EventuallyTest do
  # The suite's one wait helper (test/support/eventually.ex): what a test relies on when it
  # waits, and what it reports when the wait never ends.
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually

  doctest CMDC.Tool.Eventually

  test "returns the first truthy value, trying again after falsy ones" do
    {:ok, agent} = Agent.start_link(fn -> [nil, false, nil, {:found, 3}] end)
    next = fn -> Agent.get_and_update(agent, fn [h | t] -> {h, t} end) end
    assert eventually(next) == {:found, 3}
    assert Agent.get(agent, & &1) == []
  end

  test "an assertion inside is tried again until it holds" do
    counter = :counters.new(1, [])

    assert eventually(fn ->
             :counters.add(counter, 1, 1)
             assert :counters.get(counter, 1) >= 4
             :done
           end) == :done
  end

  test "waits for another process, not a fixed time" do
    test = self()
    flag = :atomics.new(1, [])

    spawn_link(fn ->
      receive(do: (:go -> :atomics.put(flag, 1, 1)))
      send(test, :set)
    end)
    |> send(:go)

    assert eventually(fn -> :atomics.get(flag, 1) == 1 end)
    assert_receive :set
  end

  test "at the deadline the test fails with the last value or the given message" do
    error = assert_raise ExUnit.AssertionError, fn -> eventually(fn -> false end, within: 30) end
    assert error.message =~ "the condition was still false after 30 ms"

    error =
      assert_raise ExUnit.AssertionError, fn ->
        eventually(fn -> nil end, within: 30, message: fn -> "the file never appeared" end)
      end

    assert error.message =~ "not within 30 ms: the file never appeared"
  end

  test "at the deadline an assertion inside is what the test reports" do
    error =
      assert_raise ExUnit.AssertionError, fn ->
        eventually(fn -> assert 1 + 1 == 3 end, within: 30, message: "sum")
      end

    assert error.message =~ "sum"
    assert error.message =~ "Assertion with == failed"
  end

  test "other errors are not retried: they fail the test at once" do
    counter = :counters.new(1, [])

    assert_raise RuntimeError, "broken", fn ->
      eventually(fn ->
        :counters.add(counter, 1, 1)
        raise "broken"
      end)
    end

    assert :counters.get(counter, 1) == 1
  end

  test "flunk: false returns false at the deadline; unknown options are refused" do
    refute eventually(fn -> false end, within: 10, flunk: false)

    assert_raise ArgumentError, ~r/unknown option :timeout/, fn ->
      eventually(fn -> true end, timeout: 10)
    end
  end
end
