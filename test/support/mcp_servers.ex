defmodule CMDC.Tool.MCPServers do
  @moduledoc false
  # Real MCP servers nobody here wrote, for the client's tests and bench: the official Python
  # SDK's server (test/support/mcp_py_server.py is only its tool list) over stdio or Streamable
  # HTTP, and the official reference servers from npm, installed on first use in the test cache
  # (`CMDC.Tool.TestCache`).

  @py_server Path.expand("mcp_py_server.py", __DIR__)
  @packages ["@modelcontextprotocol/server-everything", "@modelcontextprotocol/server-filesystem"]

  def py_server, do: @py_server

  @doc "The stdio transport spec of the Python SDK server."
  def python_stdio do
    with {:ok, python} <- CMDC.Tool.PythonEnv.python() do
      {:ok, %{command: python, args: [@py_server, "stdio"]}}
    end
  end

  # A dropped exec handle stops its program when the VM collects it (a caller writing
  # `{:ok, url, _exec}` lost its server at its next garbage collection): a holder keeps the
  # handle until the caller exits.
  defp hold(exec) do
    caller = self()

    spawn(fn ->
      ref = Process.monitor(caller)

      receive do
        {:DOWN, ^ref, :process, _, _} -> CMDC.Tool.Exec.cancel(exec)
      end
    end)
  end

  @doc """
  Starts the Python SDK server over Streamable HTTP on a free loopback port, owned by the
  calling process (it dies with it): `{:ok, url, exec}`.
  """
  def python_http(mode \\ "http", port \\ nil) do
    with {:ok, python} <- CMDC.Tool.PythonEnv.python() do
      port = port || free_port()
      {:ok, exec} = CMDC.Tool.Exec.start(python, [@py_server, mode, "#{port}"])

      if wait_port(port) do
        hold(exec)
        {:ok, "http://127.0.0.1:#{port}/mcp", exec}
      else
        CMDC.Tool.Exec.cancel(exec)
        {:error, "the Python SDK's HTTP server did not listen on port #{port}"}
      end
    end
  end

  @doc """
  Starts test/support/introspection_server.py (an OAuth token introspection endpoint that
  counts what it is asked, for `resource`) with `python`, killed when the calling test exits:
  its base URL `http://127.0.0.1:N`.
  """
  def introspection(python, resource) do
    script = Path.expand("introspection_server.py", __DIR__)
    opts = [:binary, :exit_status, {:line, 100}, args: [script, resource]]
    port = Port.open({:spawn_executable, python}, opts)
    {:os_pid, os_pid} = Port.info(port, :os_pid)
    ExUnit.Callbacks.on_exit(fn -> System.cmd("kill", ["#{os_pid}"]) end)

    receive do
      {^port, {:data, {:eol, number}}} -> "http://127.0.0.1:#{number}"
    after
      30_000 -> ExUnit.Assertions.flunk("the introspection server did not start")
    end
  end

  @doc "The path of an npm reference server's entry point, installing them on first use."
  def npm(package) do
    main = Path.join([npm_dir(), "node_modules", package, "dist", "index.js"])

    cond do
      File.exists?(main) -> {:ok, main}
      System.find_executable("npm") == nil -> {:error, "npm is not installed"}
      true -> CMDC.Tool.TestCache.with_lock("mcp-npm", fn -> install(main) end)
    end
  end

  defp npm_dir, do: CMDC.Tool.TestCache.dir("mcp-npm")

  defp install(main) do
    File.mkdir_p!(npm_dir())

    case System.cmd("npm", ["install", "--no-audit", "--no-fund", "--silent" | @packages],
           cd: npm_dir(),
           stderr_to_stdout: true
         ) do
      {_, 0} ->
        if File.exists?(main), do: {:ok, main}, else: {:error, "#{main} missing"}

      {out, _} ->
        {:error, "npm install failed (registry unreachable?): " <> String.slice(out, 0, 300)}
    end
  end

  def free_port do
    {:ok, socket} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(socket)
    :gen_tcp.close(socket)
    port
  end

  @doc "Whether something listens on loopback `port` within `ms` (a bound on a hang)."
  def wait_port(port, ms \\ 60_000) do
    CMDC.Tool.Eventually.eventually(
      fn ->
        case :gen_tcp.connect({127, 0, 0, 1}, port, [], 100) do
          {:ok, socket} -> :gen_tcp.close(socket) == :ok
          {:error, _} -> false
        end
      end,
      within: ms,
      flunk: false
    )
  end

  @doc """
  A TCP relay on loopback to `port` that counts the connections it accepts (owned by the
  caller: it stops with it): `{relay_port, count_agent}`.
  """
  def relay(port) do
    {:ok, count} = Agent.start_link(fn -> 0 end)
    {:ok, listen} = :gen_tcp.listen(0, [:binary, active: false, ip: {127, 0, 0, 1}])
    {:ok, relay_port} = :inet.port(listen)
    pid = spawn_link(fn -> accept(listen, port, count) end)
    :gen_tcp.controlling_process(listen, pid)
    {relay_port, count}
  end

  defp accept(listen, port, count) do
    {:ok, client} = :gen_tcp.accept(listen)
    Agent.update(count, &(&1 + 1))
    {:ok, upstream} = :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false])
    a = spawn(fn -> pipe(client, upstream) end)
    b = spawn(fn -> pipe(upstream, client) end)
    :gen_tcp.controlling_process(client, a)
    :gen_tcp.controlling_process(upstream, b)
    accept(listen, port, count)
  end

  defp pipe(from, to) do
    case :gen_tcp.recv(from, 0) do
      {:ok, data} -> :gen_tcp.send(to, data) && pipe(from, to)
      {:error, _} -> :gen_tcp.close(to)
    end
  end

  @doc "Whether `/stats`' `key` (see `stats/1`) becomes `value` within `ms`."
  def wait_stat(url, key, value, ms) do
    CMDC.Tool.Eventually.eventually(
      fn ->
        {:ok, stats} = stats(url)
        stats[key] == value
      end,
      within: ms,
      flunk: false
    )
  end

  @doc "The `/stats` JSON a test server beside `url` (`…/mcp`) keeps: `{:ok, map}`."
  def stats(url) do
    stats_url = String.to_charlist(String.replace(url, "/mcp", "/stats"))
    {:ok, {{_, 200, _}, _, body}} = :httpc.request(:get, {stats_url, []}, [], [])
    CMDC.Tool.JSON.decode(to_string(body))
  end
end
