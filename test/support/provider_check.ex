defmodule CMDC.Tool.ProviderCheck do
  @moduledoc false
  # The providers' own Python packages (openai, anthropic, google-genai, mcp, jsonschema,
  # pydantic) in a venv of the test cache (`CMDC.Tool.TestCache`), and what a model sends
  # under a strict schema. Shared by the provider tests.

  alias CMDC.Tool.{JSON, Schema}

  @checker Path.expand("provider_check.py", __DIR__)
  # The versions checked (see ../shared/NOTES.md).
  @packages ~w(openai==3.54.0 anthropic==2.12.0 google-genai==3.4.0 mcp==2.3.0 jsonschema==4.26.0)

  @doc "The venv's python, made once: `{:ok, path}` or `{:skip, reason}` (registry unreachable)."
  def python,
    do:
      CMDC.Tool.TestCache.venv(
        "provider_check_venv",
        @packages,
        "import openai, anthropic, google.genai, mcp, jsonschema, pydantic"
      )

  @doc """
  Runs provider_check.py over `cases` (see its docstring): the decoded report
  `%{"checked" => counts, "failures" => [...]}`.
  """
  def run(python, cases) do
    input =
      Path.join(
        System.tmp_dir!(),
        "cmdc_provider_check_#{System.unique_integer([:positive])}.json"
      )

    File.write!(input, JSON.encode!(cases))
    {out, status} = System.cmd(python, [@checker, input], stderr_to_stdout: false)
    File.rm(input)
    if status != 0, do: raise("provider_check.py failed (#{status}): #{out}")
    JSON.decode!(out)
  end

  @doc """
  What the model sends under a strict schema for the call `args`: every property the schema
  lists and `args` leaves out, as null, at every depth.
  """
  def fill_nulls(%{"$ref" => ref}, v, root), do: fill_nulls(resolve(root, ref), v, root)

  def fill_nulls(%{"anyOf" => branches}, v, root) do
    Enum.find_value(branches, v, fn b ->
      filled = fill_nulls(b, v, root)
      if valid?(b, filled, root), do: filled
    end)
  end

  def fill_nulls(%{"properties" => props}, v, root) when is_map(v) do
    Map.new(props, fn {k, sub} ->
      {k, if(Map.has_key?(v, k), do: fill_nulls(sub, v[k], root), else: nil)}
    end)
    |> Map.merge(Map.drop(v, Map.keys(props)))
  end

  def fill_nulls(%{"items" => items}, v, root) when is_list(v) and is_map(items),
    do: Enum.map(v, &fill_nulls(items, &1, root))

  def fill_nulls(_, v, _), do: v

  defp resolve(root, "#" <> pointer) do
    pointer
    |> String.split("/", trim: true)
    |> Enum.reduce(
      root,
      &Map.fetch!(&2, String.replace(String.replace(&1, "~1", "/"), "~0", "~"))
    )
  end

  defp valid?(schema, value, root) do
    defs = Map.take(root, ["$defs", "definitions"])
    # Strict outputs are read as 2020-12 by the providers.
    case Schema.compile(Map.merge(defs, schema), draft: "2020-12") do
      {:ok, compiled} -> match?({:ok, _}, Schema.validate(compiled, value))
      {:error, _} -> false
    end
  end
end
