defmodule CMDC.Tool.Hooks.Background do
  @moduledoc """
  Command hooks marked `async` or `asyncRewake` (Claude Code's background hooks): they start
  with their event and never hold it up; the call, prompt or stop goes on at once.

  When one finishes, what it said becomes a *report* for its session (the context's
  `session_id`; `nil` is a session too):

    * `async`: its `additionalContext` and `systemMessage` (exit 0 with JSON), as Claude Code
      delivers them on the next turn;
    * `asyncRewake`: the same, and when it exits with status 2 its stderr (its findings),
      after its `rewakeMessage`; `rewake: true` marks it as a reason to wake the agent.
    * a failure (a status other than 0 and 2, its time-out): an `:error` note.

  Reports reach the session in two ways: the next result `CMDC.Tool.Runner` returns for the
  session carries them (context appended to its content, messages and errors in `:notes`), and
  `CMDC.Tool.Hooks.event/3` returns them in `:reports`. An agent loop that waits for the user
  can `subscribe/1` and is sent `{:cmdc_tool_hook_report, session_id, report}` as each
  background hook ends (a report without context, message or error too: it says the hook is
  done), so a rewake report can wake it.

  A background hook runs under its time-out (killed with its process group), unlinked from the
  caller: a caller that exits does not stop it, and it never takes the caller down.
  """

  require Logger

  alias CMDC.Tool.Hooks.{Command, Events, Hook}

  @table :cmdc_tool_hook_reports

  @type report :: %{
          hook: String.t(),
          event: atom(),
          rewake: boolean(),
          summary: String.t() | nil,
          context: String.t() | nil,
          message: String.t() | nil,
          error: String.t() | nil
        }

  @doc false
  def child_spec(_), do: %{id: __MODULE__, start: {__MODULE__, :start_link, []}}

  @doc false
  def start_link, do: CMDC.Tool.Table.start_link(__MODULE__, @table, :duplicate_bag)

  @doc "Starts `hook` for `event` in the background (see `CMDC.Tool.Hooks.Dispatch` for `input`)."
  @spec start(Hook.t(), atom(), map()) :: :ok
  def start(%Hook{} = hook, event, input) do
    used()

    spawn(fn ->
      verdict =
        try do
          Command.run(hook, event, input)
        rescue
          e -> %CMDC.Tool.Hooks.Verdict{hook: hook.label, error: Exception.message(e)}
        end

      finish(input, report(hook, event, verdict))
    end)

    :ok
  end

  @doc false
  # The report of a background hook's verdict (also for a hook that went to the background on
  # its own, `CMDC.Tool.Hooks.Command.run/4`).
  def report(hook, event, verdict) do
    rewake = hook.async == :rewake
    # Exit status 2: the hook's findings (for a tool event read as a deny, a block or context).
    findings = verdict.block || (verdict.decision == :deny && verdict.reason) || nil

    context =
      [
        verdict.context,
        if(findings && rewake, do: join(hook.rewake[:message], findings))
      ]
      |> Enum.reject(&(&1 in [nil, ""]))
      |> case do
        [] -> nil
        texts -> Enum.join(texts, "\n\n")
      end

    %{
      hook: hook.label,
      event: event,
      rewake: rewake and findings != nil,
      summary: if(rewake and findings, do: hook.rewake[:summary]),
      context: context,
      message: verdict.message,
      error: verdict.error && "#{Events.name(event)} (background): #{verdict.error}"
    }
  end

  defp join(nil, text), do: text
  defp join(message, text), do: message <> "\n\n" <> text

  @doc false
  # Keeps the report for the session of `input` and tells its subscribers.
  def finish(input, report) do
    session =
      case input do
        %{context: %{session_id: id}} -> id
        _ -> nil
      end

    if report.context || report.message || report.error do
      :ets.insert(@table, {{:report, session}, System.unique_integer([:monotonic]), report})
    end

    for {_, pid, _} <- :ets.lookup(@table, {:subscriber, session}),
        do: send(pid, {:cmdc_tool_hook_report, session, report})
  rescue
    # The application is not running (a script using the runner bare): the report is logged.
    ArgumentError -> Logger.info("cmdc_tool: background hook #{report.hook}: #{inspect(report)}")
  end

  @doc false
  # Set once per VM (a persistent_term write is costly, a read is not): until the first
  # background hook, `take/1` reads nothing.
  def used do
    unless :persistent_term.get({__MODULE__, :used}, false),
      do: :persistent_term.put({__MODULE__, :used}, true)
  end

  @doc "Takes (and removes) the reports waiting for a session, oldest first."
  @spec take(term()) :: [report()]
  def take(session) do
    if :persistent_term.get({__MODULE__, :used}, false), do: take_reports(session), else: []
  end

  defp take_reports(session) do
    @table
    |> :ets.take({:report, session})
    |> Enum.sort_by(&elem(&1, 1))
    |> Enum.map(&elem(&1, 2))
  rescue
    ArgumentError -> []
  end

  @doc """
  Sends the calling process `{:cmdc_tool_hook_report, session_id, report}` each time a
  background hook of the session ends (until `unsubscribe/1` or the process exits).
  """
  @spec subscribe(term()) :: :ok
  def subscribe(session) do
    me = self()
    row = {{:subscriber, session}, me, nil}

    unless row in :ets.lookup(@table, {:subscriber, session}) do
      :ets.insert(@table, row)

      # A subscriber that dies is removed by a watcher, so the table never keeps dead pids.
      spawn(fn ->
        ref = Process.monitor(me)

        receive do
          {:DOWN, ^ref, :process, _, _} -> :ets.delete_object(@table, row)
        end
      end)
    end

    :ok
  end

  @doc "Stops `subscribe/1`'s messages for the calling process."
  @spec unsubscribe(term()) :: :ok
  def unsubscribe(session) do
    :ets.delete_object(@table, {{:subscriber, session}, self(), nil})
    :ok
  end
end
