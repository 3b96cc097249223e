# Validation cost from Elixir vs the same validation in pure Rust on a pre-parsed value.
# Run: mix run bench/validate.exs
alias CMDC.Tool.{JSON, Schema}

schema =
  Schema.compile!(%{
    "type" => "object",
    "properties" => %{
      "query" => %{"type" => "string", "minLength" => 1},
      "repo" => %{"type" => "string", "pattern" => "^[\\w.-]+/[\\w.-]+$"},
      "limit" => %{"type" => "integer", "minimum" => 1, "maximum" => 100},
      "state" => %{"enum" => ["open", "closed", "all"]},
      "labels" => %{"type" => "array", "items" => %{"type" => "string"}},
      "assignee" => %{"type" => "string"},
      "draft" => %{"type" => "boolean"},
      "sort" => %{
        "type" => "object",
        "properties" => %{"field" => %{"type" => "string"}, "desc" => %{"type" => "boolean"}},
        "required" => ["field"]
      }
    },
    "required" => ["query", "repo"],
    "additionalProperties" => false
  })

valid = %{
  "query" => "scheduler crash",
  "repo" => "elixir-lang/elixir",
  "limit" => 20,
  "state" => "open",
  "labels" => ["bug", "nif", "perf"],
  "assignee" => "josevalim",
  "draft" => false,
  "sort" => %{"field" => "created", "desc" => true}
}

invalid = %{valid | "limit" => 0, "state" => "stale"} |> Map.put("extra", 1)

{:ok, _} = Schema.validate(schema, valid)
{:error, [_ | _]} = Schema.validate(schema, invalid)

defmodule Bench.Loop do
  # A tight loop: the harness costs a few ns per call (printed below), where `for` with a
  # closure measured ~40 ns.
  def run(0, _fun), do: :ok

  def run(n, fun) do
    fun.()
    run(n - 1, fun)
  end
end

measure = fn fun, n ->
  # Warm up, then take the best of 5 runs (least disturbed by the other core's work).
  Bench.Loop.run(div(n, 10), fun)

  Enum.map(1..5, fn _ ->
    {us, _} = :timer.tc(fn -> Bench.Loop.run(n, fun) end)
    us * 1000 / n
  end)
  |> Enum.min()
end

n = 200_000
elixir_valid = measure.(fn -> Schema.validate(schema, valid) end, n)

converting_valid =
  measure.(fn -> CMDC.Tool.Native.schema_validate_converting(schema, valid) end, div(n, 4))

elixir_invalid = measure.(fn -> Schema.validate(schema, invalid) end, div(n, 4))
json_valid = JSON.encode!(valid)
json_path = measure.(fn -> Schema.validate_json(schema, json_valid) end, n)

{:ok, {rust_valid, rust_is_valid}} =
  CMDC.Tool.Native.bench_rust_validate(schema, JSON.encode!(valid), 1_000_000)

{:ok, {rust_invalid, _}} =
  CMDC.Tool.Native.bench_rust_validate(schema, JSON.encode!(invalid), 200_000)

harness = measure.(fn -> :ok end, n)
noop = measure.(fn -> CMDC.Tool.Native.bench_noop(schema, valid) end, n)
{:ok, {walk, walk_check, check_only}} = CMDC.Tool.Native.bench_term_validate(schema, valid, n)
{:ok, program_only} = CMDC.Tool.Native.bench_compiled_validate(schema, valid, n)

row = fn label, ns ->
  value = :erlang.float_to_binary(ns / 1, decimals: 1)
  IO.puts(String.pad_trailing(label, 60) <> String.pad_leading(value, 9) <> " ns")
end

IO.puts(
  "validate an 8-property tool-args map (strings, bounded integer, enum, array, nested object)"
)

IO.puts("terms read: #{CMDC.Tool.Native.term_layout()} (see native/cmdc_tool_nif/src/layout.rs)")

row.("pure Rust, pre-parsed serde_json::Value, valid", rust_valid)
row.("pure Rust, pre-parsed serde_json::Value, is_valid only", rust_is_valid)
row.("Elixir CMDC.Tool.Schema.validate/2, valid (in place)", elixir_valid)
row.("Elixir, converting path (term -> serde Value), valid", converting_valid)
row.("Elixir CMDC.Tool.Schema.validate_json/2 (JSON text), valid", json_path)
row.("  of which: the loop calling it (harness)", harness)
row.("  of which: an empty NIF call with the same arguments", noop - harness)
row.("  of which: the compiled program on the term (in Rust)", program_only)
row.("jsonschema path: reading the term into the index (in Rust)", walk)
row.("  of which: is_valid on the index (in Rust)", check_only)
row.("  (reading + is_valid in one Rust loop)", walk_check)
row.("pure Rust, pre-parsed, invalid (4 errors collected)", rust_invalid)
row.("Elixir CMDC.Tool.Schema.validate/2, invalid (4 errors)", elixir_invalid)

IO.puts(
  "ratio Elixir/Rust, valid:   #{Float.round(elixir_valid / rust_valid, 2)}x " <>
    "(targets: <= 3x, issue 2; <= 1.5x, issue 8)"
)

IO.puts("ratio without the harness:  #{Float.round((elixir_valid - harness) / rust_valid, 2)}x")

IO.puts("ratio Elixir/Rust, invalid: #{Float.round(elixir_invalid / rust_invalid, 2)}x")

IO.puts(
  "ratio Elixir/Rust, valid, converting path: #{Float.round(converting_valid / rust_valid, 2)}x"
)

# ex_json_schema cannot be installed here (hex.pm is unreachable); the figure it was measured at
# for this map on this machine kind comes from issue 8.
ex_json_schema_ns = 17_000

IO.puts(
  "vs ex_json_schema (about 17 us for this map, issue 8's figure): " <>
    "#{round(ex_json_schema_ns / elixir_valid)}x faster (target: >= 30x)"
)

# A 1 MB arguments map: strings are read where they are (sub-binaries of the caller's data),
# so validating it copies nothing; the dirty scheduler takes it.
chunk = String.duplicate("x", 1000)
big = %{"files" => Enum.map(1..1000, &%{"path" => "f#{&1}.txt", "content" => chunk})}

big_schema =
  Schema.compile!(%{
    "type" => "object",
    "properties" => %{
      "files" => %{
        "type" => "array",
        "items" => %{
          "type" => "object",
          "properties" => %{"path" => %{"type" => "string"}, "content" => %{"type" => "string"}},
          "required" => ["path", "content"]
        }
      }
    }
  })

{:ok, _} = Schema.validate(big_schema, big)
binary_before = :erlang.memory(:binary)
{us, {:ok, _}} = :timer.tc(fn -> Schema.validate(big_schema, big) end)
binary_after = :erlang.memory(:binary)
size = byte_size(:erlang.term_to_binary(big))

IO.puts(
  "1 MB args map (#{div(size, 1024)} KiB as external term): validated in #{us} us; " <>
    "BEAM binary memory change #{binary_after - binary_before} bytes"
)
