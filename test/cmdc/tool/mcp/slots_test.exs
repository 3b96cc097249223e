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

  # The free slots earlier tests left are purged first (each purge waits for a code barrier:
  # thousands take a loaded machine minutes).
  @tag timeout: 600_000
  test "free slots beyond the warm pool are purged once they lingered; names are reused" do
    Application.put_env(:cmdc_tool, :mcp_slot_linger_ms, 500)
    Application.put_env(:cmdc_tool, :mcp_warm_slots, 2)
    assert Slots.settle(300_000) == :ok

    {:ok, slots} = Slots.assign(for(i <- 1..10, do: {nil, %{i: i}}), 20_000, Remote)
    made = Slots.stats().made
    {:ok, _} = Native.module_schema_put(hd(slots), :parameters, <<>>, {:error, "x"})
    :ok = Slots.release(slots)
    # Within the linger they stay loaded (a relisting server would take them back).
    assert Enum.all?(slots, &:erlang.module_loaded/1)

    assert Slots.settle(300_000) == :ok
    assert Enum.count(slots, &:erlang.module_loaded/1) <= 2
    assert Slots.stats().loaded <= Slots.stats().in_use + 2

    # Purged names are taken again before any new one is made: no new atom.
    atoms = :erlang.system_info(:atom_count)
    {:ok, again} = Slots.assign(for(i <- 1..10, do: {nil, %{i: i}}), 20_000, Remote)
    assert Slots.stats().made == made
    assert :erlang.system_info(:atom_count) == atoms
    assert Enum.all?(again, &(&1.__stamp__() == :cmdc_stamp_bare))
    :ok = Slots.release(again)
  end
end
