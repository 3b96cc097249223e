defmodule CMDC.Tool.MCP.SlotsTest do
  # The slot pool remote MCP tools live in (CMDC.Tool.MCP.Slots): what a freed slot keeps, and
  # the background purge beyond the warm pool. (A whole client of 2,000 tools, stopped twice:
  # test/cmdc/tool/mcp/hostile_test.exs.) Not async: it changes the pool's settings.
  use ExUnit.Case, async: false

  alias CMDC.Tool.MCP.{Remote, Slots}
  alias CMDC.Tool.Native

  setup do
    on_exit(fn ->
      Application.put_env(:cmdc_tool, :mcp_slot_linger_ms, 0)
      Application.delete_env(:cmdc_tool, :mcp_warm_slots)
    end)
  end

  test "a freed slot keeps no data and no stored validator" do
    {:ok, [slot]} = Slots.assign([{nil, %{name: "x"}}], 20_000, Remote)
    {:ok, compiled} = CMDC.Tool.Schema.compile(%{"type" => "object"})
    md5 = :erlang.get_module_info(slot, :md5)
    {:ok, _} = Native.module_schema_put(slot, :parameters, md5, {:ok, compiled})
    assert {:ok, _} = Native.module_schema(slot, :parameters, md5)
    assert Slots.lookup(slot) == %{name: "x"}

    :ok = Slots.release([slot])
    assert Slots.lookup(slot) == nil
    assert Native.module_schema(slot, :parameters, md5) == nil
  end

  # Earlier tests' free slots are left alone (purging thousands takes a loaded machine
  # minutes: each purge waits for a code barrier): the warm pool is set just above them, and
  # this test's own slots beyond it are the ones purged.
  @tag timeout: 300_000
  test "free slots beyond the warm pool are purged once they lingered; names are reused" do
    Application.put_env(:cmdc_tool, :mcp_slot_linger_ms, 500)
    stats = Slots.stats()
    leftover = stats.loaded - stats.in_use
    Application.put_env(:cmdc_tool, :mcp_warm_slots, leftover + 2)

    n = leftover + 10
    {:ok, slots} = Slots.assign(for(i <- 1..n, do: {nil, %{i: i}}), 60_000, Remote)
    made = Slots.stats().made
    {:ok, _} = Native.module_schema_put(hd(slots), :parameters, <<>>, {:error, "x"})
    :ok = Slots.release(slots)
    # Within the linger they stay loaded (a relisting server would take them back).
    assert Enum.all?(slots, &:erlang.module_loaded/1)

    assert Slots.settle(240_000) == :ok
    assert Enum.count(slots, &:erlang.module_loaded/1) <= leftover + 2
    assert Slots.stats().loaded <= Slots.stats().in_use + leftover + 2

    # Purged names are taken again before any new one is made: no new atom.
    atoms = :erlang.system_info(:atom_count)
    {:ok, again} = Slots.assign(for(i <- 1..10, do: {nil, %{i: i}}), 20_000, Remote)
    assert Slots.stats().made == made
    assert :erlang.system_info(:atom_count) == atoms
    :ok = Slots.release(again)
  end
end
