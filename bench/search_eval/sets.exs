# Evaluation sets for tool search (read by bench/search.exs): the project's own set
# (tools.json + queries.tsv, here) and sets built from other people's material, fetched into
# the test cache (CMDC.Tool.TestCache) on first use, never into the repository:
#
#   * BFCL: the Berkeley Function Calling Leaderboard's questions with their candidate
#     functions and the function each answer calls (PyPI `bfcl-eval`, Apache-2.0). Every
#     function of the set's questions forms one catalog; a question's relevant tools are the
#     functions its ground truth calls. Two sets:
#       - "BFCL (simple, multiple)": BFCL_v4_simple_python + BFCL_v4_multiple (questions
#         written by the BFCL authors);
#       - "BFCL live (held out)": BFCL_v4_live_simple + BFCL_v4_live_multiple (questions and
#         functions contributed by users of the leaderboard's live service). Held out from all
#         tuning: nothing in the ranking (field weights, RRF constant, depth, passage form) was
#         chosen by looking at its figures.
#
# A set is `%{label, held_out, tools: [{name, description, parameters}], queries: [{text,
# [relevant names]}]}`.
defmodule SearchBench.Sets do
  alias CMDC.Tool.{JSON, TestCache}

  @bfcl "bfcl-eval==2026.3.23"
  @own Path.expand(".", __DIR__)

  def own do
    real =
      for t <- JSON.decode!(File.read!(Path.join(@own, "tools.json"))),
          do: {"#{t["server"]}__#{t["name"]}", t["description"], t["parameters"]}

    examples =
      for m <- [
            CMDC.Tool.Examples.Echo,
            CMDC.Tool.Examples.ReadFile,
            CMDC.Tool.Examples.Countdown
          ],
          do: {"examples__" <> m.name(), m.description(), m.parameters()}

    queries =
      for line <- File.read!(Path.join(@own, "queries.tsv")) |> String.split("\n", trim: true),
          not String.starts_with?(line, "#") do
        [query, relevant] = String.split(line, "\t")
        {query, String.split(relevant, ",", trim: true)}
      end

    %{label: "own (MCP servers)", held_out: false, tools: real ++ examples, queries: queries}
  end

  @doc "The BFCL sets, or `{:skip, reason}` when the package cannot be had."
  def bfcl do
    with {:ok, dir} <- fetch() do
      [
        set(dir, "BFCL (simple, multiple)", false, ~w(simple_python multiple)),
        set(dir, "BFCL live (held out)", true, ~w(live_simple live_multiple))
      ]
    end
  end

  defp set(dir, label, held_out, parts) do
    {tools, queries} =
      Enum.reduce(parts, {%{}, []}, fn part, {tools, queries} ->
        answers =
          for line <- lines(Path.join([dir, "possible_answer", "BFCL_v4_#{part}.json"])),
              into: %{},
              do: {line["id"], Enum.flat_map(line["ground_truth"], &Map.keys/1)}

        Enum.reduce(lines(Path.join(dir, "BFCL_v4_#{part}.json")), {tools, queries}, fn q,
                                                                                        {tools,
                                                                                         queries} ->
          tools =
            Enum.reduce(q["function"], tools, fn f, acc ->
              Map.put_new(
                acc,
                f["name"],
                {f["name"], f["description"] || "", f["parameters"] || %{}}
              )
            end)

          case {request(q["question"]), Map.get(answers, q["id"], [])} do
            {text, [_ | _] = relevant} when is_binary(text) and text != "" ->
              {tools, [{text, Enum.uniq(relevant)} | queries]}

            _ ->
              {tools, queries}
          end
        end)
      end)

    names = Map.keys(tools) |> MapSet.new()
    queries = for {q, rel} <- Enum.reverse(queries), Enum.all?(rel, &(&1 in names)), do: {q, rel}
    %{label: label, held_out: held_out, tools: Map.values(tools) |> Enum.sort(), queries: queries}
  end

  # The first turn's user message (BFCL questions are turns of messages).
  defp request([turn | _]) when is_list(turn) do
    turn |> Enum.filter(&(&1["role"] == "user")) |> List.last() |> then(&(&1 && &1["content"]))
  end

  defp request(_), do: nil

  defp lines(path) do
    path |> File.read!() |> String.split("\n", trim: true) |> Enum.map(&JSON.decode!/1)
  end

  defp fetch do
    dir = TestCache.dir("bfcl-eval-2026.3.23")
    data = Path.join(dir, "bfcl_eval/data")

    if File.exists?(Path.join(data, "BFCL_v4_live_multiple.json")) do
      {:ok, data}
    else
      TestCache.with_lock("bfcl-eval-2026.3.23", fn -> download(dir, data) end)
    end
  end

  defp download(dir, data) do
    tmp = dir <> ".download"
    File.rm_rf!(tmp)
    File.mkdir_p!(tmp)
    args = ["-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", tmp, @bfcl]

    with py when is_binary(py) <- System.find_executable("python3"),
         {_, 0} <- System.cmd(py, args, stderr_to_stdout: true),
         [wheel] <- Path.wildcard(Path.join(tmp, "*.whl")),
         {:ok, _} <- :zip.unzip(to_charlist(wheel), cwd: to_charlist(dir)) do
      File.rm_rf!(tmp)
      {:ok, data}
    else
      nil ->
        {:skip, "python3 not found (pip downloads #{@bfcl})"}

      {out, status} ->
        {:skip, "pip download #{@bfcl} failed (#{status}): #{String.slice(out, -300, 300)}"}

      other ->
        {:skip, "the #{@bfcl} wheel was not as expected: #{inspect(other, limit: 3)}"}
    end
  end
end
