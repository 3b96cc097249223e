defmodule CMDC.Tool.JSON do
  @moduledoc """
  JSON text, natively (mirrors `native/cmdc_tool_nif/src/json.rs`).

  Decoding builds terms straight from the Rust parser: objects become maps with string keys,
  arrays lists, `null` becomes `nil`, integers of any size integers.

  Encoding follows the library's term rules: maps with string or atom keys, lists, UTF-8 binaries,
  integers (any size), floats, `true`/`false`/`nil`; other atoms encode as their name (UTF-8, any
  script). Tuples, pids, references, functions, non-UTF-8 binaries, improper lists and a key given
  twice (`:a` and `"a"`) are errors that name their path.

  Whatever `encode/2` writes, `decode/1` reads back to an equal term (atoms come back as strings):
  both accept 128 nested arrays/objects and refuse 129, and both convert big integers at the same
  cost (an integer of about a million digits is over the limit of one call either way).

  Inputs larger than a normal scheduler should handle (16 KiB of text, ~3,000 nodes, integers
  beyond ~300 digits) are processed on a dirty CPU scheduler, decided before the work is done.

  Errors: `decode/1` and `encode/2` answer `{:error, message}`, a binary naming the position or
  path and the rule broken; `decode!/1` raises `CMDC.Tool.JSON.DecodeError` and `encode!/2`
  `CMDC.Tool.JSON.EncodeError` with that message.

      iex> CMDC.Tool.JSON.decode(~s({"a": [1, 2.5, null, true]}))
      {:ok, %{"a" => [1, 2.5, nil, true]}}

      iex> CMDC.Tool.JSON.encode(%{name: "read", args: [1, nil]})
      {:ok, ~s({"args":[1,null],"name":"read"})}

      iex> CMDC.Tool.JSON.decode("123456789012345678901234567890")
      {:ok, 123_456_789_012_345_678_901_234_567_890}
  """

  alias CMDC.Tool.Native
  require Native

  defmodule DecodeError do
    @moduledoc "Raised by `CMDC.Tool.JSON.decode!/1` for text that is not JSON."
    defexception [:message]
  end

  defmodule EncodeError do
    @moduledoc "Raised by `CMDC.Tool.JSON.encode!/2` for a term that is not JSON."
    defexception [:message, :path]
  end

  @doc """
  Decodes JSON text.

      iex> CMDC.Tool.JSON.decode("[1")
      {:error, "invalid JSON: EOF while parsing a list at line 1 column 2"}
  """
  @spec decode(iodata()) :: {:ok, term()} | {:error, String.t()}
  def decode(text) when is_binary(text) do
    Native.with_dirty(json_decode(text))
  end

  def decode(text) when is_list(text) do
    decode(IO.iodata_to_binary(text))
  rescue
    ArgumentError -> {:error, "invalid JSON: the input is not iodata"}
  end

  def decode(other), do: {:error, "invalid JSON: expected a binary, got #{inspect(other)}"}

  @doc """
  Decodes JSON text or raises `CMDC.Tool.JSON.DecodeError`.

      iex> CMDC.Tool.JSON.decode!("true")
      true
  """
  @spec decode!(iodata()) :: term()
  def decode!(text) do
    case decode(text) do
      {:ok, term} -> term
      {:error, message} -> raise DecodeError, message: message
    end
  end

  @doc """
  Encodes a term as JSON text. Option `pretty: true` indents by two spaces.

      iex> CMDC.Tool.JSON.encode(%{"a" => {1, 2}})
      {:error, "/a: a tuple ({1,2}) is not a JSON value"}
  """
  @spec encode(term(), keyword()) :: {:ok, String.t()} | {:error, String.t()}
  def encode(term, opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:pretty], "CMDC.Tool.JSON.encode/2")

    case native_encode(term, Keyword.get(opts, :pretty, false)) do
      {:ok, text} -> {:ok, text}
      {:error, {"", message}} -> {:error, message}
      {:error, {path, message}} -> {:error, "#{path}: #{message}"}
    end
  end

  # A top-level list too long for one normal-scheduler call (the usual shape of a big output)
  # is written a slice per native call on the caller's scheduler, where the VM can run other
  # processes between slices; on a dirty scheduler the same work would compete with the normal
  # schedulers for the cores. Other big terms go to a dirty scheduler.
  defp native_encode(list, false) when is_list(list) do
    case Native.json_encode(list, false) do
      {:error, :yield} -> encode_slices(list, list, [])
      result -> result
    end
  end

  defp native_encode(term, pretty), do: Native.with_dirty(json_encode(term, pretty))

  # The slices' texts, last first, as one JSON array.
  defp join(texts),
    do: IO.iodata_to_binary(["[", Enum.intersperse(Enum.reverse(texts), ","), "]"])

  defp encode_slices(list, rest, texts) do
    case Native.json_encode_slice(rest) do
      {:ok, {text, []}} ->
        {:ok, join([text | texts])}

      {:ok, {text, rest}} ->
        encode_slices(list, rest, [text | texts])

      # The next element alone is over a normal call's budget: the rest on a dirty scheduler.
      {:error, :yield} ->
        case Native.json_encode_dirty(rest, false) do
          {:ok, text} -> {:ok, join([binary_part(text, 1, byte_size(text) - 2) | texts])}
          {:error, _} -> Native.json_encode_dirty(list, false)
        end

      # Not JSON: the whole list again, for the error's path from the top.
      {:error, _} ->
        Native.json_encode_dirty(list, false)
    end
  end

  @doc """
  Encodes a term or raises `CMDC.Tool.JSON.EncodeError`.

      iex> CMDC.Tool.JSON.encode!([1, "two"])
      ~s([1,"two"])
  """
  @spec encode!(term(), keyword()) :: String.t()
  def encode!(term, opts \\ []) do
    case encode(term, opts) do
      {:ok, text} -> text
      {:error, message} -> raise EncodeError, message: message
    end
  end
end
