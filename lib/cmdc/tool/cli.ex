defmodule CMDC.Tool.CLI do
  @moduledoc false
  # What `mix cmdc.tools` and `mix cmdc.mcp` do. Each command returns :ok or {:error, status}.

  alias CMDC.Tool.{Providers, Runner}

  @builtins [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile, CMDC.Tool.Examples.Countdown]

  @doc "The tools the commands show and serve, with the load report."
  def load(paths \\ [], opts \\ []), do: paths |> watch(opts) |> elem(0)

  @doc "Just the tool modules (what `mix cmdc.mcp` serves)."
  def tools(paths \\ [], opts \\ []), do: load(paths, opts).tools

  @doc """
  Loads as `load/2` and returns `{report, state}`; `reload/1` takes the state and rescans the
  tool files (`cmdc-mcp --watch`).
  """
  def watch(paths \\ [], opts \\ []) do
    with_progress("discovering tools", fn ->
      {:changed, files} = CMDC.Tool.Discovery.rediscover(discovery_opts(paths, opts))
      state = %{files: files, mcp: mcp_servers(files.report, opts)}
      {report(state), state}
    end)
  end

  @doc """
  Rescans the tool files of a `watch/2` state: `:unchanged` (stat calls only: no file read,
  no compiler started), or `{:changed, report, state}` (only new and changed files compiled or
  read again). The MCP servers of the first load stay. Modules of the previous report that
  the new one dropped stay loaded until `forget_stale/1`.
  """
  def reload(state) do
    case CMDC.Tool.Discovery.rediscover(state.files) do
      {:unchanged, _} ->
        :unchanged

      {:changed, files} ->
        state = %{state | files: files}
        {:changed, report(state), state}
    end
  end

  @doc "Deletes the modules the last `reload/1` dropped (call it once nothing uses them)."
  def forget_stale(state), do: %{state | files: CMDC.Tool.Discovery.delete_stale(state.files)}

  # Built-in examples, then what discovery finds: examples/tools/ of this project, the paths
  # given, the project's and the user's tool folders and plugins (scripts included).
  defp discovery_opts(paths, opts) do
    [
      paths: example_paths() ++ paths,
      cwd: File.cwd!(),
      reserved: @builtins,
      trust_project: opts[:trust],
      script_loader: &load_script/1
    ]
  end

  defp report(%{files: %{report: report}, mcp: mcp}) do
    builtin = Enum.map(@builtins, &%{module: &1, kind: :elixir, source: "built-in"})

    found =
      Enum.map(report.tools, fn t ->
        %{module: t.module, kind: kind(t), source: "#{t.provider}: #{relative(t.path)}"}
      end)

    found =
      found ++ Enum.map(mcp.tools, &%{module: &1.module, kind: :mcp, source: mcp_source(&1)})

    report = %{report | tools: report.tools ++ mcp.tools}

    report = %{
      report
      | errors: report.errors ++ mcp.errors,
        ignored: report.ignored ++ mcp.ignored
    }

    {conflicts, errors} = Enum.split_with(report.errors, &(&1.type == :conflict))
    {untrusted, ignored} = Enum.split_with(report.ignored, &(&1.type == :untrusted))

    %{
      tools: @builtins ++ Enum.map(report.tools, & &1.module),
      entries: builtin ++ found,
      errors: Enum.map(errors, &%{path: relative(&1.path), reason: own_reason(&1)}),
      conflicts: Enum.map(conflicts, &%{refused: relative(&1.path), reason: &1.reason}),
      untrusted: Enum.map(untrusted, &%{path: relative(&1.path), reason: &1.reason}),
      ignored: Enum.map(ignored, &%{path: relative(&1.path), reason: &1.reason})
    }
  end

  # The servers of .mcp.json and the user's MCP configs (`CMDC.Tool.MCP.Servers`); `--no-mcp`
  # skips them. Their tools come after the files' (first wins).
  defp mcp_servers(report, opts) do
    if opts[:mcp] == false do
      %{tools: [], errors: [], ignored: []}
    else
      CMDC.Tool.MCP.Servers.load(
        cwd: opts[:cwd] || File.cwd!(),
        trust_project: opts[:trust],
        reserved: @builtins ++ Enum.map(report.tools, & &1.name)
      )
    end
  end

  # MCP config errors name their file first; the listing prints the path itself.
  defp own_reason(e), do: String.replace_prefix(e.reason, to_string(e.path) <> ": ", "")

  defp mcp_source(tool), do: "mcp server #{tool.server}: #{relative(tool.path)}"

  @examples Path.expand("../../../examples/tools", __DIR__)
  defp example_paths, do: if(File.dir?(@examples), do: [@examples], else: [])

  defp load_script(path) do
    case CMDC.Tool.Script.load(path) do
      {:ok, %{tools: modules}} -> {:ok, modules}
      {:error, reason} -> {:error, reason}
    end
  end

  defp kind(%{kind: :script, path: path}),
    do: if(String.ends_with?(path, ".ps1"), do: :powershell, else: :python)

  defp kind(_), do: :elixir

  defp relative(nil), do: "?"
  defp relative(path), do: Path.relative_to(to_string(path), File.cwd!())

  ## list

  def list(paths, opts) do
    report = load(paths, opts)

    rows =
      for e <- report.entries do
        [e.module.name(), to_string(e.kind), e.source, one_line(CMDC.Tool.description(e.module))]
      end

    IO.puts(table(["NAME", "KIND", "SOURCE", "DESCRIPTION"], rows))
    print_problems(report)
    :ok
  end

  defp print_problems(report) do
    section("load errors", report.errors, fn e -> "#{e.path}: #{e.reason}" end)
    section("refused (name conflicts)", report.conflicts, fn c -> "#{c.refused}: #{c.reason}" end)
    section("untrusted folders (skipped)", report.untrusted, fn u -> "#{u.path}: #{u.reason}" end)
    section("ignored files", report.ignored, fn i -> "#{i.path}: #{i.reason}" end)
  end

  defp section(_title, [], _fun), do: :ok

  defp section(title, items, fun) do
    IO.puts("\n#{bold(title)} (#{length(items)}):")
    Enum.each(items, &IO.puts("  - " <> fun.(&1)))
  end

  ## schema

  def schema(paths, opts) do
    format = parse_format(Keyword.get(opts, :format, "openai"))
    tools = tools(paths, opts)

    {list, warnings} =
      Providers.convert(tools, %{}, format: format, strict: opts[:strict] || false)

    IO.puts(CMDC.Tool.JSON.encode!(list, pretty: true))
    if warnings != [], do: IO.puts(:stderr, Providers.format_warnings(warnings))
    :ok
  end

  defp parse_format(name) do
    format = Enum.find(Providers.formats(), &(Atom.to_string(&1) == name))

    format ||
      Mix.raise(
        "unknown format #{inspect(name)}; use one of: #{Enum.join(Providers.formats(), ", ")}"
      )
  end

  ## validate

  def validate(name, json, paths, opts) do
    tools = tools(paths, opts)

    case CMDC.Tool.find(tools, name) do
      {:ok, module} ->
        case CMDC.Tool.validate_json(module, json) do
          {:ok, args} ->
            IO.puts("valid: " <> CMDC.Tool.JSON.encode!(args))
            :ok

          {:error, errors} ->
            IO.puts(CMDC.Tool.format_errors(errors, module))
            {:error, 1}
        end

      {:error, :not_found} ->
        IO.puts(:stderr, unknown(tools, name))
        {:error, 2}
    end
  end

  ## call

  def call(name, json, paths, opts) do
    tools = tools(paths, opts)
    ctx = CMDC.Context.new(session_id: "cli", working_dir: File.cwd!())
    on_update = fn payload -> IO.puts(dim("… " <> update_text(payload))) end
    approver = approver(tools, opts[:yes] == true, terminal?())
    hooks = [hooks: cli_hooks(opts)]

    run_opts =
      [on_update: on_update, approver: approver] ++ hooks ++ Keyword.take(opts, [:timeout])

    Runner.session_event(tools, :start, ctx, hooks)
    started = System.monotonic_time(:microsecond)
    result = Runner.run(tools, %{id: "cli-1", name: name, arguments: json}, ctx, run_opts)
    ms = (System.monotonic_time(:microsecond) - started) / 1000
    Runner.session_event(tools, :shutdown, ctx, hooks)
    Enum.each(result.notes, &IO.puts(:stderr, dim("hook: " <> &1)))

    text =
      cond do
        result.effect != nil -> "effect: " <> inspect(result.effect, pretty: true)
        true -> result.content
      end

    IO.puts(text)
    status = if result.is_error, do: red("error"), else: green("ok")
    IO.puts(:stderr, "#{status} in #{:erlang.float_to_binary(ms, decimals: 1)} ms")
    if result.is_error, do: {:error, 1}, else: :ok
  end

  # The command hooks of the settings files (`CMDC.Tool.Hooks.Config`); problems go to stderr.
  defp cli_hooks(opts) do
    config = CMDC.Tool.Hooks.load(hooks_opts(opts))

    for e <- config.errors,
        do:
          IO.puts(
            :stderr,
            "hooks: #{relative(e.path)}#{if e.hook, do: " " <> e.hook}: #{e.reason}"
          )

    CMDC.Tool.Hooks.Config.active(config)
  end

  ## hooks

  def hooks(opts) do
    config = CMDC.Tool.Hooks.load(hooks_opts(opts))
    IO.puts(CMDC.Tool.Hooks.Listing.render(config, opts[:cwd] || File.cwd!()))
    :ok
  end

  # `:cwd` and `:home` let tests point at a project and a home of their own.
  defp hooks_opts(opts) do
    [cwd: opts[:cwd] || File.cwd!(), trust_project: opts[:trust]] ++ Keyword.take(opts, [:home])
  end

  # Approval from the person at the terminal: the tool, its meta/1 summary and the arguments
  # before a call (and the result, where result approval applies); --yes approves everything
  # (scripted use); off a terminal without --yes nothing marked for approval runs or shows.
  @doc false
  def approver(_tools, true, _terminal?), do: fn _request -> :allow end

  def approver(tools, false, true), do: &ask_terminal(tools, &1)

  def approver(_tools, false, false) do
    fn request ->
      {:deny,
       "#{if Map.has_key?(request, :result), do: "its result", else: "it"} needs approval and " <>
         "this is not an interactive terminal; pass --yes to approve (e.g. in scripts)"}
    end
  end

  defp ask_terminal(tools, request) do
    summary =
      case CMDC.Tool.find(tools, request.tool) do
        {:ok, module} -> CMDC.Tool.meta(module, request.args)
        _ -> request.tool
      end

    lines =
      [
        "",
        bold("approval needed") <> " for " <> bold(request.tool) <> ": " <> summary,
        "  arguments: " <> CMDC.Tool.JSON.encode!(request.args)
      ] ++
        if(request[:reason], do: ["  asked by " <> request.reason], else: []) ++
        case request do
          %{result: result} ->
            ["  result#{if result.is_error, do: " (error)"}: " <> preview(result)]

          _ ->
            []
        end

    IO.puts(Enum.join(lines, "\n"))

    question =
      if Map.has_key?(request, :result), do: "Show this result to the model?", else: "Run it?"

    case IO.gets(question <> " [y/N] ") do
      answer when is_binary(answer) ->
        if String.downcase(String.trim(answer)) in ["y", "yes"],
          do: :allow,
          else: {:deny, "declined at the terminal"}

      _ ->
        {:deny, "no answer at the terminal"}
    end
  end

  defp preview(%{content: content}) when is_binary(content) do
    if String.length(content) > 2_000, do: String.slice(content, 0, 2_000) <> " …", else: content
  end

  defp preview(result), do: inspect(result.effect || result.content)

  # Both stdin and stdout are a terminal (the BEAM's own descriptors).
  defp terminal? do
    Enum.all?([0, 1], fn fd ->
      case File.read_link("/proc/self/fd/#{fd}") do
        {:ok, "/dev/pts/" <> _} -> true
        {:ok, "/dev/tty" <> _} -> true
        _ -> false
      end
    end)
  end

  defp update_text(text) when is_binary(text), do: text
  defp update_text(details), do: inspect(details)

  ## doctor

  def doctor(paths, opts) do
    # Script caches are judged before loading: loading rebuilds stale ones.
    caches = script_caches(paths, opts)
    report = load(paths, opts)

    findings =
      names(report.tools) ++
        strict(report.tools) ++ gemini(report.tools) ++ caches ++ interpreters()

    print_problems(report)

    if findings == [] and report.errors == [] and report.conflicts == [] do
      IO.puts(green("no problems found") <> " (#{length(report.tools)} tools)")
    else
      IO.puts("\n#{bold("findings")} (#{length(findings)}):")
      Enum.each(findings, &IO.puts("  - " <> &1))
    end

    :ok
  end

  defp names(tools) do
    for m <- tools, name = m.name(), problem = name_problem(name), do: "#{name}: #{problem}"
  end

  # The one name rule (native/cmdc_tool_core/src/names.rs), and the names providers are given.
  defp name_problem(name) do
    with {:ok, _} <- CMDC.Tool.RoundTrip.check_name(name) do
      mapped =
        for format <- [:openai, :gemini],
            given = CMDC.Tool.RoundTrip.name_for(name, format),
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

  defp script_caches(paths, opts) do
    scan =
      CMDC.Tool.Discovery.discover(
        paths: example_paths() ++ paths,
        cwd: File.cwd!(),
        trust_project: opts[:trust]
      )

    for %{type: :script, path: script} <- scan.ignored,
        problem = cache_problem(to_string(script)),
        do: "#{relative(script)}: #{problem}"
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

  ## helpers

  defp unknown(tools, name) do
    case CMDC.Tool.suggest(tools, name) do
      [] -> "unknown tool: #{name}"
      close -> "unknown tool: #{name} (did you mean: #{Enum.join(close, ", ")}?)"
    end
  end

  defp one_line(text) do
    line = text |> String.split("\n", parts: 2) |> hd()
    if String.length(line) > 70, do: String.slice(line, 0, 67) <> "...", else: line
  end

  defp table(header, rows) do
    widths =
      Enum.reduce([header | rows], List.duplicate(0, length(header)), fn row, acc ->
        Enum.zip_with(row, acc, &max(String.length(&1), &2))
      end)

    format = fn row ->
      row
      |> Enum.zip(widths)
      |> Enum.map_join("  ", fn {cell, w} -> String.pad_trailing(cell, w) end)
      |> String.trim_trailing()
    end

    Enum.map_join([bold(format.(header)) | Enum.map(rows, format)], "\n", & &1)
  end

  # Progress on stderr for anything slower than a second; plain text when not on a terminal.
  defp with_progress(label, fun) do
    parent = self()

    ticker =
      spawn(fn ->
        receive do
          {:done, from} -> send(from, :progress_done)
        after
          1_000 ->
            IO.write(:stderr, "#{label}…")
            tick(parent)
        end
      end)

    try do
      fun.()
    after
      send(ticker, {:done, self()})

      receive do
        :progress_done -> :ok
      after
        1_000 -> :ok
      end
    end
  end

  defp tick(parent) do
    receive do
      {:done, from} ->
        IO.write(:stderr, " done\n")
        send(from, :progress_done)
    after
      1_000 ->
        if Process.alive?(parent), do: IO.write(:stderr, ".") && tick(parent), else: :ok
    end
  end

  defp ansi?, do: IO.ANSI.enabled?()
  defp bold(text), do: if(ansi?(), do: IO.ANSI.bright() <> text <> IO.ANSI.reset(), else: text)
  defp dim(text), do: if(ansi?(), do: IO.ANSI.faint() <> text <> IO.ANSI.reset(), else: text)
  defp red(text), do: if(ansi?(), do: IO.ANSI.red() <> text <> IO.ANSI.reset(), else: text)
  defp green(text), do: if(ansi?(), do: IO.ANSI.green() <> text <> IO.ANSI.reset(), else: text)
end
