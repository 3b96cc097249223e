defmodule CMDC.Tool.MCP.SelfGuard do
  @moduledoc """
  Keeps `cmdc-mcp` from starting itself from a config it reads (`claude mcp add --scope user`
  writes `cmdc-mcp` into `~/.claude.json`, which `cmdc-mcp` reads too): without a guard each
  instance starts another, at every depth.

  Two checks, either enough to stop the recursion:

    1. **An environment marker.** A serving `cmdc-mcp` sets `CMDC_MCP_SERVER` (`mark/0`), and
       `CMDC.Tool.Exec` gives it to every program it starts (MCP servers of configs, command
       tools; set last, so no `:env` or `:clear_env` drops it), which pass it on to theirs, and
       `CMDC.Tool.Script` to its workers (Python and PowerShell; both are started natively,
       where `System.put_env/2` does not reach: `env/0` is handed over explicitly). A
       `cmdc-mcp` that finds the marker set when it starts was started, directly or
       through any other program (a wrapper script), by a serving one: it refuses to serve
       and exits with status 3 and the reason on stderr (`refusal?/2`), so the first instance
       marks that server failed with the reason, does not retry it (a refusal is final: each
       retry would start a VM to be refused again), and nothing is started twice.
    2. **Its own command.** While serving, `split/1` leaves out configured servers whose
       command (or an argument, for `sh -c …` wrappers) is this `bin/cmdc-mcp` (same file,
       symlinks followed) or `mix cmdc.mcp`; they are reported in `:ignored` (`type: :itself`).

  Outside `cmdc-mcp` (an agent using the library) no server is left out: starting `cmdc-mcp`
  from there is a legitimate use.
  """

  @marker "CMDC_MCP_SERVER"
  # What `CMDC.Tool.MCP.Main` writes first on stderr, and its exit status, when it refuses.
  @refusal "cmdc-mcp: started by another cmdc-mcp"
  @refusal_status 3
  @launcher Path.expand("../../../../bin/cmdc-mcp", __DIR__)

  @doc "The environment variable that marks a process tree under a serving `cmdc-mcp`."
  @spec marker() :: String.t()
  def marker, do: @marker

  @doc "This package's `bin/cmdc-mcp`."
  @spec launcher() :: String.t()
  def launcher, do: @launcher

  @doc """
  Whether the marker is set: this VM serves as `cmdc-mcp` (`mark/0` ran), or, asked before
  `mark/0`, it was started below a serving `cmdc-mcp` (the marker was inherited).
  """
  @spec marked?() :: boolean()
  def marked?, do: System.get_env(@marker) not in [nil, ""]

  @doc """
  Marks this VM as a serving `cmdc-mcp`: sets the marker (to this OS process id) for every
  program it starts from now on.
  """
  @spec mark() :: :ok
  def mark, do: System.put_env(@marker, System.pid())

  @doc """
  The marker as variables to hand a natively started program: `[{"CMDC_MCP_SERVER", value}]`
  while marked, else `[]`. `System.put_env/2` changes the VM's view of its environment, not
  the one native spawns inherit, so `CMDC.Tool.Exec` and `CMDC.Tool.Script` pass this on.
  """
  @spec env() :: [{String.t(), String.t()}]
  def env do
    case System.get_env(@marker) do
      value when value in [nil, ""] -> []
      value -> [{@marker, value}]
    end
  end

  @doc """
  Whether a server's end (its exit status and the stderr lines it wrote) is a nested
  `cmdc-mcp` refusing to serve below a serving one: final for that server, never retried.

      iex> line = "cmdc-mcp: started by another cmdc-mcp (CMDC_MCP_SERVER=42); not serving"
      iex> CMDC.Tool.MCP.SelfGuard.refusal?(3, ["noise", line])
      true
      iex> CMDC.Tool.MCP.SelfGuard.refusal?(3, ["usage: server-x --port N"])
      false
      iex> CMDC.Tool.MCP.SelfGuard.refusal?(1, [line])
      false
  """
  @spec refusal?(integer() | nil, [String.t()]) :: boolean()
  def refusal?(@refusal_status, stderr_lines),
    do: Enum.any?(stderr_lines, &String.starts_with?(&1, @refusal))

  def refusal?(_status, _stderr_lines), do: false

  @doc """
  Splits configured servers into those to start and the `:ignored` entries of those that are
  `cmdc-mcp` itself. Leaves everything to start unless this VM is a serving (marked) `cmdc-mcp`.
  """
  @spec split([map()]) :: {[map()], [map()]}
  def split(servers) do
    if marked?() do
      {itself, others} = Enum.split_with(servers, &itself?/1)
      {others, Enum.map(itself, &ignored/1)}
    else
      {servers, []}
    end
  end

  @doc """
  Whether a configured server (`CMDC.Tool.MCP.Config`'s shape) runs `cmdc-mcp`.

      iex> alias CMDC.Tool.MCP.SelfGuard
      iex> SelfGuard.itself?(%{transport: {:stdio, %{command: SelfGuard.launcher(), args: [], cwd: "/"}}})
      true
      iex> SelfGuard.itself?(%{transport: {:stdio, %{command: "mix", args: ["cmdc.mcp"], cwd: "/"}}})
      true
      iex> SelfGuard.itself?(%{transport: {:stdio, %{command: "npx", args: ["server-x"], cwd: "/"}}})
      false
  """
  @spec itself?(map()) :: boolean()
  def itself?(%{transport: {:stdio, %{command: command, args: args} = spec}}) do
    cwd = Map.get(spec, :cwd, File.cwd!())
    words = [command | args] ++ Enum.flat_map(args, &String.split/1)

    mix_task?(command, args) or
      Enum.any?(words, &same_file?(resolve(&1, cwd), @launcher))
  end

  def itself?(_), do: false

  defp mix_task?(command, args),
    do: Path.basename(command) == "mix" and "cmdc.mcp" in args

  defp resolve(word, cwd) do
    cond do
      String.contains?(word, "/") -> Path.expand(word, cwd)
      exe = System.find_executable(word) -> exe
      true -> nil
    end
  end

  defp same_file?(nil, _), do: false

  defp same_file?(a, b) do
    case {File.stat(a), File.stat(b)} do
      {{:ok, %{major_device: d, inode: i}}, {:ok, %{major_device: d, inode: i}}} when i > 0 ->
        true

      _ ->
        false
    end
  end

  defp ignored(server) do
    %{
      type: :itself,
      source: server.source,
      provider: "mcp:" <> server.name,
      path: server.path,
      server: server.name,
      reason:
        ~s(#{server.path}: server "#{server.name}" is cmdc-mcp itself: not started from ) <>
          "inside cmdc-mcp (it would start itself again, at every depth)"
    }
  end
end
