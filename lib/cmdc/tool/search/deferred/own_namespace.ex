defmodule CMDC.Tool.Deferred.OwnNamespace do
  @moduledoc """
  The one rule for what a tool's namespace is, read by `CMDC.Tool.to_schema/3`'s
  `namespaces: true`, tool search's `namespace:` filter (`CMDC.Tool.Search`) and namespaced
  calls (`CMDC.Tool.Deferred.Namespaces.resolve/4`): the registry settings' `"namespace"` (a
  discovered tool's metadata, its plugin's name), else the tool's `tool_options/0`
  `:namespace`, else its metadata's `"namespace"` as a discovered tool's wrapper carries it
  (`__tool_settings__/0`), else an MCP tool's server (the `server__` prefix its client gave the
  name); else none. A name's own prefix (`github__create_issue`) is not a namespace by itself.
  The namespace is given as OpenAI Responses takes it (1 to 64 of `[A-Za-z0-9_-]`).

      iex> CMDC.Tool.Deferred.OwnNamespace.of(CMDC.Tool.Examples.Echo, "echo")
      nil
      iex> CMDC.Tool.Deferred.OwnNamespace.of(CMDC.Tool.Examples.Echo, "echo", %{"namespace" => "util"})
      "util"
  """

  alias CMDC.Tool.RoundTrip

  @format :openai_responses

  @doc "The namespace of `module` registered as `name`, given its registry `settings` (or `nil`)."
  @spec of(module(), String.t(), map()) :: String.t() | nil
  def of(module, name, settings \\ %{}) do
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

  @doc "The name `name` is given as in OpenAI Responses (taken as it is when already valid)."
  @spec given(String.t()) :: String.t()
  def given(name) when byte_size(name) in 1..64 do
    if plain?(name), do: name, else: RoundTrip.name_for(name, @format)
  end

  def given(name), do: RoundTrip.name_for(name, @format)

  defp plain?(<<c, rest::binary>>)
       when c in ?a..?z or c in ?A..?Z or c in ?0..?9 or c == ?_ or c == ?-,
       do: plain?(rest)

  defp plain?(<<>>), do: true
  defp plain?(_), do: false

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
  catch
    _, _ -> nil
  end
end
