defmodule CMDC.Tool.HTTP.Client do
  @moduledoc """
  The native HTTP client: hyper's pooled client over rustls, on the NIF's tokio runtime
  (`native/cmdc_tool_core/src/http/client.rs`). The MCP client's Streamable HTTP transport
  (`CMDC.Tool.MCP.Client.HTTP`) and OAuth token introspection (`CMDC.Tool.MCP.HTTP.Auth`) use it.

  A client (`new/1`) keeps idle kept-alive connections per origin (HTTP/1.1, or HTTP/2 when
  the server offers it). `https` servers are verified, with their host name, against the
  operating system's trust store, or against the CA certificates of `ca_file:` instead;
  `verify: :verify_none` turns verification off and must be written out (it logs a warning).

  `request/6` starts a request and returns at once; its answer comes as messages to the caller,
  `{:cmdc_http, id, part}`, in order:

    * `{:head, status, headers}` (header names lower case);
    * then either `{:event, type, data, event_id}` for each event of a success's
      `text/event-stream` (with `events: true`; each takes one of `window` credits, given
      back with `ack/2`: without credits the native reader stops reading and the server waits),
      ended by `:end`;
    * or `{:body, binary}`: the whole body (a success's at most `max_body` bytes, an error
      status's first `max_error_body` bytes);
    * or, instead of any last part, `{:error, stage, message}` (`stage`: `:connect`, `:send`,
      `:answer`, `:too_big`).

  A success whose body is over `max_body` fails with `:too_big` (a larger `content-length` at
  once, before the body is read). `cancel/1`, the caller's exit, or the request's handle being
  garbage collected abort the request and close its connection. A connection returns to the
  pool only when its answer was read to its end.

  `fetch/6` is the same for a caller that waits for the whole answer.

      iex> {:error, message} = CMDC.Tool.HTTP.Client.new(ca_file: "/nonexistent/ca.pem")
      iex> message =~ "/nonexistent/ca.pem: cannot read CA certificates"
      true
  """

  alias CMDC.Tool.Native
  require Native

  @typedoc "A client: its pool of connections, closed when no process holds it any more."
  @type t :: reference()
  @typedoc "A running request: its handle, and the id its messages carry."
  @type request :: {reference(), pos_integer()}
  @type headers :: [{String.t(), String.t()}]

  @new_opts [:idle_ms, :max_idle, :connect_timeout, :ca_file, :verify]
  @request_opts [:max_body, :max_error_body, :events, :window]

  @doc """
  A new client. Options: `:idle_ms` (30 s: how long an idle connection is kept), `:max_idle`
  (8 per origin; 0: a connection per request), `:connect_timeout` (10 s), `:ca_file` (a PEM
  file of the CA certificates trusted instead of the system's), `:verify` (`:verify_peer`, the
  default, or `:verify_none`: no certificate check at all, for tests only).
  """
  @spec new(keyword()) :: {:ok, t()} | {:error, String.t()}
  def new(opts \\ []) do
    opts = CMDC.Tool.Options.check!(opts, @new_opts, "CMDC.Tool.HTTP.Client.new/1")

    with {:ok, verify_none} <- verify(Keyword.get(opts, :verify, :verify_peer)) do
      Native.http_client_new(%{
        idle_ms: Keyword.get(opts, :idle_ms, 30_000),
        max_idle: Keyword.get(opts, :max_idle, 8),
        connect_timeout_ms: Keyword.get(opts, :connect_timeout, 10_000),
        ca_file: opts[:ca_file] && Path.expand(opts[:ca_file]),
        verify_none: verify_none
      })
    end
  end

  defp verify(:verify_peer), do: {:ok, false}

  defp verify(:verify_none) do
    require Logger
    Logger.warning("HTTP client with verify: :verify_none: TLS certificates are NOT checked")
    {:ok, true}
  end

  defp verify(other),
    do: {:error, "verify: expected :verify_peer or :verify_none, got #{inspect(other)}"}

  @doc """
  Starts `method` to `url`; the answer arrives as messages (see the moduledoc). Options:
  `:max_body` (16 MiB), `:max_error_body` (64 kB), `:events` (`false`: parse a success's event
  stream into `:event` messages), `:window` (4 events not yet acknowledged).
  """
  @spec request(t(), String.t(), String.t(), headers(), iodata(), keyword()) ::
          {:ok, request()} | {:error, String.t()}
  def request(client, method, url, headers, body, opts \\ []) do
    opts = CMDC.Tool.Options.check!(opts, @request_opts, "CMDC.Tool.HTTP.Client.request/6")

    native = %{
      method: method,
      url: url,
      headers: headers,
      max_body: Keyword.get(opts, :max_body, 16_777_216),
      max_error_body: Keyword.get(opts, :max_error_body, 65_536),
      events: Keyword.get(opts, :events, false),
      window: Keyword.get(opts, :window, 4)
    }

    body = IO.iodata_to_binary(body)
    Native.with_dirty(http_request(client, native, body))
  end

  @doc "Gives back `n` credits of a request's event stream (its caller consumed `n` events)."
  @spec ack(request(), non_neg_integer()) :: :ok
  def ack({handle, _id}, n) do
    {:ok, _} = Native.http_ack(handle, n)
    :ok
  end

  @doc "Aborts a request and closes its connection; no more messages come for it."
  @spec cancel(request()) :: :ok
  def cancel({handle, _id}), do: Native.http_cancel(handle)

  @doc """
  Sends a request and waits for its whole answer, at most `:timeout` ms (5 s): `{:ok, %{status:,
  headers:, body:}}` or `{:error, message}`. Options as `request/6`, plus `:timeout`.
  """
  @spec fetch(t(), String.t(), String.t(), headers(), iodata(), keyword()) ::
          {:ok, %{status: pos_integer(), headers: headers(), body: binary()}}
          | {:error, String.t()}
  def fetch(client, method, url, headers, body, opts \\ []) do
    {timeout, opts} = Keyword.pop(opts, :timeout, 5_000)

    opts = Keyword.put(opts, :events, false)

    with {:ok, {_handle, id} = request} <- request(client, method, url, headers, body, opts) do
      deadline = System.monotonic_time(:millisecond) + timeout
      result = await(id, deadline, timeout, %{})
      cancel(request)
      flush(id)
      result
    end
  end

  defp await(id, deadline, timeout, answer) do
    wait = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {:cmdc_http, ^id, {:head, status, headers}} ->
        await(id, deadline, timeout, %{status: status, headers: headers})

      {:cmdc_http, ^id, {:body, body}} ->
        {:ok, Map.put(answer, :body, body)}

      {:cmdc_http, ^id, {:error, _stage, message}} ->
        {:error, message}
    after
      wait -> {:error, "no answer within #{timeout} ms"}
    end
  end

  defp flush(id) do
    receive do
      {:cmdc_http, ^id, _} -> flush(id)
    after
      0 -> :ok
    end
  end
end
