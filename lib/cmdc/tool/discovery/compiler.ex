defmodule CMDC.Tool.Discovery.Compiler do
  @moduledoc """
  Compiles discovered Elixir tool files in a separate OS process: a fresh BEAM of the same
  Erlang/Elixir installation, with the host's code paths (so `@behaviour CMDC.Tool`, and the
  application's own modules used at compile time, resolve).

  Why a separate OS process: compiling an Elixir file runs its top-level code (the file body
  and every module body). Run inside the host, a file calling `System.halt/0` stops the agent,
  and one calling `IO.gets/1` waits on the agent's stdin. Here such code runs in the throwaway
  VM, whose stdin is `/dev/null`, whose output is captured, and which is killed when a file
  takes longer than the time limit. The host only receives the compiled `.beam` binaries.

  What it protects against, per file: compile errors, raises and throws, infinite loops or
  long waits at top level (`:compile_timeout`, default 10 s), reading stdin (end of file at
  once), printing (captured, not shown), `System.halt/0` or a crash of the compiler VM (the file
  is reported and the other files are compiled in a new VM).

  What it cannot protect against: side effects outside the VM during compilation (writing
  files, spawning OS processes, network calls); anything the tool's functions do once loaded in
  the host (that is executing the tool, like any other code of the agent). Modules with an
  `@on_load` hook would run code in the host when loaded, so `CMDC.Tool.Discovery` refuses them.
  """

  alias CMDC.Tool.Discovery.CompileCache

  @default_timeout 10_000
  @default_call_timeout 5_000
  # Time allowed for the compiler VM to start, on top of each file's limit.
  @startup_ms 30_000
  @max_output 64 * 1024

  @typedoc """
  What a tool module's `name/0`, `description/0` and `parameters/0` returned in the compiler
  VM, or why reading them failed.
  """
  @type tool_info ::
          {:ok, %{name: term(), description: term(), parameters: term()}} | {:error, String.t()}

  @typedoc """
  A compiled file: its modules' binaries and, for each module declaring `@behaviour CMDC.Tool`
  and exporting those three functions, what they returned; or why it failed.
  """
  @type result ::
          {:ok, [{module(), binary()}], %{module() => tool_info()}} | {:error, String.t()}

  @doc """
  Compiles each file (absolute paths) in a separate VM and reads its tools' name, description
  and parameters there (so the host never runs a tool file's functions to discover it); returns
  `%{path => result}` for every path. Options: `:compile_timeout` (ms per file),
  `:call_timeout` (ms for each tool's `name/0`, `description/0` and `parameters/0` together,
  default #{@default_call_timeout}), `:compile_concurrency` (files compiled at once, default:
  the schedulers online; after a crash of the VM the unfinished files are compiled again one at
  a time, so the culprit is named), and `CMDC.Tool.Discovery.CompileCache`'s `:compile_cache`
  and `:cmdc_home` (a file compiled before with the same content is not compiled again).
  """
  @spec compile([String.t()], keyword()) :: %{String.t() => result()}
  def compile(paths, opts \\ []) do
    # Files compiled before (same content, same Elixir) come from the cache: no VM for them.
    cache = CompileCache.open(opts)
    keyed = Map.new(paths, &{&1, CompileCache.key(&1)})

    cached =
      for path <- paths, r = CompileCache.fetch(cache, keyed[path]), into: %{}, do: {path, r}

    fresh = Enum.reject(paths, &Map.has_key?(cached, &1))
    compiled = compile_fresh(fresh, opts)

    # The compiler VM read each file after it was keyed: one that changed meanwhile (saved
    # while a watcher's tick compiled it) may have been compiled from its new content, which
    # must not be cached under the old content's key.
    Enum.each(compiled, fn {path, result} ->
      if CompileCache.key(path) == keyed[path],
        do: CompileCache.store(cache, keyed[path], path, result)
    end)

    Map.merge(cached, compiled)
  end

  defp compile_fresh([], _opts), do: %{}

  defp compile_fresh(paths, opts) do
    timeout = Keyword.get(opts, :compile_timeout, @default_timeout)
    call_timeout = Keyword.get(opts, :call_timeout, @default_call_timeout)
    dir = private_dir!()

    try do
      # A task owns the port, so no port message reaches the caller's mailbox.
      concurrency = Keyword.get(opts, :compile_concurrency, System.schedulers_online())

      limits = %{timeout: timeout, call_timeout: call_timeout}

      fn -> run(Enum.with_index(paths), dir, limits, max(concurrency, 1), %{}) end
      |> Task.async()
      |> Task.await(:infinity)
    after
      File.rm_rf(dir)
    end
  end

  # The host loads the .beam files found here: the folder is new (never one that already
  # existed, which another user could have prepared) and only ours. The OS pid keeps two VMs
  # (two MCP servers started at once, say) from choosing the same name.
  defp private_dir!(attempt \\ 0) do
    name = "cmdc_discovery_#{System.pid()}_#{System.unique_integer([:positive])}"
    dir = Path.join(System.tmp_dir!(), name)

    case File.mkdir(dir) do
      :ok ->
        File.chmod!(dir, 0o700)
        dir

      {:error, :eexist} when attempt < 5 ->
        private_dir!(attempt + 1)

      {:error, reason} ->
        raise File.Error, reason: reason, action: "make directory", path: dir
    end
  end

  @doc false
  def default_call_timeout, do: @default_call_timeout

  defp run([], _dir, _limits, _concurrency, results), do: results

  defp run(pending, dir, limits, concurrency, results) do
    job = Path.join(dir, "job.bin")

    job_term = Map.merge(limits, %{files: pending, out: dir, concurrency: concurrency})

    Enum.each(pending, fn {_, i} -> File.rm(started_file(dir, i)) end)
    File.write!(job, :erlang.term_to_binary(job_term))
    {status, output} = spawn_vm(job, length(pending), limits, concurrency)

    {done, crashed, rest} =
      Enum.reduce(pending, {%{}, [], []}, fn {path, i}, {done, crashed, rest} ->
        cond do
          File.exists?(result_file(dir, i)) ->
            result = dir |> result_file(i) |> File.read!() |> :erlang.binary_to_term()
            {Map.put(done, path, result), crashed, rest}

          File.exists?(started_file(dir, i)) ->
            {done, [path | crashed], rest}

          true ->
            {done, crashed, [{path, i} | rest]}
        end
      end)

    progress? = done != %{} or crashed != []

    # Several files were being compiled side by side when the VM stopped: compile them again
    # one at a time, so that the one stopping it is known.
    {crashed, rest, concurrency} =
      if concurrency > 1 and length(crashed) > 1 do
        again = for {path, i} <- pending, path in crashed, do: {path, i}
        {[], again ++ rest, 1}
      else
        {crashed, rest, concurrency}
      end

    crash_results =
      Map.new(crashed, fn path ->
        {path,
         {:error,
          "the compiler VM stopped while compiling this file or reading its tools' name, " <>
            "description and parameters (#{status}); does its top-level code or one of " <>
            "those functions call System.halt/0 or :init.stop/0?" <> output_tail(output)}}
      end)

    results = results |> Map.merge(done) |> Map.merge(crash_results)
    rest = Enum.sort_by(rest, &elem(&1, 1))

    cond do
      rest == [] ->
        results

      not progress? ->
        # The VM did not even start on a file: report every remaining file.
        reason = "the compiler VM failed (#{status})" <> output_tail(output)
        Enum.reduce(rest, results, fn {path, _}, acc -> Map.put(acc, path, {:error, reason}) end)

      true ->
        run(rest, dir, limits, concurrency, results)
    end
  end

  defp output_tail(""), do: ""

  defp output_tail(output) do
    text = output |> String.trim() |> String.slice(-2000, 2000)
    if text == "", do: "", else: "; its output: " <> text
  end

  defp result_file(dir, i), do: Path.join(dir, "#{i}.result")
  defp started_file(dir, i), do: Path.join(dir, "#{i}.started")

  defp spawn_vm(job, count, limits, concurrency) do
    erl = erl_path()
    sh = System.find_executable("sh") || "/bin/sh"
    lib_root = List.to_string(:code.lib_dir())

    # The host's code paths minus OTP's own (the new VM has those): Elixir, this library, the
    # application and its dependencies.
    paths =
      :code.get_path()
      |> Enum.map(&List.to_string/1)
      |> Enum.reject(&(String.starts_with?(&1, lib_root) or &1 == "."))
      |> Enum.filter(&File.dir?/1)

    # `no_dot_erlang` skips ~/.erlang; a release may not ship that boot file.
    boot =
      if File.exists?(Path.join([:code.root_dir(), "bin", "no_dot_erlang.boot"])),
        do: ["-boot", "no_dot_erlang"],
        else: []

    args =
      ["-c", ~s(exec "$0" "$@" </dev/null), erl, "-noinput" | boot] ++
        ["-pa" | paths] ++
        ["-eval", "'Elixir.CMDC.Tool.Discovery.Compiler':main()", "-extra", job]

    port =
      Port.open({:spawn_executable, sh}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        :hide,
        args: args
      ])

    os_pid =
      case Port.info(port, :os_pid) do
        {:os_pid, pid} -> pid
        _ -> nil
      end

    rounds = div(count + concurrency - 1, concurrency)
    per_file = limits.timeout + limits.call_timeout + 2_000
    deadline = System.monotonic_time(:millisecond) + @startup_ms + rounds * per_file
    collect(port, os_pid, deadline, "")
  end

  # The `erl` of the running installation: `<root>/bin/erl`, or the one of the running ERTS
  # (releases), or the first on PATH.
  defp erl_path do
    root = List.to_string(:code.root_dir())

    [
      Path.join([root, "bin", "erl"]),
      Path.join([root, "erts-#{:erlang.system_info(:version)}", "bin", "erl"])
    ]
    |> Enum.find(&File.exists?/1)
    |> Kernel.||(System.find_executable("erl"))
    |> Kernel.||("erl")
  end

  defp collect(port, os_pid, deadline, output) do
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {^port, {:data, data}} ->
        output = if byte_size(output) < @max_output, do: output <> data, else: output
        collect(port, os_pid, deadline, output)

      {^port, {:exit_status, 0}} ->
        {"exit status 0", output}

      {^port, {:exit_status, status}} ->
        {"exit status #{status}", output}
    after
      left ->
        if os_pid, do: System.cmd("kill", ["-KILL", to_string(os_pid)], stderr_to_stdout: true)
        Port.close(port)
        {"killed after the overall time limit", output}
    end
  end

  # ---------------------------------------------------------------------------------------
  # In the compiler VM.

  @doc false
  # The compiler VM's entry point: compiles each file of the job, writing `<i>.started` before
  # and `<i>.result` after, then halts.
  def main do
    {:ok, _} = :application.ensure_all_started(:elixir)
    [job_path] = Enum.map(:init.get_plain_arguments(), &List.to_string/1)
    job = job_path |> File.read!() |> :erlang.binary_to_term()

    job.files
    |> Task.async_stream(
      fn {path, i} ->
        File.write!(started_file(job.out, i), "")
        result = compile_file(path, job.timeout, job.call_timeout)
        tmp = result_file(job.out, i) <> ".tmp"
        File.write!(tmp, :erlang.term_to_binary(result))
        File.rename!(tmp, result_file(job.out, i))
      end,
      max_concurrency: job.concurrency,
      timeout: :infinity,
      ordered: false
    )
    |> Stream.run()

    System.halt(0)
  end

  @doc false
  # Compiles one file in a separate process, with a null group leader and a time limit, then
  # reads its tools (see read_tools/2).
  def compile_file(path, timeout, call_timeout) do
    guarded(
      fn ->
        case File.read(path) do
          {:ok, source} -> {:ok, Code.compile_string(source, path)}
          {:error, reason} -> {:error, "cannot read the file: #{:file.format_error(reason)}"}
        end
      end,
      timeout,
      &describe_failure(&1, &2, &3, path)
    )
    |> case do
      {:ok, {:ok, modules}} -> {:ok, modules, read_tools(modules, call_timeout)}
      {:ok, {:error, reason}} -> {:error, reason}
      {:error, reason} -> {:error, reason}
    end
  end

  # Calls `name/0`, `description/0` and `parameters/0` of each tool module here, in the
  # compiler VM: a tool file's functions then never run in the host during discovery (one
  # calling `System.halt/0` stops this VM, which reports the file). Each module is read in a
  # guarded process under `call_timeout`, all at once.
  defp read_tools(modules, call_timeout) do
    modules
    |> Enum.filter(fn {module, binary} ->
      declares_tool?(binary) and
        Enum.all?([name: 0, description: 0, parameters: 0], fn {f, a} ->
          function_exported?(module, f, a)
        end)
    end)
    |> Enum.map(fn {module, _} ->
      {module, Task.async(fn -> guarded(fn -> read_tool(module) end, call_timeout) end)}
    end)
    |> Map.new(fn {module, task} -> {module, Task.await(task, :infinity)} end)
  end

  defp read_tool(module) do
    %{name: module.name(), description: module.description(), parameters: module.parameters()}
  end

  @doc false
  # Whether a module's binary declares `@behaviour CMDC.Tool` (read from its attributes chunk,
  # without loading it).
  def declares_tool?(binary) do
    case :beam_lib.chunks(binary, [:attributes]) do
      {:ok, {_, [attributes: attrs]}} ->
        attrs |> Keyword.get_values(:behaviour) |> List.flatten() |> Enum.member?(CMDC.Tool)

      _ ->
        false
    end
  end

  @doc false
  # Runs `fun` in a new process whose group leader swallows output and answers reads with end
  # of file; kills it after `timeout` ms. `{:ok, value}` or `{:error, message}`.
  def guarded(fun, timeout, describe \\ &describe_failure/3) do
    io = spawn(fn -> null_io() end)
    parent = self()
    ref = make_ref()

    {pid, mon} =
      spawn_monitor(fn ->
        Process.group_leader(self(), io)

        result =
          try do
            {:ok, fun.()}
          rescue
            e -> {:error, describe.(:error, e, __STACKTRACE__)}
          catch
            kind, reason -> {:error, describe.(kind, reason, __STACKTRACE__)}
          end

        send(parent, {ref, result})
      end)

    receive do
      {^ref, result} ->
        Process.demonitor(mon, [:flush])
        Process.exit(io, :kill)
        result

      {:DOWN, ^mon, :process, ^pid, reason} ->
        Process.exit(io, :kill)
        {:error, "the process exited: #{inspect(reason, limit: 10)}"}
    after
      timeout ->
        Process.exit(pid, :kill)
        Process.demonitor(mon, [:flush])
        Process.exit(io, :kill)
        {:error, "timed out after #{timeout} ms (an infinite loop or a wait at top level?)"}
    end
  end

  defp describe_failure(kind, reason, stack) do
    Exception.format_banner(kind, reason, stack) |> String.trim()
  end

  defp describe_failure(kind, reason, stack, path) do
    banner = describe_failure(kind, reason, stack)

    where =
      Enum.find_value(stack, fn {_m, _f, _a, loc} ->
        if loc[:file] && to_string(loc[:file]) == path, do: loc[:line]
      end)

    # Compile errors already name the file and line.
    if where && !String.contains?(banner, path), do: "#{banner} (line #{where})", else: banner
  end

  # A minimal I/O server: output is dropped, input is at end of file.
  defp null_io do
    receive do
      {:io_request, from, reply_as, request} ->
        send(from, {:io_reply, reply_as, io_reply(request)})
        null_io()

      _ ->
        null_io()
    end
  end

  defp io_reply({:put_chars, _, _}), do: :ok
  defp io_reply({:put_chars, _}), do: :ok
  defp io_reply({:put_chars, _, _, _, _}), do: :ok
  defp io_reply({:put_chars, _, _, _}), do: :ok
  defp io_reply({:requests, _}), do: :ok
  defp io_reply({:get_geometry, _}), do: {:error, :enotsup}
  defp io_reply({:setopts, _}), do: :ok
  defp io_reply(:getopts), do: {:ok, [binary: true, encoding: :unicode]}
  defp io_reply(_get), do: :eof
end
