# Fidelity of every provider output, both directions, on calls generated from the schemas
# (hypothesis-jsonschema) rather than chosen by hand: the real-world corpus
# (test/support/real_world_schemas.json: Pydantic v2, zod 3/4, the official MCP servers,
# OpenAPI-derived) and the edge cases of test/support/corpus/edge_schemas.json, × every format
# × strict. Per format it prints:
#   * calls the provider form admits that the runner refuses, and how many of those no warning
#     announced (target 0: `runner refused silent`);
#   * calls the original admits that the provider form refuses, and how many no warning
#     announced (target 0: `form refuses silent`).
# Run: MIX_ENV=bench mix run bench/fidelity.exs [calls per form, default 20]
alias CMDC.Tool.{Fidelity, JSON, Providers}

n = String.to_integer(List.first(System.argv()) || "20")
support = Path.expand("../test/support", __DIR__)

entries =
  JSON.decode!(File.read!(Path.join(support, "real_world_schemas.json"))) ++
    JSON.decode!(File.read!(Path.join(support, "corpus/edge_schemas.json")))

modes = for f <- Providers.formats(), s <- [false, true], do: {f, s}

case Fidelity.python() do
  {:skip, reason} ->
    IO.puts("skipped: hypothesis-jsonschema could not be installed: #{reason}")

  {:ok, python} ->
    {us, %{rows: rows, silent: silent}} =
      :timer.tc(fn -> Fidelity.check(python, entries, modes, n) end)

    IO.puts(
      "fidelity: #{length(entries)} schemas x #{length(modes)} modes, up to #{n} generated " <>
        "calls per form (#{div(us, 1_000_000)} s)\n"
    )

    IO.puts(
      String.pad_trailing("format strict", 28) <>
        "form calls  runner refused (silent)  original calls  form refuses (silent)  gen errors"
    )

    for {f, s, c} <- rows do
      IO.puts(
        String.pad_trailing("#{f} #{s}", 28) <>
          String.pad_leading("#{c.sent_calls}", 10) <>
          String.pad_leading("#{c.runner_refused} (#{c.runner_refused_silent})", 25) <>
          String.pad_leading("#{c.original_calls}", 16) <>
          String.pad_leading("#{c.form_refuses} (#{c.form_refuses_silent})", 23) <>
          String.pad_leading("#{c.generation_errors}", 12)
      )
    end

    IO.puts("\ntarget: 0 silent in both directions for every format")

    silent
    |> Enum.group_by(fn {kind, id, _} -> {kind, id} end)
    |> Enum.each(fn {{kind, id}, list} ->
      {call, reason} = elem(hd(list), 2)

      IO.puts(
        "  #{kind} #{id}: #{length(list)} call(s), e.g. #{JSON.encode!(call) |> String.slice(0, 120)}" <>
          " -> #{String.slice(to_string(reason), 0, 160)}"
      )
    end)
end
