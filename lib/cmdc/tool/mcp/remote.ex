defmodule CMDC.Tool.MCP.Remote do
  @moduledoc """
  The tools of MCP servers as `CMDC.Tool` modules.

  `CMDC.Tool.MCP.Client` puts each listed tool in a slot of `CMDC.Tool.MCP.Slots` (a reused
  module made from the script-tool template, its data in ETS), so they work wherever a tool
  module does: `CMDC.Tool.find/2`, `to_schema/3`, the runner, the CLI, our own
  MCP server (which makes it a proxy) and the cluster.

    * `name/0` - `server__tool` (`CMDC.Tool.MCP.Client.tool_name/2`), or the server's own name
      with `namespace: false`.
    * `description/0` - the tool's `description` (else its `title`).
    * `parameters/0` - its `inputSchema`, compiled natively: `execute/2` validates the
      arguments before anything crosses the wire, and a model gets the usual error text.
    * `title/0`, `annotations/0` (see `CMDC.Tool.Structured`) - the tool's `title` and
      `annotations` (`nil` when the server gave none), so our own MCP server passes them on.
    * `__tool_settings__/0` - `%{server:, remote_name:, output_schema:}` (the `outputSchema`
      where given; `structuredContent` itself is in `CMDC.Tool.MCP.Client.call_tool/4`'s
      result, while `execute/2` returns the text content the model reads).
    * `execute/2` - `tools/call`: progress notifications become partial results
      (`CMDC.Context.update/2`), a time-out cancels the request on the server, `isError`
      results are `{:error, text}`, and `text/1` describes every content item.
  """

  alias CMDC.Tool.MCP.Client.Request
  alias CMDC.Tool.MCP.Slots
  alias CMDC.Tool.Native

  @doc false
  # Puts one server's checked tool list in slots (`CMDC.Tool.MCP.Slots`): a tool keeps the slot
  # it had (`held`: remote name => module), a new one takes a free slot, and slots of tools
  # no longer listed are freed. `{:ok, held, modules, problems}` (a tool whose schema does not
  # compile, or whose name repeats, is left out with a problem saying why) or `{:error, message}`
  # (over `max_total_tools`: the server keeps its old slots).
  def define(server, client, defs, held, opts) do
    {entries, problems} = entries(server, client, defs, opts)
    pairs = Enum.map(entries, fn {remote, data, _} -> {Map.get(held, remote), data} end)

    with {:ok, modules} <- Slots.assign(pairs, opts[:max_total_tools] || 20_000, __MODULE__) do
      Enum.zip(modules, entries)
      |> Enum.each(fn {module, {_, _, compiled}} -> put_schema(module, compiled) end)

      now = Map.new(Enum.zip(Enum.map(entries, &elem(&1, 0)), modules))
      Slots.release(for {remote, m} <- held, not Map.has_key?(now, remote), do: m)
      {:ok, now, modules, problems}
    end
  end

  defp entries(server, client, defs, opts) do
    {entries, problems, _seen} =
      Enum.reduce(defs, {[], [], %{}}, fn tool, {entries, problems, seen} ->
        case entry(server, client, tool, opts) do
          {:ok, {remote, _, _}} when is_map_key(seen, remote) ->
            {entries, ["the server lists tool #{remote} twice: the first is kept" | problems],
             seen}

          {:ok, {remote, _, _} = entry} ->
            {[entry | entries], problems, Map.put(seen, remote, true)}

          {:error, problem} ->
            {entries, [problem | problems], seen}
        end
      end)

    {Enum.reverse(entries), Enum.reverse(problems)}
  end

  # The validator `CMDC.Tool.Schema.for_module/1` would compile, stored for the slot's current
  # version now: a reused slot's module (and so its MD5) stays the same while its tool changes.
  # The store keeps the first schema put for a version, so a reused slot's entry is first
  # replaced under a version no module has, then under the slot's own.
  defp put_schema(module, compiled) do
    md5 = :erlang.get_module_info(module, :md5)
    {:ok, _} = Native.module_schema_put(module, :parameters, <<>>, {:ok, compiled})
    {:ok, _} = Native.module_schema_put(module, :parameters, md5, {:ok, compiled})
  end

  defp entry(server, client, %{"name" => remote} = tool, opts) do
    name =
      if opts[:namespace] == false, do: remote, else: Native.tool_name_namespaced(server, remote)

    schema = mcp_dialect(tool["inputSchema"])

    with {:ok, compiled} <- compile(schema, remote) do
      settings =
        if tool["outputSchema"],
          do: %{server: server, remote_name: remote, output_schema: tool["outputSchema"]},
          else: %{server: server, remote_name: remote}

      data = %{
        title: tool["title"],
        annotations: tool["annotations"],
        # Not `output_schema/0`: the model reads the server's text content (SDKs wrap even a
        # plain string in a structure), so the runner must not demand the structure.
        output_schema: nil,
        name: name,
        description: tool["description"] || tool["title"] || "",
        parameters: schema,
        settings: settings,
        script: %{server: server, tool: remote},
        client: client,
        remote: remote,
        server: server,
        timeout: opts[:timeout]
      }

      {:ok, {remote, data, compiled}}
    end
  end

  # MCP reads an inputSchema without `$schema` as JSON Schema 2020-12: said in the schema, so
  # every path that reads it (validation, provider output) reads that draft.
  defp mcp_dialect(%{} = schema) when not is_map_key(schema, "$schema"),
    do: Map.put(schema, "$schema", "https://json-schema.org/draft/2020-12/schema")

  defp mcp_dialect(schema), do: schema

  defp compile(schema, remote) do
    case CMDC.Tool.Schema.compile(schema) do
      {:ok, compiled} ->
        {:ok, compiled}

      {:error, message} ->
        {:error, "tool #{remote} left out: its inputSchema does not compile: #{message}"}
    end
  end

  @doc false
  def undefine_all(modules), do: Slots.release(modules)

  @doc false
  # The slot modules' data (`CMDC.Tool.MCP.Slots`); a freed slot raises, naming the module.
  def __field__(module, key), do: Map.fetch!(data!(module), key)

  @doc false
  def __optional__(module, key), do: field(module, key, nil)

  @doc false
  def field(module, key, default) do
    case Slots.lookup(module) do
      nil -> default
      data -> Map.get(data, key, default)
    end
  end

  defp data!(module) do
    Slots.lookup(module) ||
      raise ArgumentError,
            "#{inspect(module)} no longer holds an MCP tool (its server stopped or stopped " <>
              "listing it): look tools up by name"
  end

  @doc false
  # The generated modules' meta/1.
  def meta(module, _args), do: __field__(module, :name)

  @doc false
  # The generated modules' execute/2.
  def execute(module, args, context) do
    with {:ok, data} <- live(module),
         {:ok, args} <- validate(module, args) do
      opts = [on_progress: &progress(context, &1)]
      opts = if data.timeout, do: Keyword.put(opts, :timeout, data.timeout), else: opts

      case Request.run(data.client, "tools/call", call_params(data.remote, args), opts) do
        {:ok, %{"isError" => true} = result} ->
          {:error, text(result)}

        {:ok, result} ->
          {:ok, text(result)}

        {:error, message} ->
          {:error, message}
      end
    end
  end

  # What CMDC.Tool.MCP.Client.call_tool/4 sends.
  defp call_params(remote, args), do: %{"name" => remote, "arguments" => args}

  defp live(module) do
    case Slots.lookup(module) do
      nil -> {:error, "this MCP tool is gone (its server stopped or no longer lists it)"}
      data -> {:ok, data}
    end
  end

  defp validate(module, args) do
    case CMDC.Tool.validate(module, args) do
      {:ok, args} -> {:ok, args}
      {:error, errors} -> {:error, CMDC.Tool.format_errors(errors, module)}
    end
  end

  defp progress(%CMDC.Context{} = context, params) do
    CMDC.Context.update(context, progress_text(params))
  end

  defp progress(_, _), do: :ok

  @doc """
  The text of one progress notification: its message, else `progress/total`.

      iex> CMDC.Tool.MCP.Remote.progress_text(%{"progress" => 2, "total" => 5})
      "2/5"

      iex> CMDC.Tool.MCP.Remote.progress_text(%{"progress" => 1, "message" => "indexing"})
      "indexing"
  """
  @spec progress_text(map()) :: String.t()
  def progress_text(%{"message" => message}) when is_binary(message), do: message
  def progress_text(%{"progress" => p, "total" => t}) when t != nil, do: "#{p}/#{t}"
  def progress_text(%{"progress" => p}), do: to_string(p)

  @doc """
  The text a model reads for a `tools/call` result: text items as they are, every other
  content item described (images, audio, resources and links are named with their type and
  size, not dropped); `structuredContent` as JSON when there is no content item.

      iex> CMDC.Tool.MCP.Remote.text(%{"content" => [%{"type" => "text", "text" => "hi"},
      ...>   %{"type" => "image", "mimeType" => "image/png", "data" => "AAAA"}]})
      "hi\\n[image: image/png, 3 bytes]"

      iex> CMDC.Tool.MCP.Remote.text(%{"content" => [], "structuredContent" => %{"n" => 1}})
      ~s({"n":1})
  """
  @spec text(map()) :: String.t()
  def text(result) do
    items = Enum.map(List.wrap(result["content"]), &item/1)
    structured = structured(result["structuredContent"], items)
    Enum.join(items ++ structured, "\n")
  end

  defp structured(nil, _items), do: []
  # Servers mirror structured content in a text item (the specification asks them to), which
  # is what the model reads; the structure itself stays in `Client.call_tool/4`'s result.
  defp structured(value, []), do: [CMDC.Tool.JSON.encode!(value)]
  defp structured(_value, _items), do: []

  defp item(%{"type" => "text", "text" => text}), do: text

  defp item(%{"type" => kind, "data" => data} = item) when kind in ["image", "audio"],
    do: "[#{kind}: #{item["mimeType"] || "unknown type"}, #{decoded_size(data)} bytes]"

  defp item(%{"type" => "resource", "resource" => %{"text" => text} = r}),
    do: "[resource #{r["uri"]}]\n" <> text

  defp item(%{"type" => "resource", "resource" => %{"blob" => blob} = r}),
    do: "[resource #{r["uri"]}: #{r["mimeType"] || "binary"}, #{decoded_size(blob)} bytes]"

  defp item(%{"type" => "resource_link", "uri" => uri} = link) do
    details =
      [link["name"], link["mimeType"], link["description"]]
      |> Enum.filter(&is_binary/1)
      |> Enum.join(", ")

    "[resource link: #{uri}#{if details != "", do: " (" <> details <> ")"}]"
  end

  defp item(other), do: "[#{other["type"] || "content"}: #{CMDC.Tool.JSON.encode!(other)}]"

  defp decoded_size(data) when is_binary(data) do
    pad = data |> String.slice(-2, 2) |> String.graphemes() |> Enum.count(&(&1 == "="))
    div(byte_size(data) * 3, 4) - pad
  end

  defp decoded_size(_), do: 0
end
