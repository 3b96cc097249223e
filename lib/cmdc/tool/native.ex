defmodule CMDC.Tool.Native do
  @moduledoc false
  # The only module that declares NIF stubs. Only modules under lib/cmdc/tool/ call it; each
  # stub mirrors a `#[rustler::nif]` in native/cmdc_tool_nif/src/ (same name and arity), and
  # `:erlang.load_nif/2` refuses the library if one is missing.

  @on_load :load_nif
  @lib "libcmdc_tool_nif"

  @doc false
  def load_nif do
    path = Path.join([:code.priv_dir(:cmdc_tool), "native", @lib])

    case :erlang.load_nif(String.to_charlist(path), 0) do
      :ok ->
        :ok

      {:error, {reason, text}} ->
        IO.warn("""
        cmdc_tool: the native library #{path}.so could not be loaded (#{reason}: #{text}).
        Fix: run `mix compile` (it builds the Rust crate with cargo); if it was built for another
        Erlang/OTP version or machine, run `mix clean && mix compile`.
        """)

        # Returning :ok keeps the module loaded so every call gives the clear error below.
        :ok
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

  # json.rs
  def json_decode(_text), do: err()
  def json_decode_dirty(_text), do: err()
  def json_encode(_term, _pretty), do: err()
  def json_encode_dirty(_term, _pretty), do: err()

  # schema.rs
  def schema_compile(_schema, _opts), do: err()
  def schema_validate(_schema, _args), do: err()
  def schema_validate_dirty(_schema, _args), do: err()
  def schema_validate_json(_schema, _text), do: err()
  def schema_validate_json_dirty(_schema, _text), do: err()
  def schema_validate_converting(_schema, _args), do: err()
  def schema_source(_schema), do: err()
  def beam_conformance(_document), do: err()
  def bench_rust_validate(_schema, _text, _iterations), do: err()
end
