defmodule CMDC.Tool.Native.Testing do
  @moduledoc false
  # The stubs of the test and benchmark NIFs (native/cmdc_tool_nif/src/testing.rs), built only
  # with the crate's `testing` feature (MIX_ENV=test or bench, or CMDC_NIF_TESTING=1; see
  # Mix.Tasks.Compile.CmdcNative in mix.exs). They cannot live in a module of their own:
  # `:erlang.load_nif/2` loads a library into the one module its table names, and a resource
  # (a compiled schema) made by one library is unknown to another. So `CMDC.Tool.Native` uses
  # this module when, and only when, the library it loads was built with the feature: its
  # stubs then match that table exactly, and production builds have neither.

  defmacro __using__(_opts) do
    quote do
      # The validation paths compared by the tests.
      def schema_validate_converting(_schema, _args), do: err()
      def schema_validate_api(_schema, _args), do: err()
      def schema_validate_compiled(_schema, _args, _api), do: err()
      def term_layout, do: err()
      def beam_conformance(_document), do: err()
      def registry_cache_info(_registry), do: err()

      # Reference figures for bench/*.exs.
      def bench_noop(_schema, _args), do: err()
      def bench_rust_validate(_schema, _text, _iterations), do: err()
      def bench_term_validate(_schema, _args, _iterations), do: err()
      def bench_compiled_validate(_schema, _args, _iterations), do: err()
      def bench_rust_json(_text, _iterations), do: err()
      def bench_rust_text_validate(_schema, _text, _iterations), do: err()
      def bench_rust_one(_what, _schema, _text, _iterations), do: err()

      # Tool search (bench/search.exs): a bare index, without tool modules.
      def search_bench_build(_docs), do: err()
      def search_bench_add(_index, _docs), do: err()
      def search_bench_query(_index, _queries, _regex, _limit, _rounds), do: err()
      def search_bench_one(_index, _text, _limit), do: err()
      def search_bench_passages(_index), do: err()
      def search_bench_set_vectors(_index, _vectors), do: err()
      def search_bench_vector_info(_index), do: err()
      def search_bench_query_mode(_index, _queries, _mode, _limit, _rounds), do: err()

      # Memory after big inputs (issue 16).
      def memory_kept_after(_args), do: err()
      def memory_malloc, do: err()
    end
  end
end
