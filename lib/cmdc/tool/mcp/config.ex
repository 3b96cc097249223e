defmodule CMDC.Tool.MCP.Config do
  @moduledoc """
  Reads the MCP server configs people already have: Claude Code's `.mcp.json` format.

      {"mcpServers": {
         "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                   "env": {"LOG": "${LOG_LEVEL:-info}"}},
         "docs":  {"type": "http", "url": "https://example.com/mcp",
                   "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
      }}

  A server with a `command` is started over stdio (`"type": "stdio"` may say so); `"type":
  "http"` (or `"streamable-http"`) with a `url` is a Streamable HTTP server. `${VAR}` and
  `${VAR:-default}` are expanded in `command`, `args`, `env`, `url` and `headers`.

  ## Our own keys: `"cmdc"`

  Keys other clients do not read sit in one object, `"cmdc"`, so Claude Code and the rest
  (which ignore keys they do not know) read the same file unchanged. For an HTTP server:

    * `"keepAlive"` - `false` opens a new connection for every request (default `true`:
      connections are kept alive and reused; `keep_alive:` of the transport spec);
    * `"httpConnections"` - requests holding a connection at once, and idle connections kept
      (a positive integer, default 8; `CMDC.Tool.MCP.Client.Limits`' `http_connections`);
    * `"httpIdleMs"` - how long an idle kept-alive connection waits for the next request, in
      ms (a positive integer, default 30,000; `http_idle_ms`).

        "docs": {"type": "http", "url": "https://example.com/mcp",
                 "cmdc": {"keepAlive": false}}

  A bad value is that server's error, naming the key; an unknown key in `"cmdc"` is logged
  (with the nearest known key) and ignored, as unknown keys of an entry are. A stdio server
  ignores the object.

      iex> json = ~s({"mcpServers": {"d": {"type": "http", "url": "http://127.0.0.1:9/mcp",
      ...>   "cmdc": {"keepAlive": false, "httpIdleMs": 500}}}})
      iex> {[server], []} = CMDC.Tool.MCP.Config.parse(json, "/p/.mcp.json", %{})
      iex> {server.transport, server.limits}
      {{:http, %{url: "http://127.0.0.1:9/mcp", headers: %{}, keep_alive: false}}, [http_idle_ms: 500]}

  Every problem is an error naming the file and the server (invalid JSON, an unknown
  transport, a missing command or url, an unset variable, a bad `"cmdc"` value); the other
  servers of the file are still read.

      iex> json = ~s({"mcpServers": {"a": {"command": "srv", "args": ["${HOME_X:-/h}"]},
      ...>   "b": {"type": "sse", "url": "http://x"}}})
      iex> {[server], [error]} = CMDC.Tool.MCP.Config.parse(json, "/p/.mcp.json", %{})
      iex> {server.name, server.transport}
      {"a", {:stdio, %{command: "srv", args: ["/h"], env: %{}, cwd: "/p"}}}
      iex> error.reason
      ~s|/p/.mcp.json: server "b": unknown transport "sse" (supported: stdio, http; the old HTTP+SSE transport is not)|
  """

  require Logger

  alias CMDC.Tool.JSON
  alias CMDC.Tool.MCP.Client.Transports

  @extension_key "cmdc"

  @type server :: %{
          required(:name) => String.t(),
          required(:transport) => {:stdio, map()} | {:http, map()},
          required(:path) => String.t(),
          optional(:limits) => keyword()
        }
  @type error :: %{
          type: :mcp_config,
          path: String.t(),
          server: String.t() | nil,
          reason: String.t()
        }

  @doc """
  Reads one config file: `{servers, errors}`. A missing file is `{[], []}`. `env` is the
  environment for `${VAR}` (default: the VM's).
  """
  @spec read(Path.t(), map()) :: {[server()], [error()]}
  def read(path, env \\ System.get_env()) do
    case File.read(path) do
      {:ok, text} -> parse(text, path, env)
      {:error, :enoent} -> {[], []}
      {:error, reason} -> {[], [error(path, nil, "unreadable: #{:file.format_error(reason)}")]}
    end
  end

  @doc "Parses a config's text (see `read/2`); `path` names it in errors."
  @spec parse(String.t(), String.t(), map()) :: {[server()], [error()]}
  def parse(text, path, env) do
    case JSON.decode(text) do
      {:ok, json} -> parse_json(json, path, env)
      {:error, message} -> {[], [error(path, nil, "invalid JSON: #{message}")]}
    end
  end

  @doc "Reads a config already decoded (see `parse/3`)."
  @spec parse_json(term(), String.t(), map()) :: {[server()], [error()]}
  def parse_json(json, path, env) do
    case {:ok, json} do
      {:ok, %{"mcpServers" => servers}} when is_map(servers) ->
        servers
        |> Enum.sort_by(&elem(&1, 0))
        |> Enum.reduce({[], []}, fn {name, entry}, {ok, errors} ->
          case server(name, entry, path, env) do
            {:ok, server} -> {[server | ok], errors}
            {:error, reason} -> {ok, [error(path, name, reason) | errors]}
          end
        end)
        |> then(fn {ok, errors} -> {Enum.reverse(ok), Enum.reverse(errors)} end)

      {:ok, %{"mcpServers" => _}} ->
        {[], [error(path, nil, "\"mcpServers\" must be an object of servers by name")]}

      {:ok, %{}} ->
        # Claude Code's ~/.claude.json holds much else; no servers is not an error.
        {[], []}

      {:ok, _} ->
        {[], [error(path, nil, "expected an object with \"mcpServers\"")]}
    end
  end

  defp error(path, nil, reason),
    do: %{type: :mcp_config, path: path, server: nil, reason: "#{path}: #{reason}"}

  defp error(path, server, reason),
    do: %{
      type: :mcp_config,
      path: path,
      server: server,
      reason: ~s(#{path}: server "#{server}": #{reason})
    }

  defp server(name, %{} = entry, path, env) do
    type = entry["type"] || if(entry["url"], do: "http", else: "stdio")

    with {:ok, transport} <- transport(Transports.lookup(type), type, entry, path, env),
         {:ok, transport, limits} <- extensions(transport, entry, {path, name}) do
      server = %{name: name, transport: transport, path: path}
      {:ok, if(limits == [], do: server, else: Map.put(server, :limits, limits))}
    end
  end

  defp server(_name, _entry, _path, _env), do: {:error, "expected an object"}

  # The config keys of each transport of `CMDC.Tool.MCP.Client.Transports`.
  defp transport({:ok, :stdio}, _type, entry, path, env) do
    with {:ok, command} <- required(entry, "command", "a stdio server needs one"),
         {:ok, command} <- expand(command, env),
         {:ok, args} <- strings(entry, "args", env),
         {:ok, vars} <- string_map(entry, "env", env) do
      {:ok, {:stdio, %{command: command, args: args, env: vars, cwd: Path.dirname(path)}}}
    end
  end

  defp transport({:ok, :http}, _type, entry, _path, env) do
    with {:ok, url} <- required(entry, "url", "an http server needs one"),
         {:ok, url} <- expand(url, env),
         :ok <- check_url(url),
         {:ok, headers} <- string_map(entry, "headers", env) do
      {:ok, {:http, %{url: url, headers: headers}}}
    end
  end

  defp transport(:error, type, _entry, _path, _env) do
    supported = Enum.join(Enum.map(Transports.names(), &Atom.to_string/1), ", ")
    legacy = if type == "sse", do: "; the old HTTP+SSE transport is not", else: ""
    {:error, "unknown transport #{inspect(type)} (supported: #{supported}#{legacy})"}
  end

  # Our own keys for an HTTP server, under `"cmdc"` (a key no other client reads):
  # `{:ok, transport, client limits}`. A bad value is the server's error; an unknown key there
  # is logged and ignored, as unknown keys of the entry itself are ignored. Other transports
  # ignore the object.
  @http_keys %{
    "keepAlive" => {:spec, :keep_alive, :boolean},
    "httpConnections" => {:limit, :http_connections, :positive},
    "httpIdleMs" => {:limit, :http_idle_ms, :positive}
  }

  defp extensions({:http, spec}, entry, where) do
    case Map.get(entry, @extension_key, %{}) do
      %{} = ours ->
        ours
        |> Enum.sort()
        |> Enum.reduce_while({:ok, {:http, spec}, []}, &http_key(&1, &2, where))
        |> case do
          {:ok, transport, limits} -> {:ok, transport, Enum.reverse(limits)}
          error -> error
        end

      other ->
        {:error,
         ~s|"#{@extension_key}" must be an object (keys: #{http_keys()}), got #{inspect(other)}|}
    end
  end

  defp extensions(transport, _entry, _where), do: {:ok, transport, []}

  defp http_key({key, value}, {:ok, {:http, spec}, limits}, where) do
    case {Map.fetch(@http_keys, key), value} do
      {{:ok, {:spec, field, :boolean}}, value} when is_boolean(value) ->
        {:cont, {:ok, {:http, Map.put(spec, field, value)}, limits}}

      {{:ok, {:limit, field, :positive}}, value} when is_integer(value) and value > 0 ->
        {:cont, {:ok, {:http, spec}, [{field, value} | limits]}}

      {{:ok, {_, _, kind}}, value} ->
        expected = if kind == :boolean, do: "true or false", else: "a positive integer"

        {:halt,
         {:error, ~s("#{@extension_key}.#{key}" must be #{expected}, got #{inspect(value)})}}

      {:error, _} ->
        unknown_key(key, where)
        {:cont, {:ok, {:http, spec}, limits}}
    end
  end

  defp unknown_key(key, {path, name}) do
    hint =
      case CMDC.Tool.Options.suggest(key, Map.keys(@http_keys)) do
        [best | _] -> " (did you mean #{inspect(best)}?)"
        [] -> ""
      end

    Logger.warning(
      ~s(#{path}: server "#{name}": "#{@extension_key}.#{key}" is not a key cmdc_tool reads) <>
        "#{hint}; ignored (keys: #{http_keys()})"
    )
  end

  defp http_keys, do: @http_keys |> Map.keys() |> Enum.sort() |> Enum.join(", ")

  defp required(entry, key, why) do
    case entry[key] do
      value when is_binary(value) and value != "" -> {:ok, value}
      nil -> {:error, "no \"#{key}\" (#{why})"}
      other -> {:error, ~s("#{key}" must be a non-empty string, got #{inspect(other)})}
    end
  end

  defp check_url(url) do
    case URI.parse(url) do
      %URI{scheme: scheme, host: host}
      when scheme in ["http", "https"] and host not in [nil, ""] ->
        :ok

      _ ->
        {:error, ~s("url" must be an http:// or https:// address, got #{inspect(url)})}
    end
  end

  defp strings(entry, key, env) do
    case Map.get(entry, key, []) do
      list when is_list(list) ->
        if Enum.all?(list, &is_binary/1),
          do: collect(list, &expand(&1, env)),
          else: {:error, ~s("#{key}" must be a list of strings)}

      _ ->
        {:error, ~s("#{key}" must be a list of strings)}
    end
  end

  defp string_map(entry, key, env) do
    case Map.get(entry, key, %{}) do
      %{} = map ->
        if Enum.all?(map, fn {_, v} -> is_binary(v) end) do
          with {:ok, pairs} <-
                 collect(map, fn {k, v} ->
                   with {:ok, v} <- expand(v, env), do: {:ok, {k, v}}
                 end),
               do: {:ok, Map.new(pairs)}
        else
          {:error, ~s("#{key}" must map names to strings)}
        end

      _ ->
        {:error, ~s("#{key}" must map names to strings)}
    end
  end

  defp collect(items, fun) do
    Enum.reduce_while(items, {:ok, []}, fn item, {:ok, acc} ->
      case fun.(item) do
        {:ok, value} -> {:cont, {:ok, [value | acc]}}
        {:error, _} = error -> {:halt, error}
      end
    end)
    |> case do
      {:ok, acc} -> {:ok, Enum.reverse(acc)}
      error -> error
    end
  end

  @doc """
  Expands `${VAR}` and `${VAR:-default}` in `text` from `env`: `{:ok, text}`, or
  `{:error, message}` naming an unset variable that has no default.

      iex> CMDC.Tool.MCP.Config.expand("Bearer ${TOKEN}", %{"TOKEN" => "t0k"})
      {:ok, "Bearer t0k"}

      iex> CMDC.Tool.MCP.Config.expand("${LEVEL:-info}/${TOKEN}", %{})
      {:error, "${TOKEN} is not set (give it a value, or a default: ${TOKEN:-value})"}
  """
  @spec expand(String.t(), map()) :: {:ok, String.t()} | {:error, String.t()}
  def expand(text, env) do
    missing =
      Regex.scan(~r/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/, text)
      |> Enum.map(fn [_, var] -> var end)
      |> Enum.find(&(not Map.has_key?(env, &1)))

    if missing do
      {:error, "${#{missing}} is not set (give it a value, or a default: ${#{missing}:-value})"}
    else
      {:ok,
       Regex.replace(~r/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/, text, fn
         whole, var, default ->
           case {Map.get(env, var), String.contains?(whole, ":-")} do
             # As in a shell, `:-` also replaces an empty value.
             {value, true} when value in [nil, ""] -> default
             {value, _} -> value
           end
       end)}
    end
  end
end
