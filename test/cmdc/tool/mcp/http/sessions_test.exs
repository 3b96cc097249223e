defmodule CMDC.Tool.MCP.HTTP.SessionsTest do
  # The 2025-era session table (issue 36 item 3): per-principal quotas, eviction of the least
  # recently used idle session instead of refusing the newcomer, ids bound to their principal,
  # idle times on a clock the test moves (no sleeps).
  use ExUnit.Case, async: true

  alias CMDC.Tool.MCP.HTTP.{Limits, Sessions}

  setup do
    {:ok, sessions: Sessions.new()}
  end

  test "a principal at its quota evicts its own least recently used session", %{sessions: s} do
    limits = Limits.new(max_sessions_per_principal: 3)
    ids = for t <- 1..3, do: elem(Sessions.open(s, "alice", :state, limits, t), 1)
    [first, second, third] = ids
    # The oldest is used again: the second is now the least recently used.
    assert {:ok, :state} = Sessions.fetch(s, first, "alice", limits, 10)
    assert {:ok, fourth} = Sessions.open(s, "alice", :state, limits, 11)
    assert :error = Sessions.fetch(s, second, "alice", limits, 12)

    for id <- [first, third, fourth],
        do: assert({:ok, _} = Sessions.fetch(s, id, "alice", limits, 13))

    assert Sessions.count(s, "alice") == 3
  end

  test "a flood by one principal never evicts another's sessions", %{sessions: s} do
    limits = Limits.new(max_sessions_per_principal: 50, max_sessions: 100)
    {:ok, bob} = Sessions.open(s, "bob", :bob, limits, 0)
    for t <- 1..5_000, do: {:ok, _} = Sessions.open(s, "mallory", :m, limits, t)
    assert Sessions.count(s, "mallory") == 50
    assert {:ok, :bob} = Sessions.fetch(s, bob, "bob", limits, 5_001)
    # And a newcomer still gets in.
    assert {:ok, _} = Sessions.open(s, "carol", :carol, limits, 5_002)
  end

  test "the server's bound evicts the least recently used idle session of anyone", %{sessions: s} do
    limits = Limits.new(max_sessions: 2)
    {:ok, a} = Sessions.open(s, "a", :a, limits, 1)
    {:ok, b} = Sessions.open(s, "b", :b, limits, 2)
    # `a` has a call in flight: not idle, so `b` goes.
    Sessions.busy(s, a, 1)
    assert {:ok, c} = Sessions.open(s, "c", :c, limits, 3)
    assert :error = Sessions.fetch(s, b, "b", limits, 4)
    assert {:ok, :a} = Sessions.fetch(s, a, "a", limits, 4)
    # Both left are busy: only then is a newcomer refused.
    Sessions.busy(s, c, 1)
    assert {:error, :full} = Sessions.open(s, "d", :d, limits, 5)
    Sessions.busy(s, c, -1)
    assert {:ok, _} = Sessions.open(s, "d", :d, limits, 6)
  end

  test "an id is its principal's only: another gets :error, and cannot end it", %{sessions: s} do
    limits = Limits.new()
    {:ok, id} = Sessions.open(s, "sub:alice", :state, limits, 0)
    assert :error = Sessions.fetch(s, id, "sub:mallory", limits, 1)
    assert :error = Sessions.delete(s, id, "sub:mallory")
    refute Sessions.member?(s, id, "sub:mallory", limits, 1)
    assert {:ok, :state} = Sessions.fetch(s, id, "sub:alice", limits, 2)
    assert :ok = Sessions.delete(s, id, "sub:alice")
    assert :error = Sessions.fetch(s, id, "sub:alice", limits, 3)
  end

  test "a session idle for session_idle_ms is gone, swept or not", %{sessions: s} do
    limits = Limits.new(session_idle_ms: 1_000)
    {:ok, kept} = Sessions.open(s, "p", :kept, limits, 0)
    {:ok, idle} = Sessions.open(s, "p", :idle, limits, 0)
    assert {:ok, :kept} = Sessions.fetch(s, kept, "p", limits, 900)
    assert :error = Sessions.fetch(s, idle, "p", limits, 1_000)
    assert Sessions.sweep(s, limits, 1_899) == 0
    assert Sessions.sweep(s, limits, 1_900) == 1
    assert Sessions.count(s, :all) == 0
  end

  test "the default idle time is ten minutes, not an hour" do
    assert Limits.new().session_idle_ms == 600_000
  end
end
