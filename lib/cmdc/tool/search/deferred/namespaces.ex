defmodule CMDC.Tool.Deferred.Namespaces do
  @moduledoc """
  OpenAI Responses namespaces: functions grouped under a shared name and description
  (`%{"type" => "namespace", "name", "description", "tools" => [functions]}`, the openai
  package's `NamespaceToolParam`). With tool search the model first sees only each namespace's
  name and description, and loads the functions it needs (`defer_loading` sits on the
  functions inside, as that type says). The `namespaces:` option of `CMDC.Tool.to_schema/3`
  (`format: :openai_responses` only):

    * `true` - each tool goes to its own namespace: the registry settings' `"namespace"` (a
      discovered tool's metadata, or its plugin's name), a module's `tool_options/0`
      `:namespace`, an MCP tool's server; tools without one stay top-level functions;
    * a map `%{"crm" => spec}` - the same, plus namespaces named here: `spec` is the
      description, or `%{description: text, tools: [names]}` (names put in that namespace
      whatever their own says).

  A function is named inside its namespace without the namespace's prefix (`github__create_issue`
  in `github` is `create_issue`; `fs.read` in `fs` is `read`). The model's `function_call` then
  carries `"name" => "create_issue", "namespace" => "github"`: `CMDC.Tool.Runner` takes a call
  with `namespace:` and resolves it (`resolve/3`), and `call/1` turns a Responses output item
  into such a call. A namespace without a description is described by its functions' names.

      iex> ns = CMDC.Tool.Deferred.Namespaces
      iex> tools = [%{"type" => "function", "name" => "github__create_issue", "description" => "Open an issue."}]
      iex> [group] = ns.group(tools, [], %{explicit: %{"github" => %{description: "GitHub", tools: ["github__create_issue"]}}, auto: true})
      iex> {group["type"], group["name"], Enum.map(group["tools"], & &1["name"])}
      {"namespace", "github", ["create_issue"]}
  """

  alias CMDC.Tool.{Registry, RoundTrip}
  alias CMDC.Tool.Providers.Described

  @typedoc "The `namespaces:` option checked: explicit namespaces and whether to group the rest."
  @type spec :: %{
          explicit: %{String.t() => %{description: String.t() | nil, tools: [String.t()]}},
          auto: boolean()
        }

  @format :openai_responses
  @max_description 1_000

  @doc """
  The `namespaces:` option checked: `nil` (no namespaces) or a `t:spec/0`; raises
  `ArgumentError` saying what is expected.
  """
  @spec spec!(term()) :: spec() | nil
  def spec!(nil), do: nil
  def spec!(false), do: nil
  def spec!(true), do: %{explicit: %{}, auto: true}

  def spec!(map) when is_map(map) do
    explicit = Map.new(map, fn {name, spec} -> {namespace_name!(name), entry!(name, spec)} end)
    %{explicit: explicit, auto: true}
  end

  def spec!(other),
    do:
      raise(
        ArgumentError,
        "namespaces: expects true or a map of namespace => description or " <>
          "%{description: text, tools: [names]}, got #{inspect(other, limit: 5)}"
      )

  defp namespace_name!(name) when is_atom(name) and name not in [nil, true, false],
    do: namespace_name!(Atom.to_string(name))

  defp namespace_name!(name) when is_binary(name) do
    if name =~ ~r/^[A-Za-z0-9_-]{1,64}$/,
      do: name,
      else:
        raise(
          ArgumentError,
          "namespaces: the namespace name #{inspect(name)} must be 1 to 64 letters, digits, _ or -"
        )
  end

  defp namespace_name!(other),
    do:
      raise(ArgumentError, "namespaces: a namespace name must be a string, got #{inspect(other)}")

  defp entry!(_name, text) when is_binary(text), do: %{description: text, tools: []}

  defp entry!(name, %{} = spec) do
    description = Map.get(spec, :description, Map.get(spec, "description"))
    tools = Map.get(spec, :tools, Map.get(spec, "tools", []))

    unless is_nil(description) or is_binary(description),
      do: raise(ArgumentError, "namespaces: #{name}'s description must be text")

    unless is_list(tools) and Enum.all?(tools, &(is_binary(&1) or is_atom(&1))),
      do: raise(ArgumentError, "namespaces: #{name}'s tools must be a list of tool names")

    %{description: description, tools: Enum.map(tools, &to_string/1)}
  end

  defp entry!(name, other),
    do:
      raise(
        ArgumentError,
        "namespaces: #{name} expects a description or %{description:, tools:}, " <>
          "got #{inspect(other, limit: 5)}"
      )

  @doc """
  The Responses tools list `tools` (flat, as `CMDC.Tool.Providers` gives it for
  `:openai_responses`) with the functions of `source` grouped as `spec` says. Other entries
  (`tool_search`) keep their place; a namespace takes the place of its first function. With
  `keep` (provider names) only those functions are listed, each namespace still described as
  in the whole list (a `tool_search_output`). Raises `ArgumentError` when two functions of one
  namespace would share a name, or a namespace a top-level function's.
  """
  @spec group([map()], CMDC.Tool.Providers.source(), spec() | nil, MapSet.t() | nil) :: [map()]
  def group(tools, source, spec, keep \\ nil)

  def group(tools, _source, nil, nil), do: tools

  def group(tools, _source, nil, keep),
    do: Enum.filter(tools, &MapSet.member?(keep, &1["name"]))

  def group(tools, source, spec, keep) do
    names = registered(source)
    index = index(names)

    placed =
      Enum.map(tools, fn
        %{"type" => "function", "name" => given} = tool ->
          registered = Map.get(index.given, given, given)

          case namespace_of(registered, source, names, spec) do
            nil -> {:top, tool, registered}
            ns -> {ns, Map.put(tool, "name", leaf_name(ns, registered)), registered}
          end

        other ->
          {:top, other, nil}
      end)

    placed |> check!(index) |> assemble(spec, keep)
  end

  # Registered name => module, for sources whose tools can carry a namespace.
  defp registered(%Registry{} = reg), do: Map.new(Registry.list(reg), &{&1.name(), &1})
  defp registered(%Described{tools: tools}), do: Map.new(tools, &{&1.name, &1})
  defp registered(modules) when is_list(modules), do: Map.new(modules, &{&1.name(), &1})

  # The names the runner tries, direct and as the provider was given them.
  defp index(names) do
    given = Map.new(Map.keys(names), &{given(&1), &1})
    %{given: given, direct: names}
  end

  defp namespace_of(name, source, names, spec) do
    explicit =
      Enum.find_value(spec.explicit, fn {ns, %{tools: tools}} ->
        if name in tools or given(name) in tools, do: ns
      end)

    cond do
      explicit -> explicit
      name == CMDC.Tool.Search.ToolSpec.name() -> nil
      spec.auto and Map.has_key?(names, name) -> own_namespace(source, names[name], name)
      true -> nil
    end
  end

  @doc """
  A tool's own namespace (before any `namespaces:` map): its registry settings' `"namespace"`
  (metadata, a plugin's name), its `tool_options/0` `:namespace`, its metadata's
  `"namespace"` as a discovered tool's wrapper carries it (`__tool_settings__/0`, so a plain
  module list groups it too), an MCP tool's server (the prefix of its `server__tool` name),
  else `nil`. A tool described as data (`CMDC.Tool.Providers.Described`) carries its own,
  read this way where its module lives.
  """
  @spec own_namespace(CMDC.Tool.Providers.source(), module() | Described.tool(), String.t()) ::
          String.t() | nil
  def own_namespace(%Described{}, %{namespace: ns}, _name), do: ns

  def own_namespace(source, module, name) do
    settings = if match?(%Registry{}, source), do: Registry.settings(source, name), else: %{}
    options = callback(module, :tool_options) || []
    mcp = callback(module, :__tool_settings__)

    ns =
      settings["namespace"] || settings[:namespace] || option(options, :namespace) ||
        option(mcp, :namespace) || server_prefix(mcp, name)

    case ns do
      ns when is_binary(ns) and ns != "" -> given(ns)
      ns when is_atom(ns) and ns not in [nil, true, false] -> given(Atom.to_string(ns))
      _ -> nil
    end
  end

  defp option(options, key) when is_list(options) or is_map(options),
    do: Enum.find_value(options, fn {k, v} -> if k == key, do: v end)

  defp option(_options, _key), do: nil

  # The `server__` prefix the client gave the name (the server's name made a valid name), else
  # (`namespace: false` clients) the server's own name.
  defp server_prefix(%{server: server}, name) when is_binary(server) do
    case String.split(name, "__", parts: 2) do
      [prefix, rest] when rest != "" ->
        if prefix == String.replace(server, ~r/[^A-Za-z0-9_.-]/, "_"), do: prefix, else: server

      _ ->
        server
    end
  end

  defp server_prefix(_settings, _name), do: nil

  # An optional callback's answer; a tool whose callback raises simply has no namespace.
  defp callback(module, fun) do
    if function_exported?(module, fun, 0), do: apply(module, fun, [])
  rescue
    _ -> nil
  end

  @doc """
  The name `registered` is given inside namespace `ns`.

      iex> CMDC.Tool.Deferred.Namespaces.leaf_name("github", "github__create_issue")
      "create_issue"
      iex> CMDC.Tool.Deferred.Namespaces.leaf_name("fs", "fs.read")
      "read"
      iex> CMDC.Tool.Deferred.Namespaces.leaf_name("crm", "list_orders")
      "list_orders"
      iex> CMDC.Tool.Deferred.Namespaces.leaf_name("fs_local", "fs.local__read")
      "read"
  """
  @spec leaf_name(String.t(), String.t()) :: String.t()
  def leaf_name(ns, registered) do
    bare =
      Enum.find_value(["__", "."], registered, fn sep ->
        case String.split(registered, sep, parts: 2) do
          # The prefix as the provider is given it (`fs.local__read` in `fs_local` is `read`).
          [prefix, rest] when rest != "" -> if prefix == ns or given(prefix) == ns, do: rest
          _ -> nil
        end
      end)

    given(bare)
  end

  # Every namespaced function must come back to itself through resolve/3's rule, and a
  # namespace must not take a top-level function's name.
  defp check!(placed, index) do
    top = for {:top, %{"type" => "function", "name" => n}, _} <- placed, into: MapSet.new(), do: n

    for {ns, %{"name" => leaf}, registered} <- placed, ns != :top do
      if MapSet.member?(top, ns),
        do: raise(ArgumentError, "namespaces: #{ns} is also the name of a top-level function")

      meant = pick(candidates(ns, leaf), index)

      # (A function the source does not hold, e.g. a list built elsewhere, is not checked.)
      if meant != registered and Map.has_key?(index.direct, registered) do
        raise ArgumentError,
              "namespaces: in #{ns}, #{leaf} would name both #{inspect(registered)} and " <>
                "#{inspect(meant)}; group them apart or rename one"
      end
    end

    placed
  end

  # `keep` (given names): only those functions are listed (a tool_search_output), their
  # namespaces described as in the full list.
  defp assemble(placed, spec, keep) do
    {order, groups} =
      Enum.reduce(placed, {[], %{}}, fn
        {:top, tool, _}, {order, groups} ->
          {[{:top, tool} | order], groups}

        {ns, tool, registered}, {order, groups} ->
          order = if Map.has_key?(groups, ns), do: order, else: [{:ns, ns} | order]
          {order, Map.update(groups, ns, [{tool, registered}], &[{tool, registered} | &1])}
      end)

    order
    |> Enum.reverse()
    |> Enum.flat_map(fn
      {:top, tool} ->
        if kept?(keep, tool["name"]), do: [tool], else: []

      {:ns, ns} ->
        all = Enum.reverse(groups[ns])
        listed = for {tool, reg} <- all, keep == nil or kept?(keep, given(reg)), do: tool
        if listed == [], do: [], else: [namespace(ns, listed, Enum.map(all, &elem(&1, 0)), spec)]
    end)
  end

  defp kept?(nil, _name), do: true
  defp kept?(_keep, nil), do: true
  defp kept?(keep, name), do: MapSet.member?(keep, name)

  defp namespace(ns, functions, all, spec) do
    description =
      case spec.explicit do
        %{^ns => %{description: text}} when is_binary(text) and text != "" -> text
        _ -> describe(ns, all)
      end

    %{"type" => "namespace", "name" => ns, "description" => description, "tools" => functions}
  end

  # The name the provider is given (`RoundTrip.name_for/2`), without a native call for the
  # names it takes as they are.
  defp given(name) when byte_size(name) in 1..64 do
    if plain?(name), do: name, else: RoundTrip.name_for(name, @format)
  end

  defp given(name), do: RoundTrip.name_for(name, @format)

  defp plain?(<<c, rest::binary>>)
       when c in ?a..?z or c in ?A..?Z or c in ?0..?9 or c == ?_ or c == ?-,
       do: plain?(rest)

  defp plain?(<<>>), do: true
  defp plain?(_), do: false

  # A namespace nobody described: its functions' names (what tool search reads first).
  defp describe(ns, functions) do
    text = "Tools in #{ns}: " <> Enum.map_join(functions, ", ", & &1["name"]) <> "."

    if byte_size(text) <= @max_description or String.length(text) <= @max_description,
      do: text,
      else: String.slice(text, 0, @max_description - 1) <> "…"
  end

  @doc """
  The registered name a model meant by `name` in namespace `ns`, trying `ns__name`, `ns.name`
  and `name` (each as registered, then as the provider was given it): `{:ok, name}` or
  `:error`. `group/3` refuses namespaces where this would find another tool.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> CMDC.Tool.Deferred.Namespaces.resolve(reg, "util", "echo")
      {:ok, "echo"}
      iex> CMDC.Tool.Deferred.Namespaces.resolve(reg, "util", "nope")
      :error
  """
  @spec resolve(term(), String.t(), String.t()) :: {:ok, String.t()} | :error
  def resolve(tools, ns, name) when is_binary(ns) and is_binary(name) do
    candidates = candidates(ns, name)

    Enum.find_value(candidates, :error, fn c ->
      if found?(tools, c), do: {:ok, c}
    end)
    |> case do
      {:ok, found} -> {:ok, found}
      :error -> mapped(tools, candidates)
    end
  end

  # CMDC.Tool.find/2's lookup (this module is below CMDC.Tool: it must not call it).
  defp found?(%Registry{} = reg, name), do: match?({:ok, _}, Registry.find(reg, name))
  defp found?(modules, name) when is_list(modules), do: Enum.any?(modules, &(&1.name() == name))

  defp mapped(tools, candidates) do
    names =
      case tools do
        %Registry{} -> Enum.map(Registry.list(tools), & &1.name())
        modules when is_list(modules) -> Enum.map(modules, & &1.name())
        _ -> []
      end

    mapped_names(names, candidates)
  end

  @doc """
  `resolve/3` over a list of names rather than a tool list (the names a
  `CMDC.Tool.Cluster` view publishes, whose modules may live on other nodes): the same rule,
  the same answer.

      iex> names = ["github__create_issue", "fs.read", "echo"]
      iex> ns = CMDC.Tool.Deferred.Namespaces
      iex> {ns.resolve_name(names, "github", "create_issue"), ns.resolve_name(names, "fs", "read")}
      {{:ok, "github__create_issue"}, {:ok, "fs.read"}}
      iex> {ns.resolve_name(names, "util", "echo"), ns.resolve_name(names, "util", "nope")}
      {{:ok, "echo"}, :error}
  """
  @spec resolve_name([String.t()], String.t(), String.t()) :: {:ok, String.t()} | :error
  def resolve_name(names, ns, name) when is_binary(ns) and is_binary(name) do
    candidates = candidates(ns, name)

    case Enum.find(candidates, &(&1 in names)) do
      nil -> mapped_names(names, candidates)
      found -> {:ok, found}
    end
  end

  defp mapped_names(names, candidates) do
    Enum.find_value(candidates, :error, fn c ->
      case RoundTrip.original_name(names, c) do
        {:ok, found} -> {:ok, found}
        :error -> nil
      end
    end)
  end

  defp candidates(ns, name), do: [ns <> "__" <> name, ns <> "." <> name, name]

  # resolve/3's rule over the index group/3 built (no native scan per function).
  defp pick(candidates, index) do
    Enum.find(candidates, &Map.has_key?(index.direct, &1)) ||
      Enum.find_value(candidates, &Map.get(index.given, &1))
  end

  @doc """
  A runner call (`CMDC.Tool.Runner.run/4`) from an OpenAI Responses output item: a
  `function_call` (its `namespace` kept, for the runner to resolve) or a client
  `tool_search_call` (a call of `search_tools`). `{:error, message}` for other items.

      iex> CMDC.Tool.Deferred.Namespaces.call(%{"type" => "function_call", "call_id" => "c1",
      ...>   "name" => "create_issue", "namespace" => "github", "arguments" => ~s({"title":"x"})})
      {:ok, %{id: "c1", name: "create_issue", namespace: "github", arguments: ~s({"title":"x"})}}
  """
  @spec call(map()) :: {:ok, map()} | {:error, String.t()}
  def call(%{"type" => "function_call", "call_id" => id, "name" => name} = item) do
    call = %{id: id, name: name, arguments: Map.get(item, "arguments", "{}")}

    case item["namespace"] do
      ns when is_binary(ns) and ns != "" -> {:ok, Map.put(call, :namespace, ns)}
      _ -> {:ok, call}
    end
  end

  def call(%{"type" => "tool_search_call", "execution" => "client"} = item) do
    {:ok,
     %{
       id: item["call_id"] || item["id"],
       name: CMDC.Tool.Search.ToolSpec.name(),
       arguments: item["arguments"] || %{}
     }}
  end

  def call(other),
    do:
      {:error, "not a function_call or client tool_search_call item: #{inspect(other, limit: 5)}"}
end
