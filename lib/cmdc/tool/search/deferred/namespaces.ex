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
  alias CMDC.Tool.Deferred.OwnNamespace
  alias CMDC.Tool.Providers.Described

  @typedoc "The `namespaces:` option checked: explicit namespaces and whether to group the rest."
  @type spec :: %{
          explicit: %{String.t() => %{description: String.t() | nil, tools: [String.t()]}},
          auto: boolean()
        }

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
  A tool's own namespace (before any `namespaces:` map), by the one rule of
  `CMDC.Tool.Deferred.OwnNamespace`: its registry settings' `"namespace"`
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
    OwnNamespace.of(module, name, settings)
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

  defp given(name), do: OwnNamespace.given(name)

  # A namespace nobody described: its functions' names (what tool search reads first).
  defp describe(ns, functions) do
    text = "Tools in #{ns}: " <> Enum.map_join(functions, ", ", & &1["name"]) <> "."

    if byte_size(text) <= @max_description or String.length(text) <= @max_description,
      do: text,
      else: String.slice(text, 0, @max_description - 1) <> "…"
  end

  @doc """
  The registered name a model meant by `name` in namespace `ns`: `{:ok, name}` when `ns` holds
  such a tool, else `:error` (the runner's unknown tool). It tries `ns__name`, `ns.name` and
  `name` (each as registered, then as the provider was given it) and takes the first that
  `ns` holds: a name written with the namespace's prefix (`github__create_issue` in `github`),
  or a tool whose own namespace (`own_namespace/3`, the one rule `to_schema` and search use)
  is `ns`, or one `explicit` (a `namespaces:` map, as given to `to_schema`) puts there. A tool
  of another namespace or of none is never reached through a namespace it is not in.
  `group/3` refuses namespaces where this would find another tool.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, CMDC.Tool.Examples.Echo)
      iex> CMDC.Tool.Deferred.Namespaces.resolve(reg, "util", "echo")
      :error
      iex> CMDC.Tool.Deferred.Namespaces.resolve(reg, "util", "echo", %{"util" => "Utilities"})
      :error
      iex> CMDC.Tool.Deferred.Namespaces.resolve(reg, "util", "echo", %{"util" => %{tools: ["echo"]}})
      {:ok, "echo"}
  """
  @spec resolve(term(), String.t(), String.t(), term()) :: {:ok, String.t()} | :error
  def resolve(tools, ns, name, explicit \\ nil) when is_binary(ns) and is_binary(name) do
    spec = spec!(explicit || %{})
    held = &held?(tools, ns, name, &1, spec)
    candidates = candidates(ns, name)

    direct = for c <- candidates, found(tools, c) != nil, do: c

    case Enum.find(direct, held) do
      nil -> mapped(names_of(tools), candidates, held)
      found -> {:ok, found}
    end
  end

  defp names_of(%Registry{} = reg), do: Enum.map(Registry.list(reg), & &1.name())
  defp names_of(modules) when is_list(modules), do: Enum.map(modules, & &1.name())
  defp names_of(_), do: []

  # Whether namespace `ns` holds the registered tool `registered` a call named `name` in it.
  defp held?(tools, ns, name, registered, spec) do
    prefixed?(ns, name, registered) or explicit?(spec, ns, registered) or
      (registered == name and own_of(tools, registered) == ns)
  end

  # Written with the namespace's prefix (`ns__name`, `ns.name`, or as the provider was given it).
  defp prefixed?(ns, name, registered) do
    leaf = leaf_name(ns, registered)
    leaf != given(registered) and (leaf == name or leaf == given(name))
  end

  defp explicit?(spec, ns, registered) do
    case spec.explicit do
      %{^ns => %{tools: listed}} -> registered in listed or given(registered) in listed
      _ -> false
    end
  end

  defp own_of(tools, registered) do
    case found(tools, registered) do
      nil -> nil
      module -> own_namespace(tools, module, registered)
    end
  end

  # CMDC.Tool.find/2's lookup (this module is below CMDC.Tool: it must not call it).
  defp found(%Registry{} = reg, name) do
    case Registry.find(reg, name) do
      {:ok, module} -> module
      _ -> nil
    end
  end

  defp found(modules, name) when is_list(modules), do: Enum.find(modules, &(&1.name() == name))
  defp found(_tools, _name), do: nil

  defp mapped(names, candidates, held) do
    Enum.find_value(candidates, :error, fn c ->
      case RoundTrip.original_name(names, c) do
        {:ok, found} -> if held.(found), do: {:ok, found}
        :error -> nil
      end
    end)
  end

  @doc """
  `resolve/4` over published names rather than a tool list (the names a `CMDC.Tool.Cluster`
  view publishes, whose modules may live on other nodes): `namespaces` maps each name to its own
  namespace (`own_namespace/3`, read where the module lives); `explicit` as for `resolve/4`.
  The same rule, the same answer.

      iex> names = ["github__create_issue", "fs.read", "echo", "list_orders"]
      iex> own = %{"list_orders" => "crm"}
      iex> ns = CMDC.Tool.Deferred.Namespaces
      iex> {ns.resolve_name(names, own, "github", "create_issue"), ns.resolve_name(names, own, "fs", "read")}
      {{:ok, "github__create_issue"}, {:ok, "fs.read"}}
      iex> {ns.resolve_name(names, own, "crm", "list_orders"), ns.resolve_name(names, own, "crm", "echo")}
      {{:ok, "list_orders"}, :error}
  """
  @spec resolve_name(
          [String.t()],
          %{String.t() => String.t() | nil},
          String.t(),
          String.t(),
          term()
        ) :: {:ok, String.t()} | :error
  def resolve_name(names, namespaces, ns, name, explicit \\ nil)
      when is_binary(ns) and is_binary(name) do
    spec = spec!(explicit || %{})

    held = fn registered ->
      prefixed?(ns, name, registered) or explicit?(spec, ns, registered) or
        (registered == name and Map.get(namespaces, registered) == ns)
    end

    candidates = candidates(ns, name)

    case Enum.find(candidates, &(&1 in names and held.(&1))) do
      nil -> mapped(names, candidates, held)
      found -> {:ok, found}
    end
  end

  @doc """
  The message of a call `name` in namespace `ns` that `ns` does not hold: what the namespace
  holds, with the closest names (`names` are the registered names, `namespace_of` gives each
  one's own namespace).

      iex> CMDC.Tool.Deferred.Namespaces.unknown_message(["crm__list_orders", "admin__wipe"], fn _ -> nil end, "crm", "list_order")
      "Unknown tool: list_order in namespace crm. Did you mean: list_orders?"
      iex> CMDC.Tool.Deferred.Namespaces.unknown_message(["create_issue"], fn _ -> nil end, "nonexistent", "create_issue")
      "Unknown tool: create_issue in namespace nonexistent: no tool is in nonexistent (call create_issue without a namespace)."
  """
  @spec unknown_message([String.t()], (String.t() -> String.t() | nil), String.t(), String.t()) ::
          String.t()
  def unknown_message(names, namespace_of, ns, name) do
    leaves =
      for n <- names,
          namespace_of.(n) == ns or leaf_name(ns, n) != given(n),
          do: leaf_name(ns, n)

    cond do
      leaves != [] ->
        "Unknown tool: #{name} in namespace #{ns}." <> did_you_mean(leaves, name)

      name in names ->
        "Unknown tool: #{name} in namespace #{ns}: no tool is in #{ns} " <>
          "(call #{name} without a namespace)."

      true ->
        "Unknown tool: #{name} in namespace #{ns}." <> did_you_mean(names, name)
    end
  end

  # CMDC.Tool.unknown_tool_message/2's suggestions (this module is below CMDC.Tool).
  defp did_you_mean(names, name) do
    case CMDC.Tool.Native.tool_suggest(names, name) do
      [] -> ""
      close -> " Did you mean: #{Enum.join(close, ", ")}?"
    end
  end

  @doc false
  # `unknown_message/4` over a tool list (the runner's unknown namespaced call).
  def unknown(tools, ns, name),
    do: unknown_message(names_of(tools), &own_of(tools, &1), ns, name)

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
