defmodule CMDC.Tool.MCP.Server do
  @moduledoc """
  An MCP server over stdio: newline-delimited JSON-RPC 2.0 on stdin/stdout.

  stdout carries protocol frames and nothing else: logging goes to stderr. Each `tools/call`
  runs in its own process, so calls overlap, a cancelled call (`notifications/cancelled`) is
  killed with everything it started, and partial results stream as `notifications/progress`
  when the client sent a `progressToken`. A malformed line gets a JSON-RPC error and the server
  reads on; end of input stops the server once running calls have answered.

  Started by `mix cmdc.mcp`; `serve/2` can run it in any process that owns stdio.
  """

  require Logger

  alias CMDC.Tool.MCP

  @doc """
  Serves `tools` until stdin closes. Options: `:page_size` (tools per `tools/list` page),
  `:input`/`:output` (IO devices, stdio by default), `:refresh` (a zero-arity function returning
  the current tool list, called on `refresh/1`), `:context` (the `CMDC.Context` for calls).
  """
  @spec serve([module()], keyword()) :: :ok
  def serve(tools, opts \\ []) do
    input = Keyword.get(opts, :input, :stdio)
    output = Keyword.get(opts, :output, :stdio)
    # Raw bytes both ways: with the default unicode encoding, binread would transcode UTF-8
    # input to Latin-1 and break every non-ASCII argument.
    if input == :stdio, do: :io.setopts(:standard_io, binary: true, encoding: :latin1)
    server = self()
    {reader, ref} = spawn_monitor(fn -> read_loop(input, server) end)
    unless Process.whereis(__MODULE__), do: Process.register(self(), __MODULE__)

    state = %{
      mcp: MCP.new(tools, Keyword.take(opts, [:page_size, :server_name])),
      output: output,
      calls: %{},
      reader: {reader, ref},
      eof?: false,
      refresh: Keyword.get(opts, :refresh),
      context: Keyword.get_lazy(opts, :context, &default_context/0)
    }

    loop(state)
  after
    if Process.whereis(__MODULE__) == self(), do: Process.unregister(__MODULE__)
  end

  @doc "Asks a running server to reload its tools and notify the client (list_changed)."
  def refresh(server \\ __MODULE__), do: send(server, :refresh)

  defp default_context do
    CMDC.Context.new(
      session_id: "mcp-#{System.unique_integer([:positive])}",
      working_dir: File.cwd!()
    )
  end

  defp read_loop(input, server) do
    case IO.binread(input, :line) do
      :eof ->
        send(server, :eof)

      {:error, reason} ->
        send(server, {:read_error, reason})

      line ->
        send(server, {:line, line})
        read_loop(input, server)
    end
  end

  defp loop(%{eof?: true, calls: calls}) when map_size(calls) == 0, do: :ok

  defp loop(state) do
    receive do
      {:line, line} -> state |> line(String.trim(line)) |> loop()
      :eof -> loop(%{state | eof?: true})
      {:read_error, reason} -> Logger.error("mcp: stdin: #{inspect(reason)}") && :ok
      {:progress, id, text} -> state |> progress(id, text) |> loop()
      {:done, id, result} -> state |> done(id, result) |> loop()
      {:DOWN, ref, :process, _, reason} -> state |> down(ref, reason) |> loop()
      :refresh -> state |> refresh_tools() |> loop()
    end
  end

  defp line(state, ""), do: state

  defp line(state, text) do
    case CMDC.Tool.JSON.decode(text) do
      {:ok, msg} ->
        {outgoing, mcp} = MCP.handle(msg, state.mcp)
        Enum.reduce(outgoing, %{state | mcp: mcp}, &perform/2)

      {:error, message} ->
        write(state, MCP.parse_error(message))
    end
  end

  defp perform(%{} = msg, state), do: write(state, msg)

  defp perform({:call, id, module, args, token}, state) do
    server = self()
    context = state.context

    tools = state.mcp.tools

    {pid, ref} =
      spawn_monitor(fn ->
        on_update = fn payload -> send(server, {:progress, id, payload}) end
        call = %{id: to_string(id), name: module.name(), arguments: args}

        result =
          CMDC.Tool.Runner.run(tools, call, %{context | tool_call_id: to_string(id)},
            on_update: on_update
          )

        send(server, {:done, id, result})
      end)

    put_in(state.calls[id], %{pid: pid, ref: ref, token: token, count: 0})
  end

  defp perform({:cancel, id}, state) do
    case Map.pop(state.calls, id) do
      {nil, _} ->
        state

      {%{pid: pid, ref: ref}, calls} ->
        Process.demonitor(ref, [:flush])
        Process.exit(pid, :kill)
        # A cancelled request gets no response (MCP cancellation rules).
        %{state | calls: calls}
    end
  end

  defp progress(state, id, text) do
    case state.calls[id] do
      %{token: nil} ->
        state

      %{token: token, count: count} = call ->
        state = put_in(state.calls[id], %{call | count: count + 1})
        write(state, MCP.progress(token, count + 1, progress_text(text)))

      nil ->
        state
    end
  end

  defp progress_text(text) when is_binary(text), do: text

  defp progress_text(details) do
    case CMDC.Tool.JSON.encode(details) do
      {:ok, json} -> json
      {:error, _} -> inspect(details)
    end
  end

  defp done(state, id, result) do
    case Map.pop(state.calls, id) do
      {nil, _} ->
        state

      {%{ref: ref}, calls} ->
        Process.demonitor(ref, [:flush])
        write(%{state | calls: calls}, MCP.reply(id, MCP.call_result(result)))
    end
  end

  defp down(%{reader: {_, ref}} = state, ref, _reason), do: %{state | eof?: true}

  defp down(state, ref, reason) do
    case Enum.find(state.calls, fn {_, call} -> call.ref == ref end) do
      nil ->
        state

      {id, _} ->
        Logger.error("mcp: call #{inspect(id)} crashed: #{inspect(reason)}")
        state = %{state | calls: Map.delete(state.calls, id)}
        write(state, MCP.reply(id, MCP.call_result({:error, "the tool crashed"})))
    end
  end

  defp refresh_tools(%{refresh: nil} = state), do: state

  defp refresh_tools(%{refresh: fun} = state) do
    tools = fun.()

    if describe(tools) == describe(state.mcp.tools) do
      state
    else
      write(%{state | mcp: %{state.mcp | tools: tools}}, MCP.list_changed())
    end
  end

  defp describe(tools), do: Enum.map(tools, &MCP.describe/1)

  defp write(state, msg) do
    case CMDC.Tool.JSON.encode(msg) do
      {:ok, json} ->
        IO.binwrite(state.output, [json, "\n"])

      {:error, reason} ->
        Logger.error("mcp: cannot encode a reply: #{reason}")
        fallback = MCP.error(msg["id"], -32_603, "Internal error: reply not encodable")
        IO.binwrite(state.output, [CMDC.Tool.JSON.encode!(fallback), "\n"])
    end

    state
  end
end
