defmodule CMDC.Tool.MCP.Client.HTTP.Conn do
  @moduledoc """
  One HTTP/1.1 exchange of `CMDC.Tool.MCP.Client.HTTP`: a request on a new connection or on
  an idle kept-alive one (`CMDC.Tool.MCP.Client.HTTP.Pool`), whose response its owner reads one
  socket read at a time.

  `open/5` connects (TCP, or TLS verified against the system's CA certificates with SNI and a
  hostname check) and sends the request in a short-lived process, so the owner never waits for
  a slow server, then hands the socket over: the owner receives `{:cmdc_mcp_conn, ref, {:ok,
  conn}}` or `{:cmdc_mcp_conn, ref, {:error, {:connect | :send, reason}}}`. The socket is then
  in `active: :once` mode: after `next/1` exactly one read arrives as a message (`message/1`
  recognizes it), `data/2` parses it into the response's parts, and nothing more is read until
  the owner asks again. So whatever a server sends (a body of any size, at any speed, with any
  status), the owner holds at most one read of it beyond what it chose to keep, and closing the
  socket (`close/1`) frees everything at once.

  With `keep_alive: true` the request leaves the connection open; `reusable?/1` tells whether
  the answer left it fit for another request: read to its end (framed by length or chunks, not
  by the connection's end), HTTP/1.1, no `Connection: close`, and no byte beyond the answer.

  The status line and headers are read by OTP's own parser (`:erlang.decode_packet/3` with
  `:http_bin` / `:httph_bin`), bounded to #{div(65_536, 1024)} kB; bodies are framed by
  `content-length`, `transfer-encoding: chunked`, or the connection's end.

      iex> alias CMDC.Tool.MCP.Client.HTTP.Conn
      iex> conn = Conn.parser("POST")
      iex> {events, conn} = Conn.data(conn, "HTTP/1.1 500 Oops\\r\\ncontent-length: 5\\r\\n\\r\\nab")
      iex> events
      [{:head, 500, [{"content-length", "5"}]}, {:data, "ab"}]
      iex> Conn.data(conn, "cde")
      {[{:data, "cde"}, :done], %{conn | phase: :done, buffer: ""}}
  """

  defstruct [
    :socket,
    :mod,
    :method,
    phase: :status,
    keep_alive: false,
    buffer: "",
    status: nil,
    headers: [],
    head: 0
  ]

  @type t :: %__MODULE__{}
  @type event :: {:head, 100..999, [{String.t(), String.t()}]} | {:data, binary()} | :done

  @max_head 65_536
  @max_line 8_192

  @doc "A parser for the answer to a `method` request, with no socket (for tests and doctests)."
  @spec parser(String.t()) :: t()
  def parser(method), do: %__MODULE__{method: method}

  @doc """
  Sends `method` to `uri` with `headers` and `body` from a new process; the answer to the
  owner (the caller) is the message `{:cmdc_mcp_conn, ref, result}`. Returns `{ref, pid}`;
  killing `pid` before that message aborts the attempt. Options: `:connect_timeout` (ms,
  default 10 s), `:cacerts` (DER certificates trusted instead of the system's), `:keep_alive`
  (default `false`: the request says `Connection: close`), `:reuse` (an idle connection the
  caller owns, passive, to send on instead of connecting: the caller keeps owning it), `:ref`
  (the reference to answer with, default a new one).
  """
  @spec open(URI.t(), String.t(), [{String.t(), String.t()}], iodata(), keyword()) ::
          {reference(), pid()}
  def open(%URI{} = uri, method, headers, body, opts \\ []) do
    owner = self()
    ref = Keyword.get_lazy(opts, :ref, &make_ref/0)

    pid =
      spawn(fn ->
        send(
          owner,
          {:cmdc_mcp_conn, ref, connect_and_send(owner, uri, method, headers, body, opts)}
        )
      end)

    {ref, pid}
  end

  defp connect_and_send(owner, uri, method, headers, body, opts) do
    keep_alive = Keyword.get(opts, :keep_alive, false)

    with {:ok, request} <- request(uri, method, headers, body, keep_alive) do
      case opts[:reuse] do
        nil -> send_new(owner, uri, method, request, keep_alive, opts)
        conn -> send_again(conn, method, request, keep_alive)
      end
    end
  end

  defp send_new(owner, uri, method, request, keep_alive, opts) do
    with {:ok, mod, socket} <- connect(uri, opts) do
      with :ok <- tag(mod.send(socket, request), :send),
           :ok <- tag(mod.controlling_process(socket, owner), :send) do
        {:ok, %__MODULE__{socket: socket, mod: mod, method: method, keep_alive: keep_alive}}
      else
        error -> mod.close(socket) && error
      end
    end
  end

  # Any process may write to a socket; its owner (the caller) keeps it and closes it on failure.
  defp send_again(%__MODULE__{mod: mod, socket: socket}, method, request, keep_alive) do
    with :ok <- tag(mod.send(socket, request), :send) do
      {:ok, %__MODULE__{socket: socket, mod: mod, method: method, keep_alive: keep_alive}}
    end
  end

  defp tag(:ok, _), do: :ok
  defp tag({:error, reason}, what), do: {:error, {what, reason}}

  @socket_opts [
    :binary,
    active: false,
    packet: :raw,
    send_timeout: 10_000,
    send_timeout_close: true,
    nodelay: true
  ]

  defp connect(%URI{scheme: "http", host: host, port: port}, opts) do
    case :gen_tcp.connect(address(host), port, @socket_opts, timeout(opts)) do
      {:ok, socket} -> {:ok, :gen_tcp, socket}
      {:error, reason} -> {:error, {:connect, reason}}
    end
  end

  defp connect(%URI{scheme: "https", host: host, port: port}, opts) do
    with {:ok, tls} <- tls_options(host, opts[:cacerts]),
         {:ok, socket} <- :ssl.connect(address(host), port, @socket_opts ++ tls, timeout(opts)) do
      {:ok, :ssl, socket}
    else
      {:error, reason} -> {:error, {:connect, reason}}
    end
  end

  defp timeout(opts), do: Keyword.get(opts, :connect_timeout, 10_000)

  defp address(host) do
    case :inet.parse_address(String.to_charlist(host)) do
      {:ok, ip} -> ip
      {:error, _} -> String.to_charlist(host)
    end
  end

  # Verified TLS: the given or system CA store, SNI for names, and RFC 6125 hostname matching
  # as browsers do it (`:ssl` checks an IP literal against the certificate's IP addresses: no
  # `server_name_indication` is set for one, since `:disable` would also skip that check).
  defp tls_options(host, cacerts) do
    sni =
      if is_list(address(host)), do: [server_name_indication: String.to_charlist(host)], else: []

    {:ok,
     [
       verify: :verify_peer,
       cacerts: cacerts || :public_key.cacerts_get(),
       depth: 10,
       customize_hostname_check: [match_fun: :public_key.pkix_verify_hostname_match_fun(:https)]
     ] ++ sni}
  rescue
    error -> {:error, {:no_ca_certificates, Exception.message(error)}}
  end

  defp request(uri, method, headers, body, keep_alive) do
    target = (uri.path || "/") <> if(uri.query, do: "?" <> uri.query, else: "")
    host = if String.contains?(uri.host, ":"), do: "[#{uri.host}]", else: uri.host

    length =
      if method in ["POST", "PUT"],
        do: [{"content-length", "#{IO.iodata_length(body)}"}],
        else: []

    close = if keep_alive, do: [], else: [{"connection", "close"}]
    all = [{"host", "#{host}:#{uri.port}"} | headers] ++ length ++ close

    case Enum.find(all, fn {k, v} -> unsafe?(k) or unsafe?(v) end) do
      nil ->
        lines = Enum.map(all, fn {k, v} -> [k, ": ", v, "\r\n"] end)
        {:ok, [method, " ", target, " HTTP/1.1\r\n", lines, "\r\n", body]}

      {name, _} ->
        {:error, {:send, "the header #{inspect(name)} holds a line break"}}
    end
  end

  defp unsafe?(text), do: String.contains?(text, ["\r", "\n", <<0>>])

  # Linux's TCP_QUICKACK, set again before each read (the kernel clears it): a server that
  # writes an answer's head and body apart without TCP_NODELAY (Nagle) waits for the ACK of the
  # head before it sends the body, and a delayed ACK costs ~40 ms per request on a kept-alive
  # connection (`bench/mcp_http.exs client`, Python's http.server: p50 48 ms, 0.36 ms with this).
  @quickack (case :os.type() do
               {:unix, :linux} -> [{:raw, 6, 12, <<1::native-32>>}]
               _ -> []
             end)

  @doc "Lets one more read of the socket arrive as a message."
  @spec next(t()) :: :ok | {:error, term()}
  def next(%__MODULE__{mod: :gen_tcp, socket: s}),
    do: :inet.setopts(s, @quickack ++ [active: :once])

  def next(%__MODULE__{mod: :ssl, socket: s}), do: :ssl.setopts(s, active: :once)

  @doc "Stops socket reads arriving as messages (an idle connection taken for a request)."
  @spec passive(t()) :: :ok | {:error, term()}
  def passive(%__MODULE__{mod: :gen_tcp, socket: s}), do: :inet.setopts(s, active: false)
  def passive(%__MODULE__{mod: :ssl, socket: s}), do: :ssl.setopts(s, active: false)

  @doc """
  Whether the answer read so far leaves the connection fit for another request: read to its
  end, kept alive by both sides, nothing beyond it.

      iex> alias CMDC.Tool.MCP.Client.HTTP.Conn
      iex> answer = "HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\nok"
      iex> {_, done} = Conn.data(%{Conn.parser("POST") | keep_alive: true}, answer)
      iex> Conn.reusable?(done)
      true
      iex> {_, closing} = Conn.data(%{Conn.parser("POST") | keep_alive: true},
      ...>   "HTTP/1.1 200 OK\\r\\nconnection: close\\r\\ncontent-length: 2\\r\\n\\r\\nok")
      iex> Conn.reusable?(closing)
      false
  """
  @spec reusable?(t()) :: boolean()
  def reusable?(%__MODULE__{phase: :done, keep_alive: keep_alive}), do: keep_alive
  def reusable?(%__MODULE__{}), do: false

  @doc "Whether not one byte of the answer has arrived (a request that may be sent again)."
  @spec untouched?(t()) :: boolean()
  def untouched?(%__MODULE__{phase: :status, buffer: ""}), do: true
  def untouched?(%__MODULE__{}), do: false

  @doc "Closes the connection (whatever was unread is dropped by the kernel)."
  @spec close(t()) :: :ok
  def close(%__MODULE__{mod: mod, socket: s}) when mod != nil, do: mod.close(s) && :ok
  def close(_), do: :ok

  @doc """
  Recognizes a socket message: `{socket, {:data, bytes}}`, `{socket, :closed}`, `{socket,
  {:error, reason}}`, or `:unknown`.
  """
  @spec message(term()) :: {term(), {:data, binary()} | :closed | {:error, term()}} | :unknown
  def message({tag, socket, data}) when tag in [:tcp, :ssl] and is_binary(data),
    do: {socket, {:data, data}}

  def message({tag, socket}) when tag in [:tcp_closed, :ssl_closed], do: {socket, :closed}

  def message({tag, socket, reason}) when tag in [:tcp_error, :ssl_error],
    do: {socket, {:error, reason}}

  def message(_), do: :unknown

  @doc """
  Parses `bytes` that follow what `conn` has read: the response parts they complete, in order,
  or `{:error, reason}` for an answer that is not HTTP/1.1 (or whose head is over 64 kB).
  """
  @spec data(t(), binary()) :: {[event()], t()} | {:error, String.t()}
  def data(%__MODULE__{} = conn, bytes) do
    case step(%{conn | buffer: conn.buffer <> bytes}, []) do
      {:ok, events, conn} -> {Enum.reverse(events), conn}
      {:error, _} = error -> error
    end
  end

  @doc """
  What the server closing the connection means: `:done` when the body was framed by the
  connection's end, else `{:cut, :head | :body}` (the answer stopped midway).
  """
  @spec closed(t()) :: :done | {:cut, :head | :body}
  def closed(%__MODULE__{phase: phase}) when phase in [:close, :done], do: :done
  def closed(%__MODULE__{phase: phase}) when phase in [:status, :headers], do: {:cut, :head}
  def closed(%__MODULE__{}), do: {:cut, :body}

  # --- the parser: one phase at a time, events accumulated in reverse ---

  defp step(%{phase: :status} = c, acc) do
    case :erlang.decode_packet(:http_bin, c.buffer, packet_size: @max_line) do
      {:ok, {:http_response, version, status, _reason}, rest} ->
        # An HTTP/1.0 answer ends its connection (its keep-alive is not honoured here).
        c = %{c | keep_alive: c.keep_alive and version >= {1, 1}}
        step(%{c | phase: :headers, buffer: rest, status: status, headers: []}, acc)

      {:ok, {:http_error, line}, _} ->
        {:error, "not an HTTP answer: #{inspect(String.slice(line, 0, 80))}"}

      other ->
        more(other, c, acc)
    end
  end

  defp step(%{phase: :headers, head: head}, _acc) when head > @max_head,
    do: {:error, "an HTTP head over #{@max_head} bytes"}

  defp step(%{phase: :headers} = c, acc) do
    case :erlang.decode_packet(:httph_bin, c.buffer, packet_size: @max_line) do
      {:ok, {:http_header, _, name, _, value}, rest} ->
        header = {String.downcase(to_string(name)), value}
        head = c.head + byte_size(c.buffer) - byte_size(rest)
        step(%{c | buffer: rest, headers: [header | c.headers], head: head}, acc)

      {:ok, :http_eoh, rest} ->
        head_done(%{c | buffer: rest, headers: Enum.reverse(c.headers)}, acc)

      {:ok, {:http_error, line}, _} ->
        {:error, "a malformed HTTP header: #{inspect(String.slice(line, 0, 80))}"}

      other ->
        more(other, c, acc)
    end
  end

  defp step(%{phase: :done} = c, acc), do: {:ok, acc, finish(c, c.buffer)}
  defp step(%{buffer: ""} = c, acc), do: {:ok, acc, c}
  defp step(%{phase: :close} = c, acc), do: {:ok, [{:data, c.buffer} | acc], %{c | buffer: ""}}

  defp step(%{phase: {:length, n}, buffer: buffer} = c, acc) do
    take = min(n, byte_size(buffer))
    <<part::binary-size(take), _::binary>> = buffer
    acc = [{:data, part} | acc]

    if take == n,
      do: {:ok, [:done | acc], finish(c, binary_part(buffer, take, byte_size(buffer) - take))},
      else: {:ok, acc, %{c | phase: {:length, n - take}, buffer: ""}}
  end

  defp step(%{phase: {:chunk, 0}} = c, acc), do: crlf(c, acc, {:chunk_size})

  defp step(%{phase: {:chunk, n}, buffer: buffer} = c, acc) do
    take = min(n, byte_size(buffer))
    <<part::binary-size(take), rest::binary>> = buffer
    step(%{c | phase: {:chunk, n - take}, buffer: rest}, [{:data, part} | acc])
  end

  defp step(%{phase: {:chunk_size}} = c, acc) do
    with {:ok, line, rest} <- line(c.buffer) do
      size = line |> String.split(";", parts: 2) |> hd() |> String.trim()

      case Integer.parse(size, 16) do
        {0, ""} -> step(%{c | phase: :trailers, buffer: rest}, acc)
        {n, ""} when n > 0 -> step(%{c | phase: {:chunk, n}, buffer: rest}, acc)
        _ -> {:error, "a malformed chunk size: #{inspect(String.slice(line, 0, 40))}"}
      end
    else
      :more -> {:ok, acc, c}
      error -> error
    end
  end

  defp step(%{phase: :trailers} = c, acc) do
    case line(c.buffer) do
      {:ok, "", rest} -> {:ok, [:done | acc], finish(c, rest)}
      {:ok, _trailer, rest} -> step(%{c | buffer: rest}, acc)
      :more -> {:ok, acc, c}
      error -> error
    end
  end

  # The answer is complete; bytes beyond it (a server writing ahead) spoil the connection.
  defp finish(c, rest),
    do: %{c | phase: :done, buffer: "", keep_alive: c.keep_alive and rest == ""}

  defp crlf(%{buffer: "\r\n" <> rest} = c, acc, next),
    do: step(%{c | phase: next, buffer: rest}, acc)

  defp crlf(%{buffer: buffer} = c, acc, _next) when byte_size(buffer) < 2, do: {:ok, acc, c}
  defp crlf(_c, _acc, _next), do: {:error, "a chunk not followed by CRLF"}

  defp line(buffer) do
    case :binary.split(buffer, "\r\n") do
      [line, rest] -> {:ok, line, rest}
      [_] when byte_size(buffer) > @max_line -> {:error, "a chunk line over #{@max_line} bytes"}
      [_] -> :more
    end
  end

  defp more({:more, _}, c, acc) do
    if byte_size(c.buffer) > @max_head,
      do: {:error, "an HTTP head over #{@max_head} bytes"},
      else: {:ok, acc, c}
  end

  defp more({:error, reason}, _c, _acc),
    do: {:error, "an unreadable HTTP head (#{inspect(reason)})"}

  # An interim answer (100 Continue) is skipped; then the body's framing, as RFC 9112 §6.3.
  defp head_done(%{status: status} = c, acc) when status in 100..199,
    do: step(%{c | phase: :status}, acc)

  defp head_done(c, acc) do
    acc = [{:head, c.status, c.headers} | acc]
    c = %{c | keep_alive: c.keep_alive and not closing?(c.headers)}

    case framing(c) do
      {:ok, :done} -> {:ok, [:done | acc], finish(c, c.buffer)}
      {:ok, {:length, 0}} -> {:ok, [:done | acc], finish(c, c.buffer)}
      {:ok, :close} -> step(%{c | phase: :close, keep_alive: false}, acc)
      {:ok, phase} -> step(%{c | phase: phase}, acc)
      error -> error
    end
  end

  defp closing?(headers) do
    Enum.any?(headers, fn {k, v} ->
      k == "connection" and "close" in (v |> String.downcase() |> String.split([",", " "]))
    end)
  end

  defp framing(%{method: "HEAD"}), do: {:ok, :done}
  defp framing(%{status: status}) when status in [204, 304], do: {:ok, :done}

  defp framing(%{headers: headers}) do
    encoding = for {"transfer-encoding", v} <- headers, do: String.downcase(v)
    lengths = for {"content-length", v} <- headers, uniq: true, do: String.trim(v)

    cond do
      Enum.any?(encoding, &String.contains?(&1, "chunked")) -> {:ok, {:chunk_size}}
      encoding != [] -> {:ok, :close}
      lengths == [] -> {:ok, :close}
      true -> content_length(lengths)
    end
  end

  defp content_length([text]) do
    case Integer.parse(text) do
      {n, ""} when n >= 0 -> {:ok, {:length, n}}
      _ -> {:error, "a malformed content-length: #{inspect(String.slice(text, 0, 40))}"}
    end
  end

  defp content_length(_), do: {:error, "content-length given twice with different values"}
end
