defmodule CMDC.Tool.TestTimes do
  @moduledoc """
  An ExUnit formatter that prints, at the end of a run, the slowest test modules (wall time
  from `:module_started` to `:module_finished`, so `setup_all` and the waits between tests
  count) and the slowest tests.

  Enabled by `CMDC_TEST_TIMES=1` (`test/test_helper.exs`), next to the usual CLI formatter:
  unlike `mix test --slowest`, it does not make the run synchronous, so the figures are those of
  a normal run. `CMDC_TEST_TIMES=50` prints the 50 slowest of each; `CMDC_TEST_TIMES_FILE=path`
  also writes every module's and test's time as tab-separated lines (for before/after diffs).
  """
  use GenServer

  @default_count 30

  @doc "The formatters `test_helper.exs` starts ExUnit with, from `CMDC_TEST_TIMES`."
  @spec formatters() :: [module()]
  def formatters do
    case System.get_env("CMDC_TEST_TIMES") do
      value when value in [nil, "", "0"] -> [ExUnit.CLIFormatter]
      _ -> [ExUnit.CLIFormatter, __MODULE__]
    end
  end

  @impl true
  def init(_opts) do
    count =
      case Integer.parse(System.get_env("CMDC_TEST_TIMES", "")) do
        {n, ""} when n > 1 -> n
        _ -> @default_count
      end

    {:ok, %{count: count, started: %{}, modules: [], tests: [], t0: now()}}
  end

  @impl true
  def handle_cast({:module_started, %{name: name}}, state),
    do: {:noreply, put_in(state.started[name], now())}

  def handle_cast({:module_finished, %{name: name, tests: tests}}, state) do
    {t0, started} = Map.pop(state.started, name, state.t0)
    row = {now() - t0, inspect(name), length(tests)}
    {:noreply, %{state | started: started, modules: [row | state.modules]}}
  end

  def handle_cast({:test_finished, %ExUnit.Test{} = test}, state) do
    row = {div(test.time, 1000), "#{inspect(test.module)} #{test.name}", test.state}
    {:noreply, %{state | tests: [row | state.tests]}}
  end

  def handle_cast({:suite_finished, _times}, state) do
    report(state)
    {:noreply, state}
  end

  def handle_cast(_event, state), do: {:noreply, state}

  defp report(state) do
    modules = Enum.sort_by(state.modules, &elem(&1, 0), :desc)
    tests = Enum.sort_by(state.tests, &elem(&1, 0), :desc)

    IO.puts("\n== CMDC_TEST_TIMES: #{state.count} slowest modules (wall ms, tests) ==")
    for {ms, name, n} <- Enum.take(modules, state.count), do: IO.puts(row(ms, "#{name} (#{n})"))
    IO.puts("== #{state.count} slowest tests (ms) ==")
    for {ms, name, _} <- Enum.take(tests, state.count), do: IO.puts(row(ms, name))
    IO.puts("== whole run: #{now() - state.t0} ms ==")
    write_file(System.get_env("CMDC_TEST_TIMES_FILE"), modules, tests)
  end

  defp row(ms, text), do: String.pad_leading(Integer.to_string(ms), 8) <> "  " <> text

  defp write_file(nil, _modules, _tests), do: :ok

  defp write_file(path, modules, tests) do
    lines =
      Enum.map(modules, fn {ms, name, _} -> ["module\t", name, "\t", to_string(ms), "\n"] end) ++
        Enum.map(tests, fn {ms, name, _} -> ["test\t", name, "\t", to_string(ms), "\n"] end)

    File.write!(path, lines)
  end

  defp now, do: System.monotonic_time(:millisecond)
end
