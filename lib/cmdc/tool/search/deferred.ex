defmodule CMDC.Tool.Deferred do
  @moduledoc """
  Deferred loading: a large catalog of tools stays out of the prompt and the model finds what
  it needs with a search tool. A pass over `CMDC.Tool.Providers`' output, driven by the
  `to_schema/3` options:

    * `defer:` - `true` (every tool), a list of names, or an integer threshold (every tool when
      there are more than that many; none otherwise);
    * `always_loaded:` - names never deferred (the tools of every turn);
    * `search:` - which search tool: `:bm25` (default) or `:regex` for Anthropic's hosted tool
      search, `:hosted` (default) for OpenAI Responses' hosted `tool_search`, or `:client` for
      ours (`CMDC.Tool.Search.Tool`, `search_tools`, over the registry's native index);
    * `loaded:` - names a session already loaded (`CMDC.Tool.Session`), listed in full;
    * `namespaces:` - OpenAI Responses only: functions grouped into namespaces (MCP server,
      plugin, metadata, or a map of your own), see `CMDC.Tool.Deferred.Namespaces`.

  Every tool's schema warnings are reported as `warnings:` says (`CMDC.Tool.Providers.Warnings`),
  the deferred ones' included: their schemas reach the model later, through the search. Those
  of `search_tools` itself are not: its calls are checked against its own schema and it
  answers a bad query with a clear error, so nothing there is the user's to change.

  Per format:

    * `:anthropic` - deferred tools carry `"defer_loading" => true`, followed by the hosted
      `tool_search_tool_bm25_20251119` / `tool_search_tool_regex_20251119` declaration, or our
      `search_tools` (answer its calls with `anthropic_result/3`: `tool_reference` blocks);
    * `:openai_responses` - deferred functions carry `"defer_loading" => true` (inside their
      namespace with `namespaces:`), followed by `%{"type" => "tool_search"}` (hosted) or a
      client `tool_search` (`"execution" => "client"`, answer with `openai_search_output/3`);
    * `:openai`, `:gemini`, `:gemini_json_schema`, `:mcp` - no provider support: deferred tools
      are left out and `search_tools` is listed; its result names the tools, and
      `CMDC.Tool.Session` lists them in the next request.

  The client search tool must be registered in the registry the runner calls against
  (`CMDC.Tool.Session.new/2` does it), so `CMDC.Tool.Runner` runs its calls like any other.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile])
      iex> tools = CMDC.Tool.to_schema(reg, %{}, format: :anthropic, defer: true, always_loaded: ["echo"])
      iex> Enum.map(tools, &{&1["name"], &1["defer_loading"]})
      [{"echo", nil}, {"read_file", true}, {"tool_search_tool_bm25", nil}]
  """

  alias CMDC.Tool.{Native, Providers, Registry, Result}
  alias CMDC.Tool.Deferred.Namespaces
  alias CMDC.Tool.Providers.{Described, Warnings}
  alias CMDC.Tool.Search.ToolSpec

  @doc "The options this pass reads (the rest go to `CMDC.Tool.Providers.convert/3`)."
  @spec options() :: [atom()]
  defdelegate options, to: Providers, as: :deferral_options

  @doc """
  The tools list of `source` for `opts[:format]` with deferral applied (see the module doc).
  Raises `ArgumentError` for a bad option, as `CMDC.Tool.Providers.convert/3` does.
  """
  @spec to_schema(Providers.source(), CMDC.Tool.tool_context(), keyword()) :: [map()]
  def to_schema(source, context, opts) do
    {mode, opts} = Keyword.pop(opts, :warnings, :log)
    mode = Warnings.mode!(mode)
    convert_opts = Keyword.drop(opts, options())
    format = Keyword.get(opts, :format, :openai)
    namespaces = namespaces!(opts, format)
    {tools, warnings} = Providers.convert(source, context, convert_opts)
    # Deferred tools' schemas are sent later (loaded by the search): their changes are
    # reported now, with the always-loaded ones'.
    Warnings.report(Enum.reject(warnings, &own?(&1, source)), format, mode)
    decls = declarations(tools, format)
    deferred = deferred_names(decls, format, opts)

    out =
      if MapSet.size(deferred) == 0 do
        Namespaces.group(tools, source, namespaces)
      else
        decls
        |> defer(deferred, format, search_mode(format, opts), source, context, convert_opts)
        |> wrap(format)
        |> Namespaces.group(source, namespaces)
      end

    Warnings.report(empty_namespaces(namespaces, out), format, mode)
    out
  end

  # A namespace the `namespaces:` map names that no tool ended up in: the model would never see
  # it, and the functions meant for it are flat.
  defp empty_namespaces(nil, _out), do: []

  defp empty_namespaces(%{explicit: explicit}, out) do
    present = for %{"type" => "namespace", "name" => ns} <- out, into: MapSet.new(), do: ns

    for {ns, spec} <- Enum.sort(explicit), not MapSet.member?(present, ns) do
      listed =
        if spec.tools == [],
          do: "it lists no tools and no tool's own namespace is #{ns}",
          else: "none of its tools (#{Enum.join(spec.tools, ", ")}) is in the list"

      %{
        tool: "namespace #{ns}",
        path: "",
        keyword: "namespaces",
        message:
          "namespaces: no tool is in #{ns} (#{listed}); it is left out. Name its tools " <>
            "(%{#{inspect(ns)} => %{description: ..., tools: [names]}}) or give them that " <>
            "namespace (tool_options/0 or metadata \"namespace\")"
      }
    end
  end

  # Our own search tool's changes are not the user's to act on: its calls are checked against
  # its original schema, and it answers a bad query (empty, too long) with a clear error.
  defp own?(%{tool: name}, source) do
    name == ToolSpec.name() and
      case source do
        %Registry{} -> registered_own?(source)
        %Described{tools: tools} -> Enum.any?(tools, &ToolSpec.own?(&1.module))
        modules -> Enum.any?(modules, &ToolSpec.own?/1)
      end
  end

  defp namespaces!(opts, format) do
    case {Namespaces.spec!(Keyword.get(opts, :namespaces)), format} do
      {nil, _} ->
        nil

      {spec, :openai_responses} ->
        spec

      {_spec, other} ->
        raise ArgumentError,
              "namespaces: is an OpenAI Responses feature (format: :openai_responses), " <>
                "not #{inspect(other)}"
    end
  end

  # Gemini nests its declarations in one tool object.
  defp declarations([%{"functionDeclarations" => decls}], f)
       when f in [:gemini, :gemini_json_schema],
       do: decls

  defp declarations(tools, _format), do: tools

  defp wrap(decls, f) when f in [:gemini, :gemini_json_schema],
    do: [%{"functionDeclarations" => decls}]

  defp wrap(decls, _format), do: decls

  defp tool_name(%{"function" => %{"name" => name}}), do: name
  defp tool_name(%{"name" => name}), do: name

  defp deferred_names(decls, format, opts) do
    names = Enum.map(decls, &tool_name/1)

    keep =
      given_names(opts, :always_loaded, format)
      |> MapSet.union(given_names(opts, :loaded, format))

    keep = MapSet.put(keep, ToolSpec.name())

    candidates =
      case Keyword.get(opts, :defer, false) do
        true ->
          names

        false ->
          []

        n when is_integer(n) and n >= 0 ->
          if length(names) > n, do: names, else: []

        list when is_list(list) ->
          Enum.map(list, &provider_name(to_string(&1), format))

        other ->
          raise ArgumentError,
                "defer: expects true, a list of names or an integer, got #{inspect(other)}"
      end

    candidates
    |> MapSet.new()
    |> MapSet.intersection(MapSet.new(names))
    |> MapSet.difference(keep)
  end

  defp given_names(opts, key, format) do
    opts
    |> Keyword.get(key, [])
    |> Enum.map(&provider_name(to_string(&1), format))
    |> MapSet.new()
  end

  # The name a provider is given for a registered name (`fs.read` is `fs_read` for OpenAI).
  defp provider_name(name, format) do
    case Native.tool_name_for(name, format) do
      {:ok, given} -> given
      _ -> name
    end
  end

  defp search_mode(:anthropic, opts) do
    case Keyword.get(opts, :search, :bm25) do
      mode when mode in [:bm25, :regex, :client] -> mode
      other -> bad_search(other, [:bm25, :regex, :client])
    end
  end

  defp search_mode(:openai_responses, opts) do
    case Keyword.get(opts, :search, :hosted) do
      mode when mode in [:hosted, :client] -> mode
      other -> bad_search(other, [:hosted, :client])
    end
  end

  defp search_mode(_format, opts) do
    case Keyword.get(opts, :search, :client) do
      :client -> :client
      other -> bad_search(other, [:client])
    end
  end

  defp bad_search(other, allowed),
    do:
      raise(
        ArgumentError,
        "search: expects one of #{inspect(allowed)} for this format, got #{inspect(other)}"
      )

  defp defer(decls, deferred, format, mode, source, context, convert_opts)
       when format in [:anthropic, :openai_responses] do
    marked =
      Enum.map(decls, fn tool ->
        if MapSet.member?(deferred, tool_name(tool)),
          do: Map.put(tool, "defer_loading", true),
          else: tool
      end)

    without_own = Enum.reject(marked, &(tool_name(&1) == ToolSpec.name()))
    without_own ++ [search_declaration(format, mode, source, context, convert_opts)]
  end

  defp defer(decls, deferred, _format, :client, source, context, convert_opts) do
    kept =
      Enum.reject(
        decls,
        &(MapSet.member?(deferred, tool_name(&1)) or tool_name(&1) == ToolSpec.name())
      )

    kept ++ [search_declaration(nil, :client, source, context, convert_opts)]
  end

  defp search_declaration(:anthropic, :bm25, _, _, _),
    do: %{"type" => "tool_search_tool_bm25_20251119", "name" => "tool_search_tool_bm25"}

  defp search_declaration(:anthropic, :regex, _, _, _),
    do: %{"type" => "tool_search_tool_regex_20251119", "name" => "tool_search_tool_regex"}

  defp search_declaration(:openai_responses, :hosted, _, _, _), do: %{"type" => "tool_search"}

  defp search_declaration(:openai_responses, :client, source, _, _) do
    client_ready!(source)

    %{
      "type" => "tool_search",
      "execution" => "client",
      "description" => ToolSpec.description(),
      "parameters" => ToolSpec.parameters()
    }
  end

  # (Its changes are not reported: see own?/2.)
  defp search_declaration(_format, :client, source, context, convert_opts) do
    client_ready!(source)
    format = Keyword.get(convert_opts, :format, :openai)
    own = %Described{tools: [ToolSpec.described()]}
    {decls, _warnings} = Providers.convert(own, context, convert_opts)
    hd(declarations(decls, format))
  end

  # The runner resolves calls against the registry: our search tool must be in it.
  defp client_ready!(%Registry{} = reg) do
    if not registered_own?(reg) do
      raise ArgumentError,
            "search: :client needs CMDC.Tool.Search.Tool registered in the registry (so the " <>
              "runner can run its calls); register it or use CMDC.Tool.Session.new/2"
    end
  end

  defp client_ready!(modules) when is_list(modules) do
    raise ArgumentError,
          "search: :client searches a CMDC.Tool.Registry's index; got a list of modules"
  end

  defp client_ready!(%Described{}) do
    raise ArgumentError,
          "search: :client searches a CMDC.Tool.Registry's index; got tools described as " <>
            "data (a CMDC.Tool.Cluster view): use the hosted search (format: :anthropic or " <>
            ":openai_responses) or a registry of the tools"
  end

  @doc """
  An Anthropic `tool_result` block answering a call of our client-side search tool: one
  `tool_reference` block per tool found (names as Anthropic was given them), or the error text
  with `is_error`.
  """
  @spec anthropic_result(Result.t()) :: map()
  def anthropic_result(%Result{} = result) do
    case found(result) do
      {:ok, tools} ->
        refs =
          for %{"name" => name} <- tools,
              do: %{"type" => "tool_reference", "tool_name" => provider_name(name, :anthropic)}

        %{"type" => "tool_result", "tool_use_id" => result.id, "content" => refs}

      :error ->
        %{
          "type" => "tool_result",
          "tool_use_id" => result.id,
          "content" => result.content || "",
          "is_error" => true
        }
    end
  end

  @doc """
  An OpenAI Responses `tool_search_output` item answering a client `tool_search_call`: the
  found tools' full function definitions as `source` gives them for `:openai_responses` (same
  `strict:` and `namespaces:` as the request; `opts` are `to_schema/3`'s). A function of a
  namespace comes inside its namespace (name and description as in the request, with only the
  functions found). An error loads nothing (`"tools" => []`) and is `"status" => "incomplete"`.
  """
  @spec openai_search_output(Result.t(), Providers.source(), keyword()) :: map()
  def openai_search_output(%Result{} = result, source, opts \\ []) do
    CMDC.Tool.Options.check!(
      opts,
      Providers.schema_options(),
      "CMDC.Tool.Deferred.openai_search_output/3"
    )

    {status, tools} =
      case found(result) do
        {:ok, found} -> {"completed", loaded(found, source, opts)}
        :error -> {"incomplete", []}
      end

    %{
      "type" => "tool_search_output",
      "call_id" => result.id,
      "execution" => "client",
      "status" => status,
      "tools" => tools
    }
  end

  defp loaded(found, source, opts) do
    wanted = MapSet.new(found, &provider_name(&1["name"], :openai_responses))
    spec = namespaces!(opts, :openai_responses)
    {mode, opts} = Keyword.pop(opts, :warnings, :log)
    opts = Keyword.put(Keyword.drop(opts, options()), :format, :openai_responses)
    {all, warnings} = Providers.convert(source, %{}, opts)
    Warnings.report(warnings, :openai_responses, Warnings.mode!(mode))

    Namespaces.group(all, source, spec, wanted)
  end

  @doc false
  # The tools a search tool's result lists, or :error.
  def found(%Result{is_error: false, structured: %{"tools" => tools}}) when is_list(tools),
    do: {:ok, tools}

  def found(_result), do: :error

  defp registered_own?(reg) do
    case Registry.find(reg, ToolSpec.name()) do
      {:ok, module} -> ToolSpec.own?(module)
      :error -> false
    end
  end
end
