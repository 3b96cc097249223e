defmodule CMDC.Tool.TestTool do
  @moduledoc false
  defmacro __using__(opts) do
    quote do
      @behaviour CMDC.Tool
      def name, do: unquote(opts[:name])
      def description, do: unquote(opts[:description] || "A test tool.")
      def parameters, do: unquote(opts[:parameters] || Macro.escape(%{"type" => "object"}))
      defoverridable parameters: 0
    end
  end
end

defmodule CMDC.Tool.TestTools do
  @moduledoc false
  # Real tools for the runner tests.

  defmodule Sleep do
    use CMDC.Tool.TestTool, name: "sleep"
    def tool_options, do: [timeout_ms: 5_000]

    def execute(%{"ms" => ms}, _ctx) do
      Process.sleep(ms)
      {:ok, "slept #{ms}"}
    end
  end

  defmodule Raise do
    use CMDC.Tool.TestTool, name: "raise"
    def execute(_, _), do: raise("boom in #{__ENV__.file}")
  end

  defmodule Throw do
    use CMDC.Tool.TestTool, name: "throw"
    def execute(_, _), do: exit(:oops)
  end

  defmodule BadReturn do
    use CMDC.Tool.TestTool, name: "bad_return"
    def execute(_, _), do: :weird
  end

  defmodule Stream do
    use CMDC.Tool.TestTool, name: "stream"

    def execute(%{"n" => n}, ctx) do
      for i <- 1..n, do: CMDC.Context.update(ctx, "step #{i}")
      {:ok, "done #{n}"}
    end
  end

  defmodule Effect do
    use CMDC.Tool.TestTool, name: "effect"
    def execute(_, _), do: {:effect, {:sub_agent, %{answer: 42}}}
  end

  defmodule Spawner do
    use CMDC.Tool.TestTool, name: "spawner"

    def execute(%{"report_to" => pid_text}, _ctx) do
      pid = pid_text |> String.to_charlist() |> :erlang.list_to_pid()
      child = spawn_link(fn -> Process.sleep(:infinity) end)
      send(pid, {:child, child, self()})
      Process.sleep(:infinity)
    end
  end

  defmodule Big do
    use CMDC.Tool.TestTool, name: "big"
    def execute(_, _), do: {:ok, String.duplicate("é", 100_000)}
  end

  defmodule Fails do
    use CMDC.Tool.TestTool, name: "fails"
    def execute(_, _), do: {:error, "it did not work"}
  end

  defmodule Asker do
    use CMDC.Tool.TestTool, name: "asker"
    def tool_options, do: %{policy: :ask_once}
    def execute(_, _), do: {:ok, "approved and ran"}
  end

  defmodule AskAlways do
    use CMDC.Tool.TestTool, name: "guarded"
    def tool_options, do: [policy: :ask_always]
    def execute(_, _), do: {:ok, "ran"}
  end

  defmodule Forbidden do
    use CMDC.Tool.TestTool, name: "never"
    def tool_options, do: [policy: :deny]
    def execute(_, _), do: {:ok, "ran"}
  end

  defmodule Exclusive do
    use CMDC.Tool.TestTool, name: "exclusive"
    def tool_options, do: [exclusive: true]

    def execute(%{"log" => log}, _ctx) do
      Agent.update(String.to_atom(log), &[{:exclusive_start, System.monotonic_time()} | &1])
      Process.sleep(50)
      Agent.update(String.to_atom(log), &[{:exclusive_end, System.monotonic_time()} | &1])
      {:ok, "x"}
    end
  end

  defmodule Logged do
    use CMDC.Tool.TestTool, name: "logged"

    def execute(%{"log" => log}, _ctx) do
      Agent.update(String.to_atom(log), &[{:start, System.monotonic_time()} | &1])
      Process.sleep(50)
      Agent.update(String.to_atom(log), &[{:end, System.monotonic_time()} | &1])
      {:ok, "l"}
    end
  end

  defmodule Aborter do
    use CMDC.Tool.TestTool, name: "aborter"
    def execute(_, ctx), do: CMDC.Context.abort(ctx, "user pressed stop")
  end

  defmodule Lifecycle do
    use CMDC.Tool.TestTool, name: "lifecycle"
    def execute(_, _), do: {:ok, ""}
    def on_session(event, ctx), do: send(ctx.assigns.test, {:session, event})
  end

  defmodule BadLifecycle do
    use CMDC.Tool.TestTool, name: "bad_lifecycle"
    def execute(_, _), do: {:ok, ""}
    def on_session(_event, _ctx), do: raise("lifecycle bug")
  end
end

defmodule CMDC.Tool.TestTools.Report do
  @moduledoc false
  # Tools that report to a registered process on another node: pids as text do not cross nodes.
  use CMDC.Tool.TestTool,
    name: "report",
    parameters: %{
      "type" => "object",
      "properties" => %{
        "to" => %{"type" => "string"},
        "at" => %{"type" => "string"},
        "ms" => %{"type" => "integer"}
      },
      "required" => ["to", "at"]
    }

  def execute(%{"to" => to, "at" => at} = args, ctx) do
    dest = {String.to_atom(to), String.to_atom(at)}
    child = spawn_link(fn -> Process.sleep(:infinity) end)
    send(dest, {:remote_started, node(), self(), child})
    CMDC.Context.update(ctx, "working on #{node()}")
    Process.sleep(Map.get(args, "ms", 0))
    {:ok, "done on #{node()}"}
  end
end

defmodule CMDC.Tool.TestTools.Shell do
  @moduledoc false
  # Starts a real OS process (a sleep in its own process group) and waits for it.
  use CMDC.Tool.TestTool, name: "shell"

  def execute(%{"to" => to}, _ctx) do
    {:ok, exec} = CMDC.Tool.Exec.start("sh", ["-c", "sleep 60 & sleep 60; wait"])

    receive do
      {:cmdc_exec, id, {:started, os_pid}} when id == exec.id ->
        send(:erlang.list_to_pid(String.to_charlist(to)), {:os_started, os_pid})
    end

    {:ok, result} = CMDC.Tool.Exec.await(exec)
    {:ok, inspect(result.status)}
  end
end
