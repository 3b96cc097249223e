defmodule CMDC.Tool.Schema do
  @moduledoc """
  JSON Schemas compiled natively (mirrors `native/cmdc_tool_nif/src/schema.rs`).

  A schema is compiled once into a native validator and reused. Its dialect is chosen by
  evidence (`native/cmdc_tool_core/src/dialect.rs`): a `$schema` keyword naming a draft (4, 6,
  7, 2019-09, 2020-12) wins, then the `:draft` option (MCP tools ask for 2020-12, MCP's
  default); otherwise Draft 7, unless the schema uses keywords only a later draft defines
  (`prefixItems`, `$defs`, `dependentRequired`, ...: read as 2020-12, as Pydantic v2 means) or
  OpenAPI 3.0's (`nullable: true`, a boolean `exclusiveMinimum`/`exclusiveMaximum`: read as
  OpenAPI 3.0, so `nullable` accepts null and the boolean bounds are exclusive). The provider
  conversions say that choice in a warning (keyword `"$schema"`), and the registry, the module
  list and the runner read every schema the same way. The schema is checked
  against its meta-schema, so a broken one is refused with a clear error instead of validating
  nothing. `$ref`s to other documents resolve only against documents you pass: nothing is ever
  fetched over the network.

  For tool modules, `for_module/1` keeps one compiled validator per module version (keyed by the
  module's MD5), so a hot-reloaded module gets its schema recompiled, never a stale one. It is
  the one validator of the tool: `CMDC.Tool.validate/2`, `CMDC.Tool.Registry` (which registers
  this very schema), the runner and the MCP server all use it (`native/cmdc_tool_nif/src/modules.rs`
  holds it).

  ## Errors

    * `compile/2`, `for_module/1`, `for_output/1`: `{:error, message}`, a binary saying what is
      wrong with the schema (or that the module's callback raised); `compile!/2` raises
      `ArgumentError` with that message.
    * `validate/2`, `validate_json/2`: `{:error, [error]}`, every failure a map
      `%{path, keyword, message, schema_path}` of binaries (`keyword: "json"` for a term that
      is not JSON, or text that does not parse).

      iex> {:ok, schema} = CMDC.Tool.Schema.compile(%{"type" => "integer", "minimum" => 1})
      iex> CMDC.Tool.Schema.validate(schema, 3)
      {:ok, 3}
      iex> {:error, [error]} = CMDC.Tool.Schema.validate(schema, 0)
      iex> {error.path, error.keyword}
      {"", "minimum"}
  """

  alias CMDC.Tool.Native
  require Native

  @typedoc "A compiled schema: a reference to the native validator."
  @type t :: reference()

  @typedoc """
  One validation failure: `path` is a JSON Pointer into the arguments (`""` is the root),
  `keyword` the schema keyword that failed (`"json"` for a term that is not JSON, `"schema"` for
  a broken schema), `schema_path` a JSON Pointer into the schema.
  """
  @type error :: %{
          path: String.t(),
          keyword: String.t(),
          message: String.t(),
          schema_path: String.t()
        }

  @doc """
  Compiles a schema (a map, a boolean, or JSON text).

  Options:
    * `:draft` - the draft for a schema without `$schema`: `"4"`, `"6"`, `"7"` (default),
      `"2019-09"` or `"2020-12"`.
    * `:documents` - `%{uri => schema}` that `$ref`s to other documents resolve against.
    * `:dirs` - `%{url_prefix => folder}`: a `$ref` under the prefix reads the file at the rest
      of the URL inside the folder (used for the official test suite's remotes).

      iex> {:error, message} = CMDC.Tool.Schema.compile(%{"type" => "strnig"})
      iex> message =~ "invalid schema"
      true
  """
  @spec compile(map() | boolean() | String.t(), keyword()) :: {:ok, t()} | {:error, String.t()}
  def compile(schema, opts \\ [])

  def compile(text, opts) when is_binary(text) do
    with {:ok, schema} <- CMDC.Tool.JSON.decode(text), do: compile(schema, opts)
  end

  def compile(schema, opts) do
    CMDC.Tool.Options.check!(opts, [:draft, :documents, :dirs], "CMDC.Tool.Schema.compile/2")

    native_opts = %{
      draft: opts[:draft] && to_string(opts[:draft]),
      documents: Map.new(Keyword.get(opts, :documents, %{})),
      dirs: for({prefix, dir} <- Keyword.get(opts, :dirs, %{}), do: {prefix, to_string(dir)})
    }

    Native.schema_compile(schema, native_opts)
  end

  @doc """
  Compiles a schema or raises `ArgumentError`.

      iex> schema = CMDC.Tool.Schema.compile!(%{"type" => "string"})
      iex> is_reference(schema)
      true
  """
  @spec compile!(map() | boolean() | String.t(), keyword()) :: t()
  def compile!(schema, opts \\ []) do
    case compile(schema, opts) do
      {:ok, compiled} -> compiled
      {:error, message} -> raise ArgumentError, message
    end
  end

  @doc """
  Validates a term against a compiled schema: `{:ok, args}` (the same term) or
  `{:error, errors}`. Terms that are not JSON give an error with keyword `"json"` naming the path.
  Big terms are checked on a dirty scheduler; a long list whose elements the schema checks one
  by one is checked a slice at a time on the caller's scheduler instead.

      iex> schema = CMDC.Tool.Schema.compile!(%{"type" => "object"})
      iex> {:error, [error]} = CMDC.Tool.Schema.validate(schema, %{"pid" => self()})
      iex> {error.path, error.keyword}
      {"/pid", "json"}

      iex> schema = CMDC.Tool.Schema.compile!(%{"items" => %{"type" => "integer"}})
      iex> list = Enum.to_list(1..100_000)
      iex> {:ok, ^list} = CMDC.Tool.Schema.validate(schema, list)
      iex> {:error, [error]} = CMDC.Tool.Schema.validate(schema, list ++ ["x"])
      iex> error.path
      "/100000"
  """
  @spec validate(t(), term()) :: {:ok, term()} | {:error, [error()]}
  def validate(schema, args) when is_list(args), do: validate_slices(schema, args, args, 0)
  def validate(schema, args), do: Native.with_dirty(schema_validate(schema, args))

  # A list whose elements the schema checks one by one is validated a slice of elements per
  # native call on the caller's scheduler, where the VM runs other processes between slices
  # (on a dirty scheduler the same work competes with the normal schedulers for the cores).
  # Anything else (an invalid element, a schema that looks at the whole list) is decided by
  # the usual call, which names the errors.
  defp validate_slices(schema, list, rest, index) do
    case Native.schema_validate_slice(schema, rest, index) do
      :done -> {:ok, list}
      {:more, rest, index} -> validate_slices(schema, list, rest, index)
      :undecided -> Native.with_dirty(schema_validate(schema, list))
    end
  end

  @doc """
  Decodes JSON text and validates it in one native call: `{:ok, decoded}` or `{:error, errors}`.
  Text that is not JSON gives one error with keyword `"json"`.

      iex> schema = CMDC.Tool.Schema.compile!(%{"type" => "object", "required" => ["q"]})
      iex> CMDC.Tool.Schema.validate_json(schema, ~s({"q": "elixir"}))
      {:ok, %{"q" => "elixir"}}
  """
  @spec validate_json(t(), String.t()) :: {:ok, term()} | {:error, [error()]}
  def validate_json(schema, text) when is_binary(text) do
    Native.with_dirty(schema_validate_json(schema, text))
  end

  def validate_json(_schema, other) do
    {:error, [json_error("expected JSON text (a binary), got #{inspect(other, limit: 5)}")]}
  end

  @doc false
  def json_error(message), do: %{path: "", keyword: "json", message: message, schema_path: ""}

  @doc """
  The compiled validator for a tool module's `parameters/0`, compiled on first use and kept
  natively per module version. A schema that does not compile gives `{:error, message}` (also
  kept).
  """
  @spec for_module(module()) :: {:ok, t()} | {:error, String.t()}
  def for_module(module) when is_atom(module),
    do: cached(module, :parameters, "parameters/0", fn -> module.parameters() end)

  @doc """
  The compiled validator for a tool module's output schema (`CMDC.Tool.Structured.output_schema/1`),
  kept per module version like `for_module/1`; `{:error, message}` when it has none or it does
  not compile.
  """
  @spec for_output(module()) :: {:ok, t()} | {:error, String.t()}
  def for_output(module) when is_atom(module) do
    cached(module, :output, "output_schema/0", fn ->
      if Code.ensure_loaded?(module) and function_exported?(module, :output_schema, 0),
        do: module.output_schema(),
        else: {:error, "no output schema"}
    end)
  end

  @doc false
  # CMDC.Tool.validate/2: the arguments validated against for_module/1's schema in one native
  # call (strict mode's nulls dropped: strict/2), compiled on first use.
  # `validate` (a remote capture, so the hot path allocates no closure) is the compiled
  # schema's path, taken when the module's schema is not stored yet.
  def validate_module(module, args) do
    validate = &__MODULE__.strict/2

    case module_md5(module) do
      nil -> with_compiled(module, validate, args)
      md5 -> stored(Native.with_dirty(module_validate(module, md5, args)), module, validate, args)
    end
  end

  @doc false
  # CMDC.Tool.validate_json/2: the same for the JSON text a model sent, decoded in that call.
  def validate_module_json(module, text) do
    validate = &__MODULE__.strict_json/2

    case is_binary(text) and module_md5(module) do
      md5 when is_binary(md5) ->
        stored(Native.with_dirty(module_validate_json(module, md5, text)), module, validate, text)

      _no_version_or_not_text ->
        with_compiled(module, validate, text)
    end
  end

  @doc false
  # CMDC.Tool.RoundTrip.validate/2 (documented there): validate/2, then, on errors, again with
  # the nulls strict mode introduced dropped. Here so that this module's own validation path
  # and RoundTrip share it without calling each other.
  @spec strict(t(), term()) :: {:ok, term()} | {:error, [error()]}
  def strict(schema, args) do
    case validate(schema, args) do
      {:ok, args} -> {:ok, args}
      {:error, errors} -> strict_retry(schema, args, errors)
    end
  end

  @doc false
  # CMDC.Tool.RoundTrip.validate_json/2: the same for JSON text.
  @spec strict_json(t(), term()) :: {:ok, term()} | {:error, [error()]}
  def strict_json(schema, text) do
    case validate_json(schema, text) do
      {:ok, args} -> {:ok, args}
      {:error, errors} -> strict_retry_json(schema, text, errors)
    end
  end

  @doc false
  # CMDC.Tool.RoundTrip.retry/3.
  @spec strict_retry(t(), term(), [error()]) :: {:ok, term()} | {:error, [error()]}
  def strict_retry(schema, args, errors) do
    if Enum.any?(errors, &(&1.keyword == "json")) do
      {:error, errors}
    else
      with dropped when dropped != nil <- Native.schema_drop_nulls(schema, args),
           {:ok, dropped} <- validate(schema, dropped) do
        {:ok, dropped}
      else
        _ -> {:error, errors}
      end
    end
  end

  # As strict_retry/3 for JSON text (decoded again only on this, the failing, path).
  defp strict_retry_json(schema, text, errors) do
    with false <- Enum.any?(errors, &(&1.keyword == "json")),
         {:ok, args} <- CMDC.Tool.JSON.decode(text) do
      strict_retry(schema, args, errors)
    else
      _ -> {:error, errors}
    end
  end

  # Nothing stored for this version yet: compiled (and stored, for the next call) now.
  defp stored({:error, :miss}, module, validate, input),
    do: with_compiled(module, validate, input)

  defp stored(result, _module, _validate, _input), do: result

  defp with_compiled(module, validate, input) do
    case for_module(module) do
      {:ok, schema} -> validate.(schema, input)
      {:error, message} -> {:error, [schema_error(message)]}
    end
  end

  @doc false
  def schema_error(message), do: %{path: "", keyword: "schema", message: message, schema_path: ""}

  defp cached(module, kind, what, fetch) do
    case module_md5(module) do
      nil ->
        compile_module(module, what, fetch)

      md5 ->
        case Native.module_schema(module, kind, md5) do
          nil ->
            {:ok, stored} =
              Native.module_schema_put(module, kind, md5, compile_module(module, what, fetch))

            stored

          result ->
            result
        end
    end
  end

  # The module version: the one invalidation rule of the stored schemas.
  defp module_md5(module) do
    :erlang.get_module_info(module, :md5)
  rescue
    ArgumentError -> nil
  end

  # `{:ok, schema}` or `{:error, message}`, the message naming the module and the callback.
  defp compile_module(module, what, fetch) do
    case fetch.() do
      {:error, message} ->
        {:error, "#{inspect(module)}: #{message}"}

      schema ->
        with {:error, message} <- compile(schema),
             do: {:error, "#{inspect(module)}.#{what}: #{message}"}
    end
  rescue
    e in UndefinedFunctionError ->
      {:error, "#{inspect(module)} is not a tool: #{Exception.message(e)}"}

    e ->
      {:error, "#{inspect(module)}.#{what} raised: #{Exception.message(e)}"}
  end
end
