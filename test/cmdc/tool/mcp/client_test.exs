defmodule CMDC.Tool.MCPClientTest do
  # Against real servers nobody here wrote: the official Python SDK's server (stdio and
  # Streamable HTTP) and the official reference servers from npm.
  use ExUnit.Case, async: true

  import CMDC.Tool.Eventually

  import ExUnit.CaptureLog

  alias CMDC.Tool.MCP.{Client, Remote}
  alias CMDC.Tool.{MCPServers, Registry, Runner}

  doctest Client
  doctest Remote
  doctest CMDC.Tool.MCP.Client.SSE

  @moduletag timeout: 120_000
  # The servers' stderr goes to the log (debug): shown only when a test fails.
  @moduletag :capture_log

  defp start_client(name, transport, opts \\ []) do
    opts = Keyword.merge([name: name, transport: transport, init_timeout: 30_000], opts)
    client = start_supervised!({Client, opts}, id: name)
    client
  end

  defp tool(client, name) do
    Enum.find(Client.tools(client), &(&1.name() == name)) ||
      flunk("no tool #{name} in #{inspect(Enum.map(Client.tools(client), & &1.name()))}")
  end

  defp python_stdio do
    case MCPServers.python_stdio() do
      {:ok, spec} -> {:stdio, spec}
      {:error, reason} -> flunk("the Python SDK could not be installed: #{reason}")
    end
  end

  defp context(test_pid \\ self()) do
    CMDC.Context.new(private: %{update: fn payload -> send(test_pid, {:update, payload}) end})
  end

  describe "the Python SDK's server over stdio" do
    test "initialize, list (namespaced), call, validation before the wire, ping" do
      client = start_client("py", python_stdio())
      assert :ok = Client.await_ready(client)
      info = Client.info(client)
      # The SDK answers the server/discover probe: the modern era, no handshake.
      assert {info.era, info.version} == {:modern, "2026-07-28"}
      assert info.server_info["name"] == "py-sdk-server"

      names = Enum.map(info.tools, & &1.name())
      assert "py__add" in names and "py__slow" in names

      add = tool(client, "py__add")
      assert add.description() == "Add two integers."
      # Its outputSchema is kept (the text content is what the model reads).
      assert %{"properties" => %{"result" => _}} = add.__tool_settings__().output_schema
      assert add.parameters()["required"] == ["a", "b"]
      assert {:ok, "5"} = add.execute(%{"a" => 2, "b" => 3}, context())

      # Invalid arguments never reach the server: the native validator answers.
      assert {:error, message} = add.execute(%{"a" => "two"}, context())
      assert message =~ "Invalid arguments"
      assert message =~ "a (integer, required)"

      assert :ok = Client.ping(client)
    end

    test "protocol 2025-06-18 is negotiated when asked for" do
      client = start_client("old", python_stdio(), protocol_version: "2025-06-18")
      assert :ok = Client.await_ready(client)
      assert Client.info(client).version == "2025-06-18"
      assert :ok = Client.ping(client)

      assert {:ok, "3"} = tool(client, "old__add").execute(%{"a" => 1, "b" => 2}, context())
    end

    test "progress streams through the runner; errors, images and structured content" do
      client = start_client("rt", python_stdio())
      :ok = Client.await_ready(client)
      registry = Registry.new()
      :ok = Registry.register(registry, Client.tools(client))

      me = self()
      call = %{id: "c1", name: "rt__slow", arguments: %{"steps" => 3}}

      result =
        Runner.run(registry, call, CMDC.Context.new(),
          on_update: fn payload -> send(me, {:partial, payload}) end
        )

      assert %{content: "counted to 3", is_error: false} = result
      assert_received {:partial, "step 1"}
      assert_received {:partial, "step 2"}
      assert_received {:partial, "step 3"}

      assert {:error, "Error executing tool fail" <> _} =
               tool(client, "rt__fail").execute(%{"reason" => "x"}, context())

      assert {:ok, "[image: image/png, 16 bytes]"} =
               tool(client, "rt__picture").execute(%{}, context())

      assert {:ok, %{"structuredContent" => %{"result" => 5}}} =
               Client.call_tool(client, "add", %{"a" => 2, "b" => 3})
    end

    test "a time-out sends notifications/cancelled and the server stops the work" do
      client = start_client("cx", python_stdio())
      :ok = Client.await_ready(client)

      assert {:error, "tools/call timed out after 300 ms (cancelled on the server)"} =
               Client.call_tool(client, "sleep", %{"seconds" => 30}, timeout: 300)

      # A caller killed mid-call (a runner's own time-out) cancels too.
      caller = spawn(fn -> Client.call_tool(client, "sleep", %{"seconds" => 30}) end)
      # Killed once its request is on the way (the client holds it as pending).
      eventually(fn -> Enum.any?(:sys.get_state(client).pending, &(elem(&1, 1).kind == :call)) end)

      Process.exit(caller, :kill)

      eventually(fn ->
        {:ok, %{"content" => [%{"text" => n}]}} = Client.call_tool(client, "cancelled", %{})

        n == "2"
      end)
    end

    test "notifications/tools/list_changed: the new tool is defined and registered" do
      registry = Registry.new()
      me = self()

      client =
        start_client("grow", python_stdio(),
          registry: registry,
          on_change: fn modules -> send(me, {:changed, Enum.map(modules, & &1.name())}) end
        )

      :ok = Client.await_ready(client)
      assert_receive {:changed, _}
      assert {:error, :not_found} = CMDC.Tool.find(registry, "grow__late")
      assert {:ok, "grown"} = tool(client, "grow__grow").execute(%{}, context())
      assert_receive {:changed, names}
      assert "grow__late" in names
      assert {:ok, late} = CMDC.Tool.find(registry, "grow__late")
      assert {:ok, "late tool here"} = late.execute(%{}, context())
    end

    test "a crash mid-call ends the call at once with the reason; the client reconnects" do
      client = start_client("crashy", python_stdio())
      :ok = Client.await_ready(client)
      started = System.monotonic_time(:millisecond)

      log =
        capture_log(fn ->
          assert {:error, message} =
                   tool(client, "crashy__crash").execute(%{"after" => 0.2}, context())

          assert message =~ "MCP server crashy"
          assert message =~ "exited with status 3"
        end)

      # Ended by the exit, not by the call's 60 s time-out.
      assert System.monotonic_time(:millisecond) - started < 60_000
      assert log =~ "exited with status 3"

      # The next call waits for the restarted server.
      assert {:ok, "7"} = tool(client, "crashy__add").execute(%{"a" => 3, "b" => 4}, context())

      assert Client.info(client).restarts == 1
    end

    test "garbage on stdout is logged and skipped" do
      {:stdio, %{command: python, args: args}} = python_stdio()
      script = ~s(echo "Loading plugins... done"; echo '{"broken'; exec "$0" "$@")

      log =
        capture_log(fn ->
          client =
            start_client("noisy", {:stdio, %{command: "sh", args: ["-c", script, python | args]}})

          assert :ok = Client.await_ready(client)

          assert {:ok, "2"} = tool(client, "noisy__add").execute(%{"a" => 1, "b" => 1}, context())
        end)

      assert log =~ "ignored a stdout line that is not JSON-RPC: Loading plugins... done"
    end

    test "a server that never answers initialize: a clear time-out, the program is stopped" do
      # An odd duration names this test's processes in `ps`.
      silent = {:stdio, %{command: "sh", args: ["-c", "echo started >&2; exec sleep 61.25"]}}
      client = start_client("mute", silent, init_timeout: 500)

      assert {:error, message} = Client.await_ready(client)

      assert message ==
               "MCP server mute did not answer `initialize` within 500 ms; " <>
                 "its stderr ended with: started"

      assert Client.info(client).status == :down
      # Each attempt's program is stopped before the next starts; stopping the client stops all.
      assert live_sleepers() <= 1
      stop_supervised!("mute")
      eventually(fn -> live_sleepers() == 0 end, message: "the silent server is still running")
    end

    test "a missing command is an error naming the server" do
      client = start_client("ghost", {:stdio, %{command: "no-such-mcp-server-cmdc"}})

      capture_log(fn ->
        assert {:error, message} = Client.await_ready(client)
        assert message =~ "MCP server ghost"
        assert message =~ "no-such-mcp-server-cmdc"
      end)
    end

    test "our own MCP server serves remote tools: a proxy" do
      client = start_client("px", python_stdio())
      :ok = Client.await_ready(client)
      state = CMDC.Tool.MCP.new(Client.tools(client))
      init = %{"protocolVersion" => "2025-11-25", "capabilities" => %{}}

      {_, state} =
        CMDC.Tool.MCP.handle(CMDC.Tool.MCP.Protocol.request(0, "initialize", init), state)

      {_, state} =
        CMDC.Tool.MCP.handle(
          CMDC.Tool.MCP.Protocol.notification("notifications/initialized"),
          state
        )

      list = CMDC.Tool.MCP.Protocol.request(1, "tools/list")
      {[%{"result" => %{"tools" => tools}}], _} = CMDC.Tool.MCP.handle(list, state)
      assert "px__add" in Enum.map(tools, & &1["name"])
    end
  end

  describe "the Python SDK's server over Streamable HTTP" do
    test "list, call, progress, cancel and list_changed" do
      {:ok, url, _server} = MCPServers.python_http()
      client = start_client("web", {:http, %{url: url, headers: %{"X-Test" => "1"}}})
      assert :ok = Client.await_ready(client)
      assert Client.info(client).version == "2026-07-28"

      assert {:ok, "3"} = tool(client, "web__add").execute(%{"a" => 1, "b" => 2}, context())

      assert {:ok, "counted to 2"} = tool(client, "web__slow").execute(%{"steps" => 2}, context())
      assert_received {:update, "step 1"}
      assert_received {:update, "step 2"}

      assert {:error, _} = Client.call_tool(client, "sleep", %{"seconds" => 30}, timeout: 300)

      eventually(fn ->
        match?(
          {:ok, %{"content" => [%{"text" => "1"}]}},
          Client.call_tool(client, "cancelled", %{})
        )
      end)

      assert {:ok, "grown"} = tool(client, "web__grow").execute(%{}, context())
      eventually(fn -> Enum.any?(Client.tools(client), &(&1.name() == "web__late")) end)
      assert :ok = Client.ping(client)
    end

    test "a server that is not there: an error naming the server and the address" do
      client = start_client("nowhere", {:http, %{url: "http://127.0.0.1:9/mcp"}})

      capture_log(fn ->
        assert {:error, message} = Client.await_ready(client)
        assert message =~ "MCP server nowhere"
        assert message =~ "127.0.0.1:9"
      end)
    end
  end

  describe "the official reference servers (npm)" do
    @describetag :npm
    test "server-everything: list, call, progress, content of every kind" do
      case MCPServers.npm("@modelcontextprotocol/server-everything") do
        {:error, reason} ->
          IO.puts("skipped server-everything: #{reason}")

        {:ok, main} ->
          client = start_client("ev", {:stdio, %{command: "node", args: [main, "stdio"]}})
          assert :ok = Client.await_ready(client)

          assert {:ok, "Echo: hi"} =
                   tool(client, "ev__echo").execute(%{"message" => "hi"}, context())

          assert {:ok, text} =
                   tool(client, "ev__get-sum").execute(%{"a" => 2, "b" => 3}, context())

          assert text =~ "5"

          long = tool(client, "ev__trigger-long-running-operation")
          assert {:ok, done} = long.execute(%{"duration" => 0.3, "steps" => 3}, context())
          assert done =~ "Long running operation completed"
          assert_received {:update, "1/3"}
          assert_received {:update, "3/3"}

          assert {:ok, image} = tool(client, "ev__get-tiny-image").execute(%{}, context())
          assert image =~ ~r/\[image: image\/png, \d+ bytes\]/

          assert {:ok, links} =
                   tool(client, "ev__get-resource-links").execute(%{"count" => 2}, context())

          assert links =~ "[resource link: "
      end
    end

    test "server-filesystem: read a file under the allowed folder, refuse one outside" do
      case MCPServers.npm("@modelcontextprotocol/server-filesystem") do
        {:error, reason} ->
          IO.puts("skipped server-filesystem: #{reason}")

        {:ok, main} ->
          dir = Path.join(System.tmp_dir!(), "cmdc-fs-#{System.unique_integer([:positive])}")
          File.mkdir_p!(dir)
          File.write!(Path.join(dir, "note.txt"), "hello from a file")
          on_exit(fn -> File.rm_rf!(dir) end)

          client = start_client("fs", {:stdio, %{command: "node", args: [main, dir]}})
          assert :ok = Client.await_ready(client)
          read = tool(client, "fs__read_text_file")

          assert {:ok, "hello from a file"} =
                   read.execute(%{"path" => Path.join(dir, "note.txt")}, context())

          assert {:error, denied} = read.execute(%{"path" => "/etc/hostname"}, context())
          assert denied =~ "denied" or denied =~ "outside"
      end
    end
  end

  defp live_sleepers do
    {out, 0} = System.cmd("ps", ["-eo", "stat=,args="])
    out |> String.split("\n") |> Enum.count(&(&1 =~ "sleep 61.25" and not (&1 =~ ~r/^\s*Z/)))
  end
end
