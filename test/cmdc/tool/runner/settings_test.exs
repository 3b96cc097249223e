defmodule CMDC.Tool.Runner.SettingsTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.Runner.{Permit, Settings}

  doctest Settings
  doctest Permit

  test "a registry's settings override the tool's own, with permission spellings normalized" do
    reg = CMDC.Tool.Registry.new()
    :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
    :ok = CMDC.Tool.Registry.put_settings(reg, "echo", %{"executionPolicy" => "ask-always"})

    assert %{policy: :ask_always} = Settings.for_tool(reg, CMDC.Tool.Examples.Echo, "echo")
    assert Settings.for_tool([CMDC.Tool.Examples.Echo], CMDC.Tool.Examples.Echo, "echo") == %{}
  end

  test "ask: headless is denied, an approver's answer is followed and passed the hook's reason" do
    ctx = %CMDC.Context{session_id: "permit-#{System.unique_integer()}"}
    assert {:error, %{reason: :denied}} = Permit.ask("t", %{}, "1", ctx, [], false)

    approver = fn request ->
      send(self(), {:asked, request})
      :allow
    end

    assert :ok = Permit.ask("t", %{}, "1", ctx, [approver: approver], false, "hook says ask")
    assert_received {:asked, %{tool: "t", reason: "hook says ask"}}
  end
end
