defmodule CMDC.Tool.MCP.Client.Request do
  @moduledoc false
  # The caller's side of one request to a `CMDC.Tool.MCP.Client`: sent to the client process,
  # awaited in the calling process (so many calls run at once), progress relayed, cancelled on
  # the server at its time-out. `CMDC.Tool.MCP.Client.request/4` (documented there, which checks
  # the options) and the remote tools (`CMDC.Tool.MCP.Remote`, which the client defines) call it.

  @spec run(GenServer.server(), String.t(), map(), keyword()) ::
          {:ok, term()} | {:error, String.t()}
  def run(client, method, params, opts) do
    pid = GenServer.whereis(client)
    ref = make_ref()
    on_progress = opts[:on_progress]

    if pid == nil do
      {:error, "the MCP client is not running"}
    else
      mon = Process.monitor(pid)
      timeout = Keyword.get_lazy(opts, :timeout, fn -> GenServer.call(pid, :timeout) end)
      GenServer.cast(pid, {:request, method, params, self(), ref, on_progress != nil})
      deadline = if timeout == :infinity, do: :infinity, else: now() + timeout
      result = await(pid, ref, mon, deadline, on_progress, method, timeout)
      Process.demonitor(mon, [:flush])
      result
    end
  end

  defp await(pid, ref, mon, deadline, on_progress, method, timeout) do
    wait = if deadline == :infinity, do: :infinity, else: max(deadline - now(), 0)

    receive do
      {:cmdc_mcp, ^ref, {:progress, params}} ->
        if on_progress, do: on_progress.(params)
        await(pid, ref, mon, deadline, on_progress, method, timeout)

      {:cmdc_mcp, ^ref, {:result, result}} ->
        {:ok, result}

      {:cmdc_mcp, ^ref, {:error, message}} ->
        {:error, message}

      {:DOWN, ^mon, :process, _, reason} ->
        {:error, "the MCP client stopped during #{method}: #{inspect(reason)}"}
    after
      wait ->
        GenServer.cast(pid, {:cancel, ref, "timed out after #{timeout} ms"})
        {:error, "#{method} timed out after #{timeout} ms (cancelled on the server)"}
    end
  end

  defp now, do: System.monotonic_time(:millisecond)
end
