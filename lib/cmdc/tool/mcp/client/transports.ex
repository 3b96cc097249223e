defmodule CMDC.Tool.MCP.Client.Transports do
  @moduledoc """
  The one table of `CMDC.Tool.MCP.Client` transports (each implements
  `CMDC.Tool.MCP.Client.Transport`): their names, modules and the `type` strings configs use,
  read by the client and by `CMDC.Tool.MCP.Config`.

      iex> CMDC.Tool.MCP.Client.Transports.fetch(:stdio)
      {:ok, CMDC.Tool.MCP.Client.Stdio}
      iex> CMDC.Tool.MCP.Client.Transports.lookup("streamable-http")
      {:ok, :http}
  """

  alias CMDC.Tool.MCP.Client.{HTTP, Stdio}

  # name: {module, the type strings configs use for it}, in the order messages list them
  @transports [
    stdio: {Stdio, ["stdio"]},
    http: {HTTP, ["http", "streamable-http"]}
  ]

  @doc "The transport names."
  @spec names() :: [atom()]
  def names, do: Keyword.keys(@transports)

  @doc "The module of a transport name."
  @spec fetch(atom()) :: {:ok, module()} | {:error, String.t()}
  def fetch(name) do
    case List.keyfind(@transports, name, 0) do
      {_, {module, _}} -> {:ok, module}
      nil -> {:error, "unknown MCP transport #{inspect(name)} (known: #{inspect(names())})"}
    end
  end

  @doc "The transport name of a config's `type` string (`:error` when none)."
  @spec lookup(String.t()) :: {:ok, atom()} | :error
  def lookup(type) do
    Enum.find_value(@transports, :error, fn {name, {_, types}} ->
      if type in types, do: {:ok, name}
    end)
  end

  @doc "The type strings configs may use, for an error message."
  @spec types() :: [String.t()]
  def types, do: Enum.flat_map(@transports, fn {_, {_, types}} -> types end)
end
