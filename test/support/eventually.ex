defmodule CMDC.Tool.Eventually do
  @moduledoc """
  The suite's one way to wait for something that happens outside the test process: an OS
  process ending, a file appearing, a server listening, a node seeing a registration.

  `eventually/2` calls a function until it returns a truthy value (or stops raising an
  `ExUnit.AssertionError`) and returns that value. Between tries it backs off from 5 ms to
  100 ms. The deadline (`:within`, 30 s by default) only bounds a hang: a test never relies on
  it passing quickly, so a machine busy with other builds makes the test slower, not red.
  What a test can receive as a message (a monitor's `:DOWN`, a port's data, telemetry) it
  waits for with `assert_receive`, not with this.

      iex> import CMDC.Tool.Eventually
      iex> counter = :counters.new(1, [])
      iex> eventually(fn -> :counters.add(counter, 1, 1) == :ok and :counters.get(counter, 1) >= 3 end)
      true

      iex> import CMDC.Tool.Eventually
      iex> eventually(fn -> false end, within: 20, flunk: false)
      false
  """

  import ExUnit.Assertions, only: [flunk: 1]

  @within 30_000
  @first_pause 5
  @max_pause 100

  @doc """
  Calls `fun` until it returns a truthy value, which is returned. A `fun` that raises
  `ExUnit.AssertionError` (an `assert` inside it) is tried again too, and its last error is
  what the test reports at the deadline.

  Options: `:within` (ms, default #{@within}): the deadline; `:message`: what the failure
  says, a string or a function returning one, called at the deadline (default: the last
  value `fun` returned); `flunk: false`: return `false` at the
  deadline instead of failing the test (for helpers that report a failure their own way).
  """
  @spec eventually((() -> result), keyword()) :: result | false when result: term()
  def eventually(fun, opts \\ []) when is_function(fun, 0) and is_list(opts) do
    CMDC.Tool.Options.check!(opts, [:within, :message, :flunk], "eventually/2")
    within = Keyword.get(opts, :within, @within)
    deadline = System.monotonic_time(:millisecond) + within
    try_until(fun, deadline, @first_pause, Map.new(opts) |> Map.put(:within, within))
  end

  defp try_until(fun, deadline, pause, opts) do
    outcome =
      try do
        {:value, fun.()}
      rescue
        error in ExUnit.AssertionError -> {:assertion, error, __STACKTRACE__}
      end

    case outcome do
      {:value, value} when value not in [nil, false] ->
        value

      _ ->
        if System.monotonic_time(:millisecond) >= deadline do
          give_up(outcome, opts)
        else
          Process.sleep(pause)
          try_until(fun, deadline, min(pause * 2, @max_pause), opts)
        end
    end
  end

  defp give_up(_outcome, %{flunk: false}), do: false

  defp give_up({:assertion, error, stacktrace}, %{message: message}),
    do: reraise(%{error | message: "#{text(message)}\n#{error.message}"}, stacktrace)

  defp give_up({:assertion, error, stacktrace}, _opts), do: reraise(error, stacktrace)

  defp give_up({:value, _}, %{message: message, within: within}),
    do: flunk("not within #{within} ms: #{text(message)}")

  defp give_up({:value, value}, %{within: within}),
    do: flunk("the condition was still #{inspect(value)} after #{within} ms")

  defp text(message) when is_function(message, 0), do: message.()
  defp text(message), do: message
end
