defmodule CMDC.Tool.CLI.Doctor do
  @moduledoc false
  # `mix cmdc.tools doctor`: what would surprise a user of the project's tools (names providers
  # rewrite or refuse, schemas strict mode or Gemini change, script caches, interpreters, the
  # settings files' hook problems: a matcher that cannot be run fails its hook on every call),
  # after the load report. The status is the listing's: 4 when something failed to load.

  alias CMDC.Tool.CLI
  alias CMDC.Tool.CLI.Output
  alias CMDC.Tool.{Providers, RoundTrip}
  alias CMDC.Tool.Providers.Warnings

  @doc """
  The findings for `report` (`CMDC.Tool.CLI.load/2`) and the script cache problems, first the
  app's tool modules nothing serves (`CMDC.Tool.CLI.unserved/3`).
  """
  def findings(report, caches, opts \\ []) do
    List.wrap(CLI.unserved(report, nil, opts)) ++
      List.wrap(CMDC.Tool.Project.compile_time_config(opts[:cwd] || File.cwd!())) ++
      names(report.tools) ++
      strict(report.tools) ++ gemini(report.tools) ++ caches ++ interpreters() ++ hooks(opts)
  end

  # The problems `mix cmdc.tools hooks` lists, for the same project and home.
  defp hooks(opts) do
    cwd = opts[:cwd] || File.cwd!()

    config =
      CMDC.Tool.Hooks.load([cwd: cwd, trust_project: opts[:trust]] ++ Keyword.take(opts, [:home]))

    for e <- config.errors do
      where = if e.hook, do: " " <> e.hook, else: ""
      "hooks: #{Path.relative_to(e.path, cwd)}#{where}: #{e.reason}"
    end
  end

  @doc "Runs the doctor over the project of `opts[:cwd]` (default the current folder)."
  def run(paths, opts) do
    # Script caches are judged before loading: loading rebuilds stale ones.
    caches = script_caches(paths, opts)
    report = CLI.load(paths, opts)
    findings = findings(report, caches, opts)
    Output.problems(report)

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

    warnings
    |> Warnings.notable(tools)
    |> Enum.map(&"#{&1.tool}: OpenAI strict mode: #{&1.message}")
  end

  defp gemini(tools) do
    {_, warnings} = Providers.convert(tools, %{}, format: :gemini)
    warnings |> Warnings.notable(tools) |> Enum.map(&"#{&1.tool}: Gemini: #{&1.message}")
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

    scripts = for %{type: :script, path: script} <- scan.ignored, do: to_string(script)

    for {script, result} <- CMDC.Tool.Script.cache_status(scripts),
        problem = cache_problem(script, result),
        do: "#{CLI.relative(script)}: #{problem}"
  end

  # The loader's own verdict (`Script.cache_status/2`: content hash and the user's HMAC tag,
  # never file times), told as what the next start will do.
  defp cache_problem(script, {:ok, %{cache: state, detail: detail}}) do
    cache = Path.basename(Path.rootname(script) <> ".tool.json")

    case state do
      :fresh -> nil
      :off -> nil
      :missing -> "not cached yet: the first start reads it with the interpreter"
      :stale -> "its cache #{cache} is stale (the script changed; it will be re-read)"
      :corrupt -> "its cache #{cache} is corrupt (#{detail}; it will be rebuilt)"
      :untrusted -> "its cache #{cache} is not this user's (#{detail}; it will be rebuilt)"
    end
  end

  defp cache_problem(_script, {:error, message}), do: message

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
