defmodule CMDC.Tool.MCP.HTTP.Custom do
  @moduledoc """
  httpd's `customize` callbacks for `CMDC.Tool.MCP.HTTP`: a request whose `Content-Length`
  is over the server's `:max_body` gets its 413 as a JSON-RPC error (`application/json`) as
  soon as its headers are read, before httpd's own body-size check (which answers with an HTML
  page, then to a connection already closed).

  httpd calls `request_header/1` in the request's own process, which owns the connection
  (linked to its socket); the limit is found by the socket's local port, registered by the
  server at start (`register/2`).
  """

  alias CMDC.Tool.MCP.HTTP.Body

  @doc false
  @spec register(:inet.port_number(), pos_integer()) :: :ok
  def register(port, max_body), do: :persistent_term.put({__MODULE__, port}, max_body)

  @doc false
  @spec unregister(:inet.port_number()) :: :ok
  def unregister(port) do
    :persistent_term.erase({__MODULE__, port})
    :ok
  end

  @doc "httpd callback: every request header, kept as it is."
  @spec request_header({charlist(), charlist()}) :: {true, {charlist(), charlist()}}
  def request_header({~c"content-length", value} = header) do
    with {length, ""} <- value |> List.to_string() |> String.trim() |> Integer.parse(),
         socket when socket != nil <- own_socket(),
         {:ok, {_ip, port}} <- :inet.sockname(socket),
         max when is_integer(max) and length > max <-
           :persistent_term.get({__MODULE__, port}, nil) do
      Body.refuse(socket, 413, Body.too_large_message(max))
    end

    {true, header}
  end

  def request_header(header), do: {true, header}

  @doc "httpd callback: response headers as httpd makes them."
  @spec response_header({charlist(), charlist()}) :: {true, {charlist(), charlist()}}
  def response_header(header), do: {true, header}

  @doc "httpd callback: no extra default headers."
  @spec response_default_headers() :: []
  def response_default_headers, do: []

  defp own_socket do
    {:links, links} = Process.info(self(), :links)

    Enum.find(links, fn link ->
      is_port(link) and :erlang.port_info(link, :name) == {:name, ~c"tcp_inet"}
    end)
  end
end
