defmodule CMDC.Tool.Pending.ResolveTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.Runner
  alias CMDC.Tool.Examples.Echo

  doctest CMDC.Tool.Pending.Resolve

  setup do
    %{ctx: %CMDC.Context{session_id: "resolve-#{System.unique_integer([:positive])}"}}
  end

  defp call(id, name, args), do: %{id: id, name: name, arguments: args}

  test "discard runs the discard function; an unknown id names the pending ones", %{ctx: ctx} do
    test = self()

    {:ok, a} =
      CMDC.Context.push_pending_action(ctx,
        label: "a",
        apply: fn _ -> :ok end,
        discard: &send(test, {:discarded, &1})
      )

    {:ok, _b} = CMDC.Context.push_pending_action(ctx, label: "b", apply: fn _ -> :ok end)

    r = Runner.run([Echo], call("1", "resolve", %{"id" => "pa_0", "action" => "apply"}), ctx)
    assert r.reason == :tool_error and r.content =~ "no pending action pa_0; pending: #{a} (a), "

    r =
      Runner.run(
        [Echo],
        call("2", "resolve", %{"id" => a, "action" => "discard", "reason" => "not needed"}),
        ctx
      )

    assert r.content == "discarded #{a}: a"
    assert_received {:discarded, "not needed"}

    r = Runner.run([Echo], call("3", "resolve", %{"id" => a, "action" => "maybe"}), ctx)
    assert r.reason == :invalid
  end

  test "apply answers the action's own error, and an unexpected return names the action", %{
    ctx: ctx
  } do
    {:ok, a} =
      CMDC.Context.push_pending_action(ctx, label: "a", apply: fn _ -> {:error, "disk full"} end)

    {:ok, b} = CMDC.Context.push_pending_action(ctx, label: "b", apply: fn _ -> :what end)

    apply = fn id ->
      Runner.run([Echo], call(id, "resolve", %{"id" => id, "action" => "apply"}), ctx)
    end

    r = apply.(a)
    assert {r.content, r.reason} == {"disk full", :tool_error}

    assert apply.(b).content == "applying b returned :what"
  end
end
