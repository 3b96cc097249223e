defmodule CMDC.Tool.Native.BacktrackTest do
  # Backtracking pattern matches run on the native library's low-priority threads
  # (native/cmdc_tool_nif/src/backtrack.rs), the caller waiting for their message: the same
  # answers as the dirty call, nothing left behind by a caller that dies, a full queue served.
  # Not async: the counters are global to the library.
  use ExUnit.Case, async: false

  alias CMDC.Tool.{Native, Schema}

  @pattern "^(a*)*\\1b$"

  setup do
    %{schema: Schema.compile!(%{"type" => "string", "pattern" => @pattern})}
  end

  defp counts do
    {queued, ran, dropped} = Native.backtrack_counts()
    %{queued: queued, ran: ran, dropped: dropped}
  end

  # Every task queued so far has been run or dropped.
  defp drained do
    Enum.reduce_while(1..500, counts(), fn _, _ ->
      c = counts()
      if c.queued == c.ran + c.dropped, do: {:halt, c}, else: {:cont, Process.sleep(10)}
    end)
  end

  test "the answer arrives by message from a queued task, the same as the dirty call's", %{
    schema: schema
  } do
    hostile = String.duplicate("a", 30)
    before = drained()
    assert {:error, [failure]} = Schema.validate(schema, hostile)
    assert {:ok, "aab"} = Schema.validate(schema, "aab")
    after_ = drained()
    assert after_.queued - before.queued >= 2
    assert after_.ran - before.ran >= 2

    # The same failure as the dirty scheduler's: pattern, its limit named.
    assert {:error, [^failure]} = Native.schema_validate_dirty(schema, hostile)
    assert failure.keyword == "pattern"
    assert failure.message =~ "backtracking steps"

    # The message itself: {reference, result}, to this process.
    ref = make_ref()
    assert {:ok, ticket} = Native.schema_validate_queued(schema, "aab", ref)
    assert_receive {^ref, {:ok, "aab"}}, 5_000
    # Answered: cancelling is too late, and says so.
    assert Native.schema_validate_cancel(ticket) == :sent
  end

  test "a value valid in place keeps its identity; inside objects the path is kept" do
    schema =
      Schema.compile!(%{
        "type" => "object",
        "properties" => %{"s" => %{"pattern" => @pattern}},
        "required" => ["s"]
      })

    args = %{"s" => "aab", "n" => 1}
    assert {:ok, result} = Schema.validate(schema, args)
    assert :erts_debug.same(result, args)

    assert {:error, [%{path: "/s", keyword: "pattern"}]} =
             Schema.validate(schema, %{"s" => String.duplicate("a", 30)})

    # Lists decided a slice at a time hand an undecided list to the same path.
    list_schema = Schema.compile!(%{"items" => %{"pattern" => @pattern}})

    assert {:error, [%{path: "/1", keyword: "pattern"}]} =
             Schema.validate(list_schema, ["aab", String.duplicate("a", 30)])
  end

  test "a caller killed while its tasks wait leaves no work behind", %{schema: schema} do
    hostile = String.duplicate("a", 30)
    before = drained()
    parent = self()

    caller =
      spawn(fn ->
        # More tasks than the threads take at once (~0.4 ms each): most still wait when killed.
        tickets = for _ <- 1..40, do: Native.schema_validate_queued(schema, hostile, make_ref())
        send(parent, :queued)
        Process.sleep(:infinity)
        tickets
      end)

    assert_receive :queued, 5_000
    Process.exit(caller, :kill)
    after_ = drained()
    queued = after_.queued - before.queued
    assert queued > 0
    assert after_.dropped - before.dropped > 0
    assert after_.ran - before.ran + (after_.dropped - before.dropped) == queued
  end

  test "a cancelled task is never answered; a dropped ticket cancels too", %{schema: schema} do
    hostile = String.duplicate("a", 30)
    before = drained()
    refs = for _ <- 1..30, do: make_ref()
    tickets = for ref <- refs, do: Native.schema_validate_queued(schema, hostile, ref)
    settled = for {:ok, ticket} <- tickets, do: Native.schema_validate_cancel(ticket)
    assert :cancelled in settled
    after_ = drained()
    sent = Enum.count(settled, &(&1 == :sent))
    assert after_.ran - before.ran == sent
    assert after_.dropped - before.dropped == length(settled) - sent
    answered = for ref <- refs, do: receive(do: ({^ref, _} -> ref), after: (0 -> nil))
    assert Enum.count(answered, & &1) == sent

    # A ticket let go of (garbage collected) cancels its task: these go unanswered.
    before = drained()
    _ = for _ <- 1..30, do: Native.schema_validate_queued(schema, hostile, make_ref())
    :erlang.garbage_collect()
    after_ = drained()
    assert after_.dropped - before.dropped > 0
  end

  test "a full queue answers :busy at once and Schema.validate/2 still answers", %{
    schema: schema
  } do
    hostile = String.duplicate("a", 30)
    parent = self()

    caller =
      spawn(fn ->
        answers = for _ <- 1..200, do: Native.schema_validate_queued(schema, hostile, make_ref())
        send(parent, {:answers, Enum.map(answers, &elem(&1, 0))})
        # Callers racing a full queue take the dirty call: the same answer.
        send(parent, {:validated, Schema.validate(schema, hostile)})
        Process.sleep(:infinity)
      end)

    assert_receive {:answers, answers}, 5_000
    assert :error in answers
    assert :ok in answers
    assert_receive {:validated, {:error, [%{keyword: "pattern"}]}}, 10_000
    Process.exit(caller, :kill)
    drained()
  end

  test "concurrent callers each get their own answer" do
    schema = Schema.compile!(%{"type" => "string", "pattern" => @pattern})

    results =
      1..20
      |> Task.async_stream(
        fn i ->
          if rem(i, 2) == 0,
            do: Schema.validate(schema, String.duplicate("a", 30)),
            else: Schema.validate(schema, "aab")
        end,
        max_concurrency: 20
      )
      |> Enum.map(fn {:ok, r} -> r end)

    for {r, i} <- Enum.with_index(results, 1) do
      if rem(i, 2) == 0,
        do: assert({:error, [%{keyword: "pattern"}]} = r),
        else: assert({:ok, _} = r)
    end
  end
end
