defmodule CMDC.Tool.DeferredCheck do
  @moduledoc false
  # Runs deferred_check.py (the providers' SDK types) over `[{kind, value}]` cases with the
  # provider-check venv's python: the decoded report, or `{:skip, reason}` when the venv is
  # absent (provider_packages_test.exs creates it).

  alias CMDC.Tool.JSON

  @checker Path.expand("deferred_check.py", __DIR__)

  def python do
    python = CMDC.Tool.TestCache.dir("provider_check_venv") |> Path.join("bin/python")
    if File.exists?(python), do: {:ok, python}, else: {:skip, "#{python} is absent"}
  end

  def run(python, cases) do
    cases =
      cases
      |> Enum.with_index()
      |> Enum.map(fn {{kind, v}, i} -> %{id: "#{i} #{kind}", kind: kind, value: v} end)

    path =
      Path.join(System.tmp_dir!(), "deferred_check_#{System.unique_integer([:positive])}.json")

    File.write!(path, JSON.encode!(cases))
    {out, 0} = System.cmd(python, [@checker, path])
    File.rm(path)
    JSON.decode!(out)
  end
end
