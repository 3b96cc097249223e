defmodule CMDC.Tool.Exec do
  @moduledoc """
  Runs external programs for tools (the seeds' `exec(command, args, {signal, cwd})`), natively
  (mirrors `native/cmdc_tool_nif/src/exec.rs` and `native/cmdc_tool_core/src/exec/`).

  No shell is involved: `cmd` is a program name looked up on `PATH` (or a path) and `args` are
  passed as they are. The program runs on the NIF's tokio runtime in its own process group;
  the calling process gets messages, so no scheduler ever blocks.

    * A time-out or a cancellation kills the **whole process group** (everything the program
      started): SIGTERM first, SIGKILL after `:kill_after` ms. The program is always reaped.
    * When the program exits, whatever it left running in its group is killed too.
    * The program is also killed when the process that started it dies (for a tool, when the
      runner stops it) or when the handle is garbage collected; on Linux, also when the whole
      VM dies (`PR_SET_PDEATHSIG`; this one reaches the program, not what it started).
    * stdout and stderr are kept up to `:max_output` bytes each; the rest is read and dropped,
      so a flood never blocks the program. stdout lines can be streamed while it runs.
    * Streamed lines can flow under a credit window (`:window`): at most that many `:line` /
      `:stderr_line` messages wait for the owner, who returns credits with `ack/2` as it
      consumes them. While none are left, stdout is not read, so the program blocks on its next
      write (its memory, not the VM's, holds the backlog); stderr lines without a credit are
      dropped and counted (`{:cmdc_exec, id, {:stderr_dropped_lines, n}}`), so a noisy log
      never holds stdout back. Lines still waiting for a credit half a second after the program
      exited are lost. Without `:window` (the default) lines stream as fast as they come.

  Errors: `{:error, message}` (a binary) from every function that can fail: a program that
  cannot start, a missing working folder, a write to a closed stdin. A program that runs and
  fails is not an error: it is `{:ok, %Result{status: :exited, code: code}}`.

  Processes that leave the group on purpose (`setsid`, daemons) escape the kill, and killed
  grandchildren are reaped by the system's init (in a container without an init they stay
  zombies until its PID 1 reaps them).

      iex> {:ok, result} = CMDC.Tool.Exec.run("sh", ["-c", "echo hi; exit 3"])
      iex> {result.status, result.code, result.stdout}
      {:exited, 3, "hi\\n"}

      iex> CMDC.Tool.Exec.run("no-such-program-cmdc", [])
      {:error, "executable not found: no-such-program-cmdc (not on PATH)"}
  """

  alias CMDC.Tool.Native
  require Native

  defmodule Result do
    @moduledoc """
    How a program ended.

      * `:status` - `:exited` (on its own, `:code` or `:signal` says how), `:timeout` or
        `:cancelled` (the group was killed; `:signal` says with what).
      * `:code` - the exit code when it exited normally, else `nil`.
      * `:signal` - the signal number that ended it, else `nil`.
      * `:killed` - `true` when this module killed it (time-out or cancellation).
      * `:stdout`, `:stderr` - the output kept (binaries, not necessarily UTF-8).
      * `:stdout_truncated`, `:stderr_truncated` - bytes read but dropped over `:max_output`.
      * `:duration_us`, `:os_pid`.
    """
    @type t :: %__MODULE__{
            status: :exited | :timeout | :cancelled,
            code: integer() | nil,
            signal: integer() | nil,
            killed: boolean(),
            stdout: binary(),
            stderr: binary(),
            stdout_truncated: non_neg_integer(),
            stderr_truncated: non_neg_integer(),
            duration_us: non_neg_integer(),
            os_pid: non_neg_integer()
          }
    defstruct status: :exited,
              code: nil,
              signal: nil,
              killed: false,
              stdout: "",
              stderr: "",
              stdout_truncated: 0,
              stderr_truncated: 0,
              duration_us: 0,
              os_pid: 0
  end

  @typedoc "A running program started by `start/3`; only its owner receives its messages."
  @type t :: %__MODULE__{
          id: pos_integer(),
          handle: reference(),
          owner: pid(),
          on_line: term(),
          on_stderr_line: term(),
          window: pos_integer() | nil
        }
  defstruct [:id, :handle, :owner, :on_line, :on_stderr_line, :window]

  @options [
    :stdin,
    :cwd,
    :env,
    :clear_env,
    :timeout,
    :kill_after,
    :max_output,
    :on_line,
    :context,
    :max_line,
    :stream_lines,
    :stream_stderr,
    :on_stderr_line,
    :window,
    :window_bytes,
    :kill_strays
  ]

  @doc """
  Runs a program to its end and returns `{:ok, %CMDC.Tool.Exec.Result{}}` (whatever its exit
  status), or `{:error, message}` when it could not be started (missing executable, missing
  working directory...).

  Options:
    * `:cwd` - working directory (default: the `:context`'s `working_dir`, else the VM's).
    * `:env` - a map or list of `{name, value}`; a `nil` value removes the variable.
    * `:clear_env` - start from an empty environment (default `false`). Inside `cmdc-mcp`,
      `CMDC_MCP_SERVER` is always set (`CMDC.Tool.MCP.SelfGuard`).
    * `:stdin` - binary written to the program's stdin, then closed (default: `/dev/null`);
      `:pipe` (with `start/3`) keeps it open for `write/2` and `close_stdin/1`: a long-lived
      conversation such as a protocol server, whose stdout lines then stream past `:max_output`.
    * `:timeout` - milliseconds, or `:infinity` (default).
    * `:kill_after` - milliseconds between SIGTERM and SIGKILL (default 2000).
    * `:max_output` - bytes kept of stdout and of stderr each (default 1_000_000).
    * `:on_line` - a function called with each stdout line (a binary, without `\\n`) as it comes,
      in the calling process. Only the first `:max_output` bytes are streamed (the last line
      streamed may be cut there).
    * `:context` - a `t:CMDC.Context.t/0`: each stdout line becomes a streamed partial result
      through `CMDC.Context.update/2`, and its `working_dir` is the default `:cwd`.
    * `:max_line` - longer stdout lines are streamed in pieces of this many bytes (default 16384).
    * `:stream_lines` - `true` sends each stdout line to the owner as
      `{:cmdc_exec, id, {:line, binary}}` (implied by `:on_line` and `:context`).
    * `:stream_stderr` - `true` sends each stderr line to the owner as
      `{:cmdc_exec, id, {:stderr_line, binary}}` (`await/1` hands them to `:on_stderr_line`).
    * `:on_stderr_line` - a function called with each stderr line in `await/1` (implies
      `:stream_stderr`).
    * `:window` - a positive integer: flow control of the streamed lines (see above); the owner
      calls `ack/2` (`await/1` does it for the lines it handles). Default `nil`: none.
    * `:window_bytes` - with `:window`, also bound the bytes of the lines waiting (default
      16 MiB; one longer line still passes when nothing else waits).
    * `:kill_strays` - `true`: once the program has ended (exit, time-out or cancel), kill
      every process it left running, even one that left its group (`setsid daemon &`) and was
      re-parented: each carries the run's marker (`CMDC_EXEC_RUN`) in its environment. For
      one-shot commands such as hooks; default `false` (a command may start a service on
      purpose).

      iex> {:ok, r} = CMDC.Tool.Exec.run("cat", [], stdin: "from stdin")
      iex> r.stdout
      "from stdin"

      iex> {:ok, r} = CMDC.Tool.Exec.run("sleep", ["5"], timeout: 50)
      iex> {r.status, r.killed}
      {:timeout, true}
  """
  @spec run(String.t(), [String.Chars.t()], keyword()) :: {:ok, Result.t()} | {:error, String.t()}
  def run(cmd, args, opts \\ []) do
    with {:ok, exec} <- start(cmd, args, opts), do: await(exec)
  end

  @doc """
  Starts a program and returns at once with `{:ok, exec}`. The calling process is its owner:
  it receives the program's messages, so it must be the one calling `await/1`, and the program
  is killed when it dies. Takes the options of `run/3`.

      iex> {:ok, exec} = CMDC.Tool.Exec.start("sleep", ["5"])
      iex> :ok = CMDC.Tool.Exec.cancel(exec)
      iex> {:ok, r} = CMDC.Tool.Exec.await(exec)
      iex> r.status
      :cancelled
  """
  @spec start(String.t(), [String.Chars.t()], keyword()) :: {:ok, t()} | {:error, String.t()}
  def start(cmd, args, opts \\ []) when is_binary(cmd) and is_list(args) do
    CMDC.Tool.Options.check!(opts, @options, "CMDC.Tool.Exec.start/3 (and run/3)")
    context = Keyword.get(opts, :context)
    cwd = Keyword.get_lazy(opts, :cwd, fn -> context && context.working_dir end)

    native = %{
      program: cmd,
      args: Enum.map(args, &to_string/1),
      cwd: cwd && to_string(cwd),
      env: env(Keyword.get(opts, :env, [])),
      clear_env: Keyword.get(opts, :clear_env, false) == true,
      timeout_ms: timeout(Keyword.get(opts, :timeout, :infinity)),
      kill_grace_ms: non_neg(Keyword.get(opts, :kill_after, 2000), :kill_after),
      max_output: non_neg(Keyword.get(opts, :max_output, 1_000_000), :max_output),
      stream_lines:
        Keyword.has_key?(opts, :on_line) or context != nil or
          Keyword.get(opts, :stream_lines, false),
      max_line: non_neg(Keyword.get(opts, :max_line, 16_384), :max_line),
      interactive: Keyword.get(opts, :stdin) == :pipe,
      stream_stderr:
        Keyword.get(opts, :stream_stderr, false) == true or
          Keyword.has_key?(opts, :on_stderr_line),
      window: positive(Keyword.get(opts, :window), :window),
      window_bytes: positive(Keyword.get(opts, :window_bytes), :window_bytes),
      kill_strays: Keyword.get(opts, :kill_strays, false) == true
    }

    stdin =
      case Keyword.get(opts, :stdin) do
        nil -> nil
        :pipe -> nil
        data -> IO.iodata_to_binary(data)
      end

    on_line =
      case {Keyword.get(opts, :on_line), context} do
        {fun, _} when is_function(fun, 1) -> fun
        {nil, %CMDC.Context{} = ctx} -> &CMDC.Context.update(ctx, &1)
        {nil, nil} -> nil
      end

    # Copying a large stdin could hold a normal scheduler too long: the NIF yields to its twin.
    case Native.with_dirty(exec_start(native, stdin)) do
      {:ok, {handle, id}} ->
        {:ok,
         %__MODULE__{
           id: id,
           handle: handle,
           owner: self(),
           on_line: on_line,
           on_stderr_line: Keyword.get(opts, :on_stderr_line),
           window: native.window
         }}

      {:error, message} ->
        {:error, message}
    end
  end

  @doc """
  Waits for a program started by `start/3` (from its owner) and returns what `run/3` returns.
  The native side always sends a final message (the time-out is enforced there), so this never
  hangs past the program's time-out plus the kill grace.
  """
  @spec await(t()) :: {:ok, Result.t()} | {:error, String.t()}
  def await(%__MODULE__{id: id, owner: owner} = exec) do
    if owner != self() do
      raise ArgumentError, "CMDC.Tool.Exec.await/1 must be called by the process that started it"
    end

    receive do
      {:cmdc_exec, ^id, {:line, line}} ->
        if exec.on_line, do: exec.on_line.(line)
        credit(exec)
        await(exec)

      {:cmdc_exec, ^id, {:stderr_line, line}} ->
        if exec.on_stderr_line, do: exec.on_stderr_line.(line)
        credit(exec)
        await(exec)

      {:cmdc_exec, ^id, {:stderr_dropped_lines, _n}} ->
        await(exec)

      {:cmdc_exec, ^id, {:started, _os_pid}} ->
        await(exec)

      {:cmdc_exec, ^id, {:exit, map}} ->
        # Touch the handle so it stays alive (not collected, hence not killed) until here.
        _ = exec.handle
        {:ok, to_result(map)}

      {:cmdc_exec, ^id, {:error, message}} ->
        {:error, message}
    end
  end

  defp credit(%{window: nil}), do: :ok
  defp credit(exec), do: ack(exec, 1)

  @doc """
  Returns `n` credits to a program started with `:window`: its owner consumed `n` more `:line`
  / `:stderr_line` messages. More than it sent are ignored (the window never grows). Return
  the credits of every line consumed before waiting for more: with `:window_bytes`, a long
  line waits for the bytes of the lines before it, so credits held back can stall the run.

      iex> opts = [window: 1, stream_lines: true, stdin: :pipe]
      iex> {:ok, exec} = CMDC.Tool.Exec.start("sh", ["-c", "echo a; echo b; read x"], opts)
      iex> id = exec.id
      iex> receive do {:cmdc_exec, ^id, {:line, line}} -> line end
      "a"
      iex> receive do {:cmdc_exec, ^id, {:line, _}} -> :more after 200 -> :held end
      :held
      iex> :ok = CMDC.Tool.Exec.ack(exec, 1)
      iex> receive do {:cmdc_exec, ^id, {:line, line}} -> line end
      "b"

      iex> {:ok, exec} = CMDC.Tool.Exec.start("true", [])
      iex> CMDC.Tool.Exec.ack(exec, 1)
      {:error, "exec_ack: this program was not started with a window (the :window option)"}
  """
  @spec ack(t(), non_neg_integer()) :: :ok | {:error, String.t()}
  def ack(%__MODULE__{handle: handle}, n) do
    case Native.exec_ack(handle, n) do
      {:ok, _returned} -> :ok
      {:error, message} -> {:error, message}
    end
  end

  @doc """
  Kills a running program's process group (SIGTERM, then SIGKILL after the grace period).
  Its owner then receives the final message (`status: :cancelled`) through `await/1`.
  Cancelling a finished program does nothing. Any process may cancel.
  """
  @spec cancel(t()) :: :ok
  def cancel(%__MODULE__{handle: handle}), do: Native.exec_cancel(handle)

  @doc """
  Writes to the stdin of a program started with `stdin: :pipe` (queued natively and written in
  order, never blocking the caller). `{:error, message}` once stdin is closed or the program
  has ended.

      iex> {:ok, exec} = CMDC.Tool.Exec.start("cat", [], stdin: :pipe)
      iex> :ok = CMDC.Tool.Exec.write(exec, ["a", ?b, "\\n"])
      iex> :ok = CMDC.Tool.Exec.close_stdin(exec)
      iex> {:ok, r} = CMDC.Tool.Exec.await(exec)
      iex> r.stdout
      "ab\\n"
  """
  @spec write(t(), iodata()) :: :ok | {:error, String.t()}
  def write(%__MODULE__{handle: handle}, data) do
    case Native.with_dirty(exec_write(handle, IO.iodata_to_binary(data))) do
      {:ok, _bytes} -> :ok
      {:error, message} -> {:error, message}
    end
  end

  @doc """
  Kills every program started through this module that still runs, in any process, with
  everything it started (its process group and descendants that left it), and returns how many
  there were. For a host about to exit: `cancel/1` asks a run to stop and the VM may be gone
  before it has, while the kernel's parent-death signal reaches each program but not its
  children. Never call it where other parts of the VM still need their programs.
  """
  @spec kill_all() :: non_neg_integer()
  def kill_all, do: Native.exec_kill_all()

  @doc "Closes the stdin of a program started with `stdin: :pipe` (it reads end of file)."
  @spec close_stdin(t()) :: :ok
  def close_stdin(%__MODULE__{handle: handle}), do: Native.exec_close_stdin(handle)

  defp to_result(map) do
    %Result{
      status: map.status,
      code: map.code,
      signal: map.signal,
      killed: map.status in [:timeout, :cancelled],
      stdout: map.stdout,
      stderr: map.stderr,
      stdout_truncated: map.stdout_dropped,
      stderr_truncated: map.stderr_dropped,
      duration_us: map.duration_us,
      os_pid: map.os_pid
    }
  end

  defp env(env) when is_map(env) or is_list(env) do
    Enum.map(env, fn {k, v} -> {to_string(k), v && to_string(v)} end) ++ marker()
  end

  # A serving cmdc-mcp marks every program it starts (CMDC.Tool.MCP.SelfGuard), last so that
  # no `:env` or `:clear_env` drops it. Given explicitly: System.put_env/2 changes the VM's
  # view of its environment, not the one native spawns inherit.
  defp marker do
    name = CMDC.Tool.MCP.SelfGuard.marker()

    case System.get_env(name) do
      value when value in [nil, ""] -> []
      value -> [{name, value}]
    end
  end

  defp timeout(:infinity), do: nil
  defp timeout(ms) when is_integer(ms) and ms >= 0, do: ms

  defp timeout(other),
    do: raise(ArgumentError, "expected :timeout to be ms or :infinity, got: #{inspect(other)}")

  defp positive(nil, _name), do: nil
  defp positive(n, _name) when is_integer(n) and n > 0, do: n

  defp positive(other, name),
    do:
      raise(
        ArgumentError,
        "expected #{inspect(name)} to be a positive integer or nil, got: #{inspect(other)}"
      )

  defp non_neg(n, _name) when is_integer(n) and n >= 0, do: n

  defp non_neg(other, name),
    do:
      raise(
        ArgumentError,
        "expected #{inspect(name)} to be a non-negative integer, got: #{inspect(other)}"
      )
end
