defmodule CMDC.Test.MCPPort do
  @moduledoc false
  # bin/cmdc-mcp as a client runs it: a real subprocess spoken to in raw JSON-RPC lines.

  alias CMDC.Tool.JSON

  @root Path.expand("../..", __DIR__)
  @server Path.join(@root, "bin/cmdc-mcp")

  def server, do: @server

  @doc """
  Starts the server with `env` (`[{name, value}]`, strings; `nil` unsets, a later entry wins)
  in `cwd`, and initializes it.
  """
  def start(env, args, cwd \\ @root) do
    env =
      for {k, v} <- Map.new([{"MIX_ENV", "test"} | env]),
          do: {to_charlist(k), if(v, do: to_charlist(v), else: false)}

    port =
      Port.open({:spawn_executable, @server}, [
        :binary,
        {:line, 1_000_000},
        {:env, env},
        {:cd, cwd},
        args: args
      ])

    {:os_pid, os_pid} = Port.info(port, :os_pid)

    init = %{
      "protocolVersion" => "2025-11-25",
      "capabilities" => %{},
      "clientInfo" => %{"name" => "mcp_port", "version" => "1"}
    }

    %{"result" => _} = request(port, 0, "initialize", init)
    send_msg(port, %{"method" => "notifications/initialized"})
    {port, os_pid}
  end

  def send_msg(port, msg),
    do: Port.command(port, JSON.encode!(Map.put(msg, "jsonrpc", "2.0")) <> "\n")

  @doc "Sends a request and waits for its answer (other messages are dropped)."
  def request(port, id, method, params \\ %{}) do
    send_msg(port, %{"id" => id, "method" => method, "params" => params})
    await(port, &(&1["id"] == id))
  end

  @doc "Every tool name, all pages."
  def names(port, id \\ 1_000, cursor \\ nil) do
    params = if cursor, do: %{"cursor" => cursor}, else: %{}
    %{"result" => result} = request(port, id, "tools/list", params)
    names = Enum.map(result["tools"], & &1["name"])

    case result["nextCursor"] do
      nil -> names
      next -> names ++ names(port, id + 1, next)
    end
  end

  @doc "Calls a tool: `{is_error, text}`, or `{:rpc_error, message}` (e.g. an unknown tool)."
  def call(port, id, name, args \\ %{}) do
    case request(port, id, "tools/call", %{"name" => name, "arguments" => args}) do
      %{"result" => result} ->
        {result["isError"] == true, Enum.map_join(result["content"], "\n", &(&1["text"] || ""))}

      %{"error" => %{"message" => message}} ->
        {:rpc_error, message}
    end
  end

  defp await(port, match?) do
    receive do
      {^port, {:data, {:eol, line}}} ->
        msg = JSON.decode!(line)
        if match?.(msg), do: msg, else: await(port, match?)
    after
      180_000 -> raise "no matching message from cmdc-mcp"
    end
  end

  @doc "Closes the server's stdin and waits for it to exit."
  def stop(port, os_pid) do
    Port.close(port)
    CMDC.Test.OsProc.wait_dead(os_pid, 30_000)
  end
end
