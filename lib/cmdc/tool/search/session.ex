defmodule CMDC.Tool.Session do
  @moduledoc """
  The tools one agent session has loaded from a deferred catalog (see `CMDC.Tool.Deferred`):
  a plain value the agent loop keeps between turns.

      session = CMDC.Tool.Session.new(registry, format: :openai, defer: true, always_loaded: ["bash"])
      tools = CMDC.Tool.Session.tools(session)             # the request's tools
      result = CMDC.Tool.Runner.run(registry, call, ctx)   # search_tools runs like any tool
      session = CMDC.Tool.Session.observe(session, result) # found tools join the next request

  For providers without tool search (OpenAI chat, Gemini, MCP) the next `tools/2` lists the
  found tools in full; with Anthropic or OpenAI Responses the provider loads them itself, and
  `search_output/2` answers a call of our client-side search tool in that provider's shape
  (`tool_reference` blocks, a `tool_search_output` item). With OpenAI Responses and
  `namespaces:` (`CMDC.Tool.Deferred.Namespaces`) the output groups the found functions in
  their namespaces, and the model's calls (`"namespace"` + `"name"`) run as they come:
  `CMDC.Tool.Deferred.Namespaces.call/1` makes a runner call of a response item.

      iex> reg = CMDC.Tool.Registry.new()
      iex> :ok = CMDC.Tool.Registry.register(reg, [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile])
      iex> s = CMDC.Tool.Session.new(reg, format: :openai, defer: true)
      iex> s |> CMDC.Tool.Session.tools() |> Enum.map(& &1["function"]["name"])
      ["search_tools"]
      iex> s = CMDC.Tool.Session.load(s, ["read_file"])
      iex> s |> CMDC.Tool.Session.tools() |> Enum.map(& &1["function"]["name"])
      ["read_file", "search_tools"]
  """

  alias CMDC.Tool.{Deferred, Registry, Result}
  alias CMDC.Tool.Search.Tool, as: SearchTool

  defstruct [:registry, opts: [], loaded: MapSet.new()]

  @type t :: %__MODULE__{registry: Registry.t(), opts: keyword(), loaded: MapSet.t(String.t())}

  @doc """
  A session over `reg` with `to_schema/3` options (`format:`, `strict:`, `defer:` (default
  `true`), `always_loaded:`, `search:`). Registers `CMDC.Tool.Search.Tool` in `reg` when a
  client-side search is used and it is not there yet.
  """
  @spec new(Registry.t(), keyword()) :: t()
  def new(%Registry{} = reg, opts \\ []) do
    CMDC.Tool.Options.check!(
      opts,
      CMDC.Tool.Providers.schema_options(),
      "CMDC.Tool.Session.new/2"
    )

    opts = Keyword.put_new(opts, :defer, true)
    format = Keyword.get(opts, :format, :openai)
    hosted = format in [:anthropic, :openai_responses] and opts[:search] != :client

    if not hosted and Registry.find(reg, SearchTool.name()) != {:ok, SearchTool} do
      :ok = Registry.register(reg, SearchTool)
    end

    %__MODULE__{registry: reg, opts: opts}
  end

  @doc "The tools for the next request: `CMDC.Tool.to_schema/3` with the loaded set."
  @spec tools(t(), CMDC.Tool.tool_context()) :: [map()]
  def tools(%__MODULE__{} = s, context \\ %{}) do
    Deferred.to_schema(
      s.registry,
      context,
      Keyword.put(s.opts, :loaded, MapSet.to_list(s.loaded))
    )
  end

  @doc "Adds tools to the loaded set (names not registered are ignored by `tools/2`)."
  @spec load(t(), [String.t()]) :: t()
  def load(%__MODULE__{} = s, names), do: %{s | loaded: Enum.into(names, s.loaded)}

  @doc """
  Reads a call's result: a successful `search_tools` result loads the tools it found; any other
  result leaves the session as it is.
  """
  @spec observe(t(), Result.t()) :: t()
  def observe(%__MODULE__{} = s, %Result{name: name} = result) do
    with true <- name == SearchTool.name(),
         {:ok, tools} <- Deferred.found(result) do
      load(s, for(%{"name" => n} <- tools, do: n))
    else
      _ -> s
    end
  end

  @doc """
  The answer to a call of the client search tool in the session's format: an Anthropic
  `tool_result` of `tool_reference` blocks (`CMDC.Tool.Deferred.anthropic_result/1`), an OpenAI
  Responses `tool_search_output` item (`CMDC.Tool.Deferred.openai_search_output/3`, with the
  session's `strict:` and `namespaces:`), else `nil`: other formats answer with the result's
  text, which lists the tools found.
  """
  @spec search_output(t(), Result.t()) :: map() | nil
  def search_output(%__MODULE__{} = s, %Result{} = result) do
    case Keyword.get(s.opts, :format, :openai) do
      :anthropic -> Deferred.anthropic_result(result)
      :openai_responses -> Deferred.openai_search_output(result, s.registry, s.opts)
      _ -> nil
    end
  end

  @doc "The names loaded so far."
  @spec loaded(t()) :: [String.t()]
  def loaded(%__MODULE__{loaded: loaded}), do: loaded |> MapSet.to_list() |> Enum.sort()
end
