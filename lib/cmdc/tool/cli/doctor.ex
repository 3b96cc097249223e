defmodule CMDC.Tool.CLI.Doctor do
  @moduledoc false
  # `mix cmdc.tools doctor`: what would surprise a user of the project's tools (names providers
  # rewrite or refuse, schemas strict mode or Gemini change, script caches, interpreters), after
  # the load report. The status is the listing's: 4 when something failed to load.

  alias CMDC.Tool.CLI
  alias CMDC.Tool.CLI.Output
  alias CMDC.Tool.{Providers, RoundTrip}

  @doc "The findings for `report` (`CMDC.Tool.CLI.load/2`) and the script cache problems."
  def findings(report, caches) do
    names(report.tools) ++
      strict(report.tools) ++ gemini(report.tools) ++ caches ++ interpreters()
  end

  @doc "Runs the doctor over the project of `opts[:cwd]` (default the current folder)."
  def run(paths, opts) do
    # Script caches are judged before loading: loading rebuilds stale ones.
    caches = script_caches(paths, opts)
    report = CLI.load(paths, opts)
    findings = findings(report, caches)
    CMDC.Tool.CLI.Commands.print_problems(report)

    if findings == [] and report.errors == [] and report.conflicts == [] do
      IO.puts(Output.green("no problems found") <> " (#{length(report.tools)} tools)")
    else
      IO.puts("\n#{Output.bold("findings")} (#{length(findings)}):")
      Enum.each(findings, &IO.puts("  - " <> &1))
    end

    report
  end

  defp names(tools) do
    for m <- tools, name = m.name(), problem = name_problem(name), do: "#{name}: #{problem}"
  end

  # The one name rule, and the names providers are given.
  defp name_problem(name) do
    with {:ok, _} <- RoundTrip.check_name(name) do
      mapped =
        for format <- [:openai, :gemini],
            {:ok, given} = RoundTrip.provider_name(name, format),
            given != name,
            do: "given to #{format} as #{given} (the runner maps calls back)"

      cond do
        mapped != [] ->
          Enum.join(mapped, "; ")

        byte_size(name) > 50 ->
          "name is long: MCP clients prefix names (mcp__server__), and 64 characters is the limit"

        true ->
          nil
      end
    else
      {:error, message} -> message
    end
  end

  defp strict(tools) do
    {_, warnings} = Providers.convert(tools, %{}, format: :openai, strict: true)
    Enum.map(warnings, &"#{&1.tool}: OpenAI strict mode: #{&1.message}")
  end

  defp gemini(tools) do
    {_, warnings} = Providers.convert(tools, %{}, format: :gemini)
    Enum.map(warnings, &"#{&1.tool}: Gemini: #{&1.message}")
  end

  # Without a script loader, discovery lists scripts in :ignored: a scan that loads nothing.
  defp script_caches(paths, opts) do
    examples = if opts[:examples], do: CMDC.Tool.Project.example_paths(), else: []

    scan =
      CMDC.Tool.Discovery.discover(
        paths: examples ++ paths,
        cwd: opts[:cwd] || File.cwd!(),
        trust_project: opts[:trust],
        script_loader: false
      )

    for %{type: :script, path: script} <- scan.ignored,
        problem = cache_problem(to_string(script)),
        do: "#{CLI.relative(script)}: #{problem}"
  end

  # The loader's cache is `{name}.tool.json` next to the script.
  defp cache_problem(script) do
    cache = Path.rootname(script) <> ".tool.json"

    with {:ok, %{mtime: cached}} <- File.stat(cache, time: :posix),
         {:ok, %{mtime: changed}} <- File.stat(script, time: :posix),
         {:ok, text} <- File.read(cache) do
      cond do
        not match?({:ok, %{"tools" => _}}, CMDC.Tool.JSON.decode(text)) ->
          "its cache #{Path.basename(cache)} is corrupt (it will be rebuilt)"

        changed > cached ->
          "its cache #{Path.basename(cache)} is stale (the script changed; it will be re-read)"

        true ->
          nil
      end
    else
      _ -> "not cached yet: the first start reads it with the interpreter"
    end
  end

  defp interpreters do
    [
      if(System.find_executable("python3") == nil,
        do: "python3 not found: Python script tools cannot run"
      ),
      if(System.find_executable("pwsh") == nil,
        do: "pwsh not found: PowerShell script tools are described but cannot run"
      )
    ]
    |> Enum.reject(&is_nil/1)
  end
end
