defmodule CMDC.Tool.MCP.Client.Era do
  @moduledoc """
  The two eras of MCP a `CMDC.Tool.MCP.Client` speaks, and how it picks one per server.

    * **modern** (revision `2026-07-28`): no handshake and no session; every request carries the
      protocol version, the client's capabilities and identity in `_meta`, and
      `server/discover` tells the server's versions, capabilities and identity.
    * **legacy** (`2025-11-25`, `2025-06-18`): `initialize`, then `notifications/initialized`.

  The client first sends `server/discover` with the modern `_meta` (over HTTP with the modern
  headers too): a result listing `2026-07-28` makes the server modern; anything else (a JSON-RPC
  error, an HTTP 400 or 404, no answer within the probe's time, a result without that version)
  falls back to `initialize`. The era found is kept for the server's later reconnections.

      iex> CMDC.Tool.MCP.Client.Era.meta("1.0")["io.modelcontextprotocol/protocolVersion"]
      "2026-07-28"
  """

  @modern "2026-07-28"
  @prefix "io.modelcontextprotocol/"

  @doc "The modern protocol version spoken here."
  @spec modern() :: String.t()
  def modern, do: @modern

  @doc "The `_meta` every modern request carries."
  @spec meta(String.t()) :: map()
  def meta(vsn) do
    %{
      (@prefix <> "protocolVersion") => @modern,
      (@prefix <> "clientCapabilities") => %{},
      (@prefix <> "clientInfo") => %{"name" => "cmdc_tool", "version" => vsn}
    }
  end

  @doc """
  `params` of a request in `era`: modern requests get the `_meta` above merged into theirs (a
  progress token, say); legacy ones are left as they are.
  """
  @spec params(:modern | :legacy | :probe, map(), String.t()) :: map()
  def params(:legacy, params, _vsn), do: params

  def params(_modern, params, vsn) do
    Map.update(params, "_meta", meta(vsn), &Map.merge(meta(vsn), &1))
  end

  @doc "Whether a `server/discover` result makes the server modern."
  @spec modern?(map()) :: boolean()
  def modern?(%{"supportedVersions" => versions}), do: @modern in versions
  def modern?(_), do: false
end
