# JSON text <-> terms beside serde_json on the same bytes (`from_slice::<Value>`, `to_vec`),
# measured in one run at three sizes: every figure with its reference, the ratio and the target
# (issue 18: within 1.0x).
# Run: MIX_ENV=bench mix run bench/json.exs
alias CMDC.Tool.{JSON, Native}

defmodule Bench.Loop do
  def run(0, _fun), do: :ok

  def run(n, fun) do
    fun.()
    run(n - 1, fun)
  end
end

measure = fn fun, n ->
  Bench.Loop.run(max(div(n, 10), 1), fun)

  Enum.map(1..5, fn _ ->
    {us, _} = :timer.tc(fn -> Bench.Loop.run(n, fun) end)
    us * 1000 / n
  end)
  |> Enum.min()
end

args = %{
  "query" => "scheduler crash",
  "repo" => "elixir-lang/elixir",
  "limit" => 20,
  "state" => "open",
  "labels" => ["bug", "nif", "perf"],
  "assignee" => "josevalim",
  "draft" => false,
  "sort" => %{"field" => "created", "desc" => true}
}

item = fn i ->
  %{"id" => i, "name" => "item #{i}", "price" => i * 1.25, "tags" => ["a", "b"], "ok" => true}
end

# ~300 KB and ~2 MB.
doc_20k = Enum.map(1..20_000, fn i -> %{"id" => i, "name" => "n#{i}", "ok" => rem(i, 2) == 0} end)
doc_2mb = Enum.map(1..25_000, item)

fmt = fn ns ->
  {value, unit} = if ns >= 10_000, do: {ns / 1000, "us"}, else: {ns, "ns"}
  String.pad_leading(:erlang.float_to_binary(value / 1, decimals: 1), 9) <> " " <> unit
end

row = fn label, ns, ref ->
  ratio = ns / ref
  verdict = if ratio <= 1.0, do: "ok", else: "MISSED"

  IO.puts(
    String.pad_trailing(label, 40) <>
      fmt.(ns) <>
      fmt.(ref) <>
      String.pad_leading("#{Float.round(ratio, 2)}x", 8) <> "  #{verdict} (target <= 1.0x)"
  )
end

IO.puts(
  String.pad_trailing("work", 40) <>
    String.pad_leading("this project", 12) <> String.pad_leading("serde_json", 12) <> "   ratio"
)

for {label, term, n} <- [
      {"args map", args, 200_000},
      {"20k items", doc_20k, 40},
      {"2 MB", doc_2mb, 10}
    ] do
  text = JSON.encode!(term)
  {:ok, ^term} = JSON.decode(text)
  {:ok, {rust_decode, rust_encode}} = Native.bench_rust_json(text, max(n * 2, 10))
  decode = measure.(fn -> JSON.decode(text) end, n)
  encode = measure.(fn -> JSON.encode(term) end, n)
  kb = Float.round(byte_size(text) / 1024, 1)
  row.("decode #{label} (#{kb} KiB)", decode, rust_decode)
  row.("encode #{label}", encode, rust_encode)
end
