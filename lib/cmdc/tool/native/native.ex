defmodule CMDC.Tool.Native do
  @moduledoc false
  # The only module that declares NIF stubs: those of the NIFs that ship. Only modules under
  # lib/cmdc/tool/ call it; each stub mirrors a `#[rustler::nif]` in native/cmdc_tool_nif/src/
  # (same name and arity), and `:erlang.load_nif/2` refuses the library if one is missing.

  # Every fallible NIF answers `{:ok, value}` or `{:error, reason}`; the reasons are made in one
  # place, native/cmdc_tool_nif/src/error.rs. A NIF over a normal scheduler's ~1 ms budget
  # answers `{:error, :yield}`, and `with_dirty/1` calls its `_dirty` twin.

  @on_load :load_nif

  # The library the native compiler (mix.exs) builds for this Mix environment, and with its
  # `testing` feature the test and benchmark NIFs' stubs: the stubs match its table exactly.
  # (Read from `CMDC.Tool.Native.Build`, which says when to recompile: this module must never be
  # loaded just to ask that, see there.)
  @features CMDC.Tool.Native.Build.features()
  @lib CMDC.Tool.Native.Build.library()
  if "testing" in @features, do: use(CMDC.Tool.Native.Testing)

  @doc false
  def load_nif do
    path = Path.join([:code.priv_dir(:cmdc_tool), "native", @lib])

    case :erlang.load_nif(String.to_charlist(path), 0) do
      :ok ->
        :ok

      {:error, {reason, text}} ->
        IO.warn("""
        cmdc_tool: the native library #{path}.so could not be loaded (#{reason}: #{text}).
        #{fix(reason)}
        """)

        # Returning :ok keeps the module loaded so every call gives the clear error below.
        :ok
    end
  end

  # `:upgrade`: this module was reloaded in a running VM (`recompile` in iex after
  # lib/cmdc/tool/native/native.ex changed) while its previous version still holds a library; a NIF
  # library cannot be swapped in a running VM, whatever was rebuilt.
  defp fix(:upgrade),
    do: "Fix: restart the VM (leave iex, run `iex -S mix` again): it loads the library built."

  defp fix(_),
    do: """
    Fix: run `mix compile` (it builds the Rust crate with cargo); if it was built for another
    Erlang/OTP version or machine, run `mix clean && mix compile`.\
    """

  @doc false
  # `with_dirty(schema_validate(schema, args))`: calls the NIF and, when it answers
  # `{:error, :yield}`, its `_dirty` twin with the same arguments (evaluated once). The one
  # place of that rule; a macro so the hot path pays no `apply/3`.
  defmacro with_dirty({name, _meta, args}) when is_atom(name) and is_list(args) do
    dirty = :"#{name}_dirty"
    vars = Macro.generate_arguments(length(args), __MODULE__)

    quote do
      case unquote(args) do
        unquote(vars) ->
          case CMDC.Tool.Native.unquote(name)(unquote_splicing(vars)) do
            {:error, :yield} -> CMDC.Tool.Native.unquote(dirty)(unquote_splicing(vars))
            result -> result
          end
      end
    end
  end

  defp err do
    raise RuntimeError, """
    cmdc_tool's native library is not loaded (see the warning printed when CMDC.Tool.Native \
    loaded). Fix: run `mix compile` with cargo on PATH; after an Erlang/OTP upgrade run \
    `mix clean && mix compile`.
    """
  end

  # discovery.rs
  def discovery_scan(_opts, _previous_digest), do: err()
  def discovery_claude_plugins(_opts), do: err()
  def home_user(_raw), do: err()
  def home_cmdc(_raw, _home), do: err()
  def home_cmdc_dirs(_raw, _home), do: err()

  # http/client.rs
  def http_client_new(_opts), do: err()
  def http_request(_client, _opts, _body), do: err()
  def http_request_dirty(_client, _opts, _body), do: err()
  def http_cancel(_request), do: err()
  def http_ack(_request, _n), do: err()

  # exec.rs
  def exec_start(_opts, _stdin), do: err()
  def exec_start_dirty(_opts, _stdin), do: err()
  def exec_cancel(_handle), do: err()
  def exec_write(_handle, _data), do: err()
  def exec_write_dirty(_handle, _data), do: err()
  def exec_close_stdin(_handle), do: err()
  def exec_ack(_handle, _n), do: err()
  def exec_kill_all, do: err()

  # http_server.rs
  def http_listen(_opts), do: err()
  def http_close(_listener), do: err()
  def http_watch(_exchange), do: err()
  def http_reply(_exchange, _status, _headers, _body), do: err()
  def http_reply_dirty(_exchange, _status, _headers, _body), do: err()
  def http_stream(_exchange, _status, _headers), do: err()
  def http_send(_stream, _event, _droppable), do: err()
  def http_send_dirty(_stream, _event, _droppable), do: err()
  def http_finish(_stream), do: err()

  # json.rs
  def json_decode(_text), do: err()
  def json_decode_dirty(_text), do: err()
  def json_encode(_term, _pretty), do: err()
  def json_encode_dirty(_term, _pretty), do: err()
  def json_encode_slice(_list), do: err()

  # matcher.rs
  def matcher_compile(_pattern), do: err()
  def matcher_match(_matcher, _texts), do: err()
  def matcher_match_dirty(_matcher, _texts), do: err()

  # permissions.rs
  def permissions_resolve(_settings_json, _origin), do: err()

  # schema.rs
  def schema_compile(_schema, _opts), do: err()
  def schema_validate(_schema, _args), do: err()
  def schema_validate_dirty(_schema, _args), do: err()
  def schema_validate_slice(_schema, _list, _index), do: err()
  def schema_validate_json(_schema, _text), do: err()
  def schema_validate_json_dirty(_schema, _text), do: err()
  def schema_drop_nulls(_schema, _args), do: err()

  # modules.rs
  def module_schema(_module, _kind, _md5), do: err()
  def module_schema_put(_module, _kind, _md5, _compiled), do: err()
  def module_schema_drop(_modules), do: err()
  def module_validate(_module, _md5, _args), do: err()
  def module_validate_dirty(_module, _md5, _args), do: err()
  def module_validate_json(_module, _md5, _text), do: err()
  def module_validate_json_dirty(_module, _md5, _text), do: err()

  # registry.rs
  def registry_new(_reserved), do: err()
  def registry_default, do: err()
  def registry_info(_registry), do: err()
  def registry_register(_registry, _batch, _replace), do: err()
  def registry_unregister(_registry, _name), do: err()
  def registry_put_settings(_registry, _name, _settings), do: err()
  def registry_settings(_registry, _name), do: err()
  def registry_find(_registry, _name), do: err()
  def registry_fetch(_registry, _name), do: err()
  def registry_fetch_dirty(_registry, _name), do: err()
  def registry_list(_registry), do: err()
  def registry_list_dirty(_registry), do: err()
  def registry_contextual(_registry), do: err()
  def registry_suggest(_registry, _name), do: err()
  def tool_suggest(_names, _name), do: err()
  def registry_validate(_registry, _name, _args), do: err()
  def registry_validate_dirty(_registry, _name, _args), do: err()
  def registry_validate_json(_registry, _name, _text), do: err()
  def registry_validate_json_dirty(_registry, _name, _text), do: err()
  def registry_cached(_registry, _format, _strict, _context_key), do: err()
  # the search itself is search.rs
  def registry_search(_registry, _query, _opts), do: err()
  def registry_search_dirty(_registry, _query, _opts), do: err()
  def registry_set_vectors(_registry, _vectors, _clear), do: err()
  def registry_set_vectors_dirty(_registry, _vectors, _clear), do: err()
  def registry_missing_vectors(_registry, _max), do: err()
  def registry_missing_vectors_dirty(_registry, _max), do: err()
  def registry_vector_info(_registry), do: err()
  # embed.rs (the `embedder` feature, see `embedder?/0`)
  if "embedder" in @features do
    def embedder_load(_dir), do: err()
    def embedder_embed(_model, _texts), do: err()
  end

  @doc false
  # Whether this build has the native sentence embedder (not with CMDC_TOOL_EMBEDDER=0).
  @embedder "embedder" in @features
  def embedder?, do: @embedder

  def registry_build(_registry, _format, _strict, _context_key, _generation, _overrides),
    do: err()

  def providers_convert(_tools, _format, _strict), do: err()
  def providers_formats, do: err()

  # names.rs
  def tool_name_original(_registered, _called), do: err()
  def tool_name_check(_name), do: err()
  def tool_name_namespaced(_server, _tool), do: err()
  def tool_name_for(_name, _format), do: err()

  # scripts.rs
  def script_load(_paths, _opts), do: err()
  def script_cache_status(_paths, _cache, _cache_key), do: err()
  def script_call(_path, _function, _args_json, _opts), do: err()
  def script_cancel(_handle), do: err()
  def script_workers, do: err()
  def script_stop(_path), do: err()
  def script_describe_powershell(_source, _path), do: err()
  def script_languages, do: err()

  # stdio.rs
  def stdio_protocol_fd(_fd), do: err()
end
