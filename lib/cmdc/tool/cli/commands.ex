defmodule CMDC.Tool.CLI.Commands do
  @moduledoc false
  # The subcommands of `mix cmdc.tools`: one table (`@commands`) says each one's arguments,
  # switches, summary and function; `main/1` parses, prints help, suggests a misspelled command
  # and returns the exit status (see `Mix.Tasks.Cmdc.Tools` for the codes). A new subcommand is
  # one entry of the table and its function.

  alias CMDC.Tool.{CLI, Providers, Runner}
  alias CMDC.Tool.CLI.{Approver, Doctor, Output}
  alias CMDC.Tool.Discovery.Trust

  # Exit statuses, one convention for every subcommand (documented in Mix.Tasks.Cmdc.Tools).
  @ok 0
  @failed 1
  @usage 2
  @unknown_tool 3
  @load_failed 4

  @loading [trust: :boolean, mcp: :boolean, examples: :boolean]

  @commands [
    %{
      name: "list",
      args: "[PATH...]",
      switches: @loading,
      run: :list,
      summary: "the tools of this project, where each comes from, and what failed to load"
    },
    %{
      name: "schema",
      args: "[PATH...]",
      switches:
        [format: :string, strict: :boolean] ++
          @loading,
      run: :schema,
      # FORMATS: the formats the library has (`CMDC.Tool.Providers.formats/0`), filled in when
      # the help is printed, so the help and the unknown-format error list the same ones.
      summary:
        "the tools as a model request carries them (--format FORMATS, default openai; " <>
          "--strict); rewriting warnings on stderr"
    },
    %{
      name: "validate",
      args: "NAME JSON [PATH...]",
      switches: @loading,
      run: :validate,
      summary: "checks arguments against a tool's schema; prints what the model would be told"
    },
    %{
      name: "call",
      args: "NAME JSON [PATH...]",
      switches: [timeout: :integer, yes: :boolean, allow: :keep] ++ @loading,
      run: :call,
      summary:
        "runs a tool through CMDC.Tool.Runner (--timeout MS; --yes approves every ask; " <>
          "--allow NAME runs NAME without asking)"
    },
    %{
      name: "doctor",
      args: "[PATH...]",
      switches: @loading,
      run: :doctor,
      summary:
        "what would surprise a user: names, schemas providers rewrite, caches, interpreters"
    },
    %{
      name: "trust",
      args: "[PATH]",
      switches: [],
      run: :trust,
      summary: "trusts a project folder (default: this one): its .cmdc/tools and .mcp.json load"
    },
    %{
      name: "untrust",
      args: "[PATH]",
      switches: [],
      run: :untrust,
      summary: "removes a folder (default: this one) from the trust list"
    },
    %{
      name: "trusted",
      args: "",
      switches: [],
      run: :trusted,
      summary: "lists the trusted folders and the trust list files"
    },
    %{
      name: "hooks",
      args: "",
      switches: [trust: :boolean],
      run: :hooks,
      summary:
        "lists the command hooks of the settings files and enabled Claude Code plugins: " <>
          "event, matcher, command, time-out, file, and whether each is active " <>
          "(a project's only when trusted)"
    },
    %{
      name: "plugins",
      args: "",
      switches: [trust: :boolean],
      run: :plugins,
      summary:
        "lists the Claude Code plugins installed (~/.claude/plugins): enabled or not and by " <>
          "which settings file, where from, and the hooks, MCP servers and tools each brings"
    }
  ]

  @doc "The subcommand table."
  def commands, do: @commands

  @doc "Names of the subcommands that load tools (they need the application started)."
  def loads_tools?(name), do: name in ~w(list schema validate call doctor)

  @doc "The whole usage text."
  def usage do
    lines =
      for c <- @commands do
        "    mix cmdc.tools #{c.name}#{if c.args != "", do: " " <> c.args}#{flags(c)}"
      end

    Enum.join(lines, "\n")
  end

  @doc "One subcommand's usage."
  def usage(%{} = c) do
    summary = String.replace(c.summary, "FORMATS", Enum.join(Providers.formats(), "|"))

    """
    Usage: mix cmdc.tools #{c.name}#{if c.args != "", do: " " <> c.args}#{flags(c)} [-h]

    #{summary}.

    """ <> common_flags(c)
  end

  @common_flags [
    trust: "--trust      trust this project for this run (`mix cmdc.tools trust` records it)",
    mcp: "--no-mcp     skip the MCP servers of .mcp.json and the user's MCP configs",
    examples: "--examples   also serve the library's example tools"
  ]

  # The flags every loading command shares, those this one has, then -h.
  defp common_flags(c) do
    lines = for {name, text} <- @common_flags, Keyword.has_key?(c.switches, name), do: text
    Enum.map_join(lines ++ ["-h, --help   print this help"], "", &"  #{&1}\n")
  end

  defp flags(c) do
    Enum.map_join(c.switches, "", fn
      {:mcp, _} -> " [--no-mcp]"
      {name, :boolean} -> " [--#{dash(name)}]"
      {name, :keep} -> " [--#{dash(name)} NAME]..."
      {:timeout, _} -> " [--timeout MS]"
      {:format, _} -> " [--format FORMAT]"
      {name, _} -> " [--#{dash(name)} VALUE]"
    end)
  end

  defp dash(name), do: name |> to_string() |> String.replace("_", "-")

  @doc """
  Finds the subcommand of `argv` and parses its switches: `{:run, command, args, opts}`,
  `{:help, text}`, or `{:error, message}` (a usage error).
  """
  def parse([]), do: {:help, "Usage:\n" <> usage() <> "\n"}

  def parse([flag | _]) when flag in ["-h", "--help", "help"],
    do: {:help, "Usage:\n" <> usage() <> "\n"}

  def parse([name | rest]) do
    case Enum.find(@commands, &(&1.name == name)) do
      nil ->
        names = Enum.map(@commands, & &1.name)

        hint =
          case CMDC.Tool.Options.suggest(name, names) do
            [best | _] -> " Did you mean: #{best}?"
            [] -> ""
          end

        {:error,
         "unknown command #{inspect(name)}.#{hint} The commands: #{Enum.join(names, ", ")}"}

      command ->
        parse_switches(command, rest)
    end
  end

  defp parse_switches(command, argv) do
    switches = [help: :boolean] ++ command.switches

    case OptionParser.parse(argv, strict: switches, aliases: [h: :help]) do
      {opts, args, []} ->
        if opts[:help], do: {:help, usage(command)}, else: check_args(command, args, opts)

      {_, _, [{switch, nil} | _]} ->
        message = CMDC.Tool.Options.switch_error(switch, switches)
        {:error, "#{command.name}: #{message}\n\n" <> usage(command)}

      {_, _, [{switch, value} | _]} ->
        {:error, "#{command.name}: invalid value for #{switch}: #{value}\n\n" <> usage(command)}
    end
  end

  defp check_args(%{name: name} = command, args, opts) when name in ["validate", "call"] do
    case args do
      [_, _ | _] -> {:run, command, args, opts}
      _ -> {:error, "#{name} needs a tool name and JSON arguments\n\n" <> usage(command)}
    end
  end

  defp check_args(%{name: name} = command, args, opts) when name in ["trust", "untrust"] do
    if length(args) <= 1,
      do: {:run, command, args, opts},
      else: {:error, "#{name} takes one folder\n\n" <> usage(command)}
  end

  defp check_args(command, args, opts), do: {:run, command, args, opts}

  @doc "Runs a parsed subcommand; returns the exit status."
  def run(command, args, opts), do: apply(__MODULE__, command.run, [args, opts])

  ## list

  @doc false
  def list(paths, opts) do
    report = CLI.load(paths, load_opts(opts))

    rows =
      for e <- report.entries do
        [
          e.module.name(),
          to_string(e.kind),
          e.source,
          Output.one_line(CMDC.Tool.description(e.module))
        ]
      end

    IO.puts(Output.table(["NAME", "KIND", "SOURCE", "DESCRIPTION"], rows))
    Output.problems(report)
    if hint = CLI.unserved(report, nil, load_opts(opts)), do: IO.puts("\n" <> hint)
    load_status(report)
  end

  defp load_status(%{errors: []}), do: @ok

  defp load_status(%{errors: errors}) do
    IO.puts(
      :stderr,
      "#{CLI.failed_summary(errors)} failed to load (exit status #{@load_failed})"
    )

    @load_failed
  end

  ## schema

  @doc false
  def schema(paths, opts) do
    with {:ok, format} <- parse_format(Keyword.get(opts, :format, "openai")) do
      tools = CLI.tools(paths, load_opts(opts))

      {list, warnings} =
        Providers.convert(tools, %{}, format: format, strict: opts[:strict] || false)

      IO.puts(CMDC.Tool.JSON.encode!(list, pretty: true))
      if warnings != [], do: IO.puts(:stderr, Providers.format_warnings(warnings))
      @ok
    end
  end

  defp parse_format(name) do
    case Enum.find(Providers.formats(), &(Atom.to_string(&1) == name)) do
      nil ->
        usage_error(
          "schema: unknown format #{inspect(name)}; use one of: " <>
            Enum.join(Providers.formats(), ", ")
        )

      format ->
        {:ok, format}
    end
  end

  ## validate

  @doc false
  def validate([name, json | paths], opts) do
    report = CLI.load(paths, load_opts(opts))

    with {:ok, module} <- find(report, name) do
      case CMDC.Tool.validate_json(module, json) do
        {:ok, args} ->
          IO.puts("valid: " <> CMDC.Tool.JSON.encode!(args))
          @ok

        {:error, errors} ->
          IO.puts(CMDC.Tool.format_errors(errors, module))
          @failed
      end
    end
  end

  ## call

  @doc false
  def call([name, json | paths], opts) do
    report = CLI.load(paths, load_opts(opts))

    with {:ok, _module} <- find(report, name) do
      run_call(report.tools, name, json, opts)
    end
  end

  defp run_call(tools, name, json, opts) do
    ctx = CMDC.Context.new(session_id: "cli", working_dir: File.cwd!())
    on_update = fn payload -> IO.puts(Output.dim("… " <> update_text(payload))) end
    approver = Approver.for(tools, opts[:yes] == true, Approver.terminal?())
    policies = Map.new(Keyword.get_values(opts, :allow), &{&1, :auto})

    hooks = [settings_hooks: cli_hooks(opts)]

    run_opts =
      [on_update: on_update, approver: approver, policies: policies] ++
        hooks ++ Keyword.take(opts, [:timeout])

    Runner.session_event(tools, :start, ctx, hooks)
    started = System.monotonic_time(:microsecond)
    call = %{id: "cli-1", name: name, arguments: json}
    result = without_hook_error_logs(fn -> Runner.run(tools, call, ctx, run_opts) end)
    ms = (System.monotonic_time(:microsecond) - started) / 1000
    Runner.session_event(tools, :shutdown, ctx, hooks)
    Enum.each(result.notes, &IO.puts(:stderr, Output.dim("hook: " <> &1)))

    IO.puts(
      if result.effect != nil,
        do: "effect: " <> inspect(result.effect, pretty: true),
        else: result.content
    )

    status = if result.is_error, do: Output.red("error"), else: Output.green("ok")
    IO.puts(:stderr, "#{status} in #{:erlang.float_to_binary(ms, decimals: 1)} ms")
    if result.is_error, do: @failed, else: @ok
  end

  # A failing command hook's message is in the result's notes, printed after the call: the log
  # (the same terminal) does not say it a second time.
  defp without_hook_error_logs(fun) do
    id = :cmdc_tool_cli_hook_notes
    drop = fn %{meta: meta}, _ -> if meta[:cmdc_hook_error], do: :stop, else: :ignore end
    :logger.add_primary_filter(id, {drop, nil})

    try do
      fun.()
    after
      :logger.remove_primary_filter(id)
    end
  end

  # The settings files' command hooks the runner applies (`CMDC.Tool.Hooks.Settings`): their
  # problems, and hooks inactive in an untrusted project, said once on stderr; `false` when the
  # app's config turned them off.
  defp cli_hooks(opts) do
    if CMDC.Tool.Hooks.Settings.enabled?() do
      settings = hooks_opts(opts)
      config = CMDC.Tool.Hooks.Settings.config(settings)

      for e <- config.errors,
          do:
            IO.puts(
              :stderr,
              "hooks: #{Path.relative_to_cwd(e.path)}#{hook_label(e)}: #{e.reason}"
            )

      if note = CMDC.Tool.Hooks.Settings.inactive_note(config),
        do: IO.puts(:stderr, "hooks: " <> note)

      settings
    else
      false
    end
  end

  defp hook_label(%{hook: nil}), do: ""
  defp hook_label(%{hook: hook}), do: " " <> hook

  ## hooks

  @doc false
  def hooks(_args, opts) do
    config = CMDC.Tool.Hooks.load(hooks_opts(opts))
    IO.puts(CMDC.Tool.Hooks.Listing.render(config, opts[:cwd] || File.cwd!()))
    @ok
  end

  ## plugins

  @doc false
  def plugins(_args, opts) do
    report = CMDC.Tool.Discovery.ClaudePlugins.load(hooks_opts(opts))
    IO.puts(CMDC.Tool.CLI.Plugins.render(report, opts[:home] || System.user_home()))

    if Enum.any?(report.plugins, &(&1.status in [:broken, :not_installed])) or
         report.problems != [],
       do: @failed,
       else: @ok
  end

  # `:cwd` and `:home` let tests point at a project and a home of their own.
  defp hooks_opts(opts) do
    [cwd: opts[:cwd] || File.cwd!(), trust_project: opts[:trust]] ++ Keyword.take(opts, [:home])
  end

  defp update_text(text) when is_binary(text), do: text
  defp update_text(details), do: inspect(details)

  ## doctor

  @doc false
  def doctor(paths, opts), do: paths |> Doctor.run(load_opts(opts)) |> load_status()

  ## trust

  @doc false
  def trust(args, _opts) do
    case Trust.trust(List.first(args)) do
      {:ok, file} ->
        IO.puts("trusted #{Path.expand(List.first(args) || ".")} (in #{file})")
        @ok

      {:error, message} ->
        IO.puts(:stderr, "trust: " <> message)
        @failed
    end
  end

  @doc false
  def untrust(args, _opts) do
    case Trust.untrust(List.first(args)) do
      {:ok, file} ->
        IO.puts("no longer trusted: #{Path.expand(List.first(args) || ".")} (in #{file})")
        @ok

      {:error, message} ->
        IO.puts(:stderr, "untrust: " <> message)
        @failed
    end
  end

  @doc false
  def trusted(_args, _opts) do
    case Trust.list() do
      [] ->
        IO.puts("no trusted folders (`mix cmdc.tools trust` adds the current one)")

      list ->
        IO.puts(Output.table(["FOLDER", "LIST"], Enum.map(list, &Tuple.to_list/1)))
    end

    @ok
  end

  ## helpers

  defp load_opts(opts), do: Keyword.take(opts, [:trust, :mcp, :examples, :cwd])

  # One convention for a tool that is not there, in every subcommand: stderr, status 3, the
  # names close to it, and the load failure that may explain it.
  defp find(report, name) do
    case CMDC.Tool.find(report.tools, name) do
      {:ok, module} ->
        {:ok, module}

      {:error, :not_found} ->
        unknown =
          case CLI.unserved(report, name) do
            nil -> CMDC.Tool.unknown_tool_message(report.tools, name)
            hint -> "Unknown tool: #{name}. " <> hint
          end

        message =
          [unknown, CLI.load_failure(report, name)]
          |> Enum.reject(&is_nil/1)
          |> Enum.join("\n")

        IO.puts(:stderr, message)
        @unknown_tool
    end
  end

  defp usage_error(message) do
    IO.puts(:stderr, message)
    @usage
  end

  @doc "The exit statuses, by meaning."
  def statuses,
    do: %{
      ok: @ok,
      failed: @failed,
      usage: @usage,
      unknown_tool: @unknown_tool,
      load_failed: @load_failed
    }
end
