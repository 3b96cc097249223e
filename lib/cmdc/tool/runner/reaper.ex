defmodule CMDC.Tool.Runner.Reaper do
  @moduledoc """
  Stops a tool process together with the OS processes it started through ports
  (`System.cmd/3`, `Port.open/2`, `:os.cmd/1`) and their descendants.

  Killing a BEAM process closes its ports, but closing a port does not stop the program behind
  it: a `System.cmd("sleep", ["600"])` goes on after its tool timed out. So before the tool dies,
  the reaper finds the processes that die with it (the tool and, through links, every process
  not trapping exits), the ports they own or are linked to, and those ports' OS processes; it
  freezes each OS process tree (SIGSTOP, walking `/proc` until no new child appears, so nothing
  forks away or is re-parented meanwhile), kills the tool, then kills the frozen trees
  (SIGKILL).

  Processes that leave their tree on purpose (double-forking daemons) escape, as they escape a
  shell's job control. Programs started with `CMDC.Tool.Exec` are killed by `Exec` itself
  (their whole process group). Without `/proc` (not Linux), only the ports' own OS processes
  are killed.
  """

  # Bounds the link walk: a tool linked to a huge process tree is not walked whole.
  @max_processes 10_000

  @doc """
  Kills `pid` (`:kill`, which cannot be trapped) and the OS processes of the ports it and the
  processes dying with it hold, with their descendants. Returns the OS pids killed.

      iex> pid = spawn(fn -> Process.sleep(:infinity) end)
      iex> CMDC.Tool.Runner.Reaper.kill(pid)
      []
      iex> Process.alive?(pid)
      false
  """
  @spec kill(pid()) :: [non_neg_integer()]
  def kill(pid) when is_pid(pid) do
    tree = pid |> port_os_pids() |> freeze()
    Process.exit(pid, :kill)
    signal(tree, "KILL")
    tree
  end

  @doc """
  The OS pids of the ports owned by or linked to `pid` and to the processes that would die with
  it (linked, not trapping exits).
  """
  @spec port_os_pids(pid()) :: [non_neg_integer()]
  def port_os_pids(pid) when is_pid(pid) do
    {pids, ports} = dying(pid)

    owned =
      for port <- Port.list(),
          {:connected, owner} <- [Port.info(port, :connected)],
          MapSet.member?(pids, owner),
          do: port

    for port <- Enum.uniq(ports ++ owned),
        {:os_pid, os_pid} <- [Port.info(port, :os_pid)],
        uniq: true,
        do: os_pid
  end

  # The processes a `:kill` of `pid` takes down (it, and through links every process that does
  # not trap exits), and the ports linked to them.
  defp dying(pid), do: walk([pid], MapSet.new([pid]), [])

  defp walk([], pids, ports), do: {pids, ports}

  defp walk([pid | rest], pids, ports) do
    links =
      case Process.info(pid, :links) do
        {:links, links} -> links
        nil -> []
      end

    {new_pids, new_ports} = Enum.split_with(links, &is_pid/1)

    next =
      for p <- new_pids,
          node(p) == node(),
          not MapSet.member?(pids, p),
          MapSet.size(pids) < @max_processes,
          Process.info(p, :trap_exit) == {:trap_exit, false},
          do: p

    walk(next ++ rest, MapSet.union(pids, MapSet.new(next)), new_ports ++ ports)
  end

  @doc """
  Stops (SIGSTOP) the OS processes `os_pids` and all their descendants, walking `/proc` again
  until the tree stops growing; returns every OS pid of the tree.
  """
  @spec freeze([non_neg_integer()]) :: [non_neg_integer()]
  def freeze([]), do: []

  def freeze(os_pids) do
    signal(os_pids, "STOP")
    grow(MapSet.new(os_pids), 10)
  end

  defp grow(tree, 0), do: MapSet.to_list(tree)

  defp grow(tree, rounds) do
    children = children_map()
    all = descendants(MapSet.to_list(tree), children, tree)
    new = MapSet.difference(all, tree) |> MapSet.to_list()

    if new == [] do
      MapSet.to_list(tree)
    else
      signal(new, "STOP")
      grow(all, rounds - 1)
    end
  end

  defp descendants([], _children, acc), do: acc

  defp descendants([pid | rest], children, acc) do
    kids = children |> Map.get(pid, []) |> Enum.reject(&MapSet.member?(acc, &1))
    descendants(kids ++ rest, children, Enum.into(kids, acc))
  end

  # `%{parent_os_pid => [child_os_pid]}` from /proc/<pid>/stat (`%{}` without /proc).
  defp children_map do
    case File.ls("/proc") do
      {:ok, entries} ->
        for entry <- entries,
            {pid, ""} <- [Integer.parse(entry)],
            ppid = parent(pid),
            ppid != nil,
            reduce: %{} do
          acc -> Map.update(acc, ppid, [pid], &[pid | &1])
        end

      {:error, _} ->
        %{}
    end
  end

  # The parent's pid: the 4th field of /proc/<pid>/stat, after the command name in parentheses
  # (which may hold spaces and parentheses itself, hence the last ") ").
  defp parent(pid) do
    with {:ok, stat} <- File.read("/proc/#{pid}/stat"),
         {at, len} <- stat |> :binary.matches(") ") |> List.last(),
         fields = binary_part(stat, at + len, byte_size(stat) - at - len),
         [_state, ppid | _] <- String.split(fields, " ", parts: 3),
         {ppid, ""} <- Integer.parse(ppid) do
      ppid
    else
      _ -> nil
    end
  end

  # Signals through the shell's `kill` builtin (no NIF, no dependency); errors for processes
  # already gone are expected and ignored.
  defp signal([], _sig), do: :ok

  defp signal(os_pids, sig) do
    sh = System.find_executable("sh") || "/bin/sh"

    args = [
      "-c",
      ~s(kill -s #{sig} "$@" 2>/dev/null; true),
      "sh" | Enum.map(os_pids, &to_string/1)
    ]

    System.cmd(sh, args, stderr_to_stdout: true)
    :ok
  end
end
