defmodule CMDC.Tool.MCP.Remote do
  @moduledoc """
  The tools of MCP servers as `CMDC.Tool` modules.

  `CMDC.Tool.MCP.Client` defines one module per listed tool, generated as script tools are
  (`CMDC.Tool.Script.Gen`: a template BEAM with its atoms renamed, no compiler), so they work
  wherever a tool module does: `CMDC.Tool.find/2`, `to_schema/3`, the runner, the CLI, our own
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

  alias CMDC.Tool.MCP.Client
  alias CMDC.Tool.Script.Gen

  @doc false
  # Defines the modules of one server's tool list: `{modules, problems}` (a tool whose schema
  # does not compile, or whose name repeats, is left out with a problem saying why).
  def define(server, client, defs, opts) do
    {entries, problems} =
      Enum.reduce(defs, {[], []}, fn tool, {entries, problems} ->
        case entry(server, client, tool, opts) do
          {:ok, entry} -> {[entry | entries], problems}
          {:error, problem} -> {entries, [problem | problems]}
        end
      end)

    {entries, dupes} =
      entries
      |> Enum.reverse()
      |> Enum.reduce({[], %{}}, fn {_module, data} = e, {acc, seen} ->
        if Map.has_key?(seen, data.name),
          do: {acc, Map.update!(seen, data.name, &(&1 + 1))},
          else: {[e | acc], Map.put(seen, data.name, 1)}
      end)

    problems =
      Enum.reverse(problems) ++
        for {name, n} <- dupes,
            n > 1,
            do: "the server lists #{n} tools named #{name}: the first is kept"

    :ok = Gen.define_many(Enum.reverse(entries), __MODULE__)
    {Enum.map(Enum.reverse(entries), &elem(&1, 0)), problems}
  end

  defp entry(server, client, %{"name" => remote} = tool, opts) when is_binary(remote) do
    name = if opts[:namespace] == false, do: remote, else: Client.tool_name(server, remote)
    schema = mcp_dialect(Map.get(tool, "inputSchema", %{"type" => "object"}))

    with :ok <- check_schema(schema, remote) do
      module = Module.concat([CMDC.Tool.MCP.Tools, "S" <> hash(server), "T" <> hash(remote)])

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

      {:ok, {module, data}}
    end
  end

  defp entry(_server, _client, tool, _opts),
    do: {:error, "a listed tool has no name: #{inspect(tool, limit: 5)}"}

  # MCP reads an inputSchema without `$schema` as JSON Schema 2020-12: said in the schema, so
  # every path that reads it (validation, provider output) reads that draft.
  defp mcp_dialect(%{} = schema) when not is_map_key(schema, "$schema"),
    do: Map.put(schema, "$schema", "https://json-schema.org/draft/2020-12/schema")

  defp mcp_dialect(schema), do: schema

  defp check_schema(schema, remote) when is_map(schema) do
    case CMDC.Tool.Schema.compile(schema) do
      {:ok, _} ->
        :ok

      {:error, message} ->
        {:error, "tool #{remote} left out: its inputSchema does not compile: #{message}"}
    end
  end

  defp check_schema(_schema, remote),
    do: {:error, "tool #{remote} left out: its inputSchema is not an object"}

  defp hash(text), do: Integer.to_string(:erlang.phash2(text, 4_294_967_296), 36)

  @doc false
  def undefine_all(modules), do: Enum.each(modules, &Gen.undefine(&1, __MODULE__))

  @doc false
  # The generated modules' data.
  def __field__(module, key), do: Map.fetch!(:persistent_term.get({__MODULE__, module}), key)

  @doc false
  def field(module, key, default) do
    case :persistent_term.get({__MODULE__, module}, nil) do
      nil -> default
      data -> Map.get(data, key, default)
    end
  end

  @doc false
  # The generated modules' meta/1.
  def meta(module, _args), do: __field__(module, :name)

  @doc false
  # The generated modules' execute/2.
  def execute(module, args, context) do
    data = :persistent_term.get({__MODULE__, module})

    with {:ok, args} <- validate(module, args) do
      opts = [on_progress: &progress(context, &1)]
      opts = if data.timeout, do: Keyword.put(opts, :timeout, data.timeout), else: opts

      case Client.call_tool(data.client, data.remote, args, opts) do
        {:ok, %{"isError" => true} = result} ->
          {:error, text(result)}

        {:ok, result} ->
          {:ok, text(result)}

        {:error, message} ->
          {:error, message}
      end
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
