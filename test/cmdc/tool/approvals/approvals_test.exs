defmodule CMDC.Tool.ApprovalsTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.Approvals

  test "the table's owner is a child of the application's supervisor, there from boot" do
    children = Supervisor.which_children(CMDC.Tool.Supervisor)
    assert {CMDC.Tool.Approvals, pid, :worker, _} = List.keyfind(children, CMDC.Tool.Approvals, 0)
    assert :ets.info(:cmdc_tool_approvals, :owner) == pid
  end

  test "approvals are per session and survive the process that made them" do
    key = {"s-#{System.unique_integer()}", "echo"}
    task = Task.async(fn -> CMDC.Tool.Approvals.remember(key) end)
    :ok = Task.await(task)
    assert CMDC.Tool.Approvals.approved?(key)
    refute CMDC.Tool.Approvals.approved?({"other", "echo"})
    :ok = CMDC.Tool.Approvals.forget(elem(key, 0))
    refute CMDC.Tool.Approvals.approved?(key)
  end
end
