defmodule CMDC.Tool.Project do
  @moduledoc """
  The tools an application declares: what `mix cmdc.tools` and the MCP server (`mix cmdc.mcp`,
  `bin/cmdc-mcp`) serve when run from that application's directory, before what discovery finds
  in the project's tool folders.

  Declare them in the application's config, as tool modules and/or modules listing them (a
  module exporting `tools/0` that returns tool modules), in `config/runtime.exs`: Mix
  recompiles all of cmdc_tool after each edit of `config :cmdc_tool` in `config/config.exs`
  (`compile_time_config/1` is the doctor's finding), an edit of `runtime.exs` recompiles
  nothing.

      # config/runtime.exs
      import Config
      config :cmdc_tool, tools: [MyAgent.Tools.Weather, MyAgent.ToolSet]

  The other keys: `examples: true` (below), and `settings_hooks: false` — the runner then
  applies no command hooks of the settings files (`.claude/settings.json`, …) in the app's
  own calls, the CLI's or the MCP server's (`CMDC.Tool.Hooks.Settings`).

      # lib/my_agent/tool_set.ex
      defmodule MyAgent.ToolSet do
        def tools, do: [MyAgent.Tools.Search, MyAgent.Tools.Notes]
      end

  The library's own example tools (`CMDC.Tool.Examples`, `examples/tools/`) are served only
  when asked for: `--examples` on the command line, or `examples: true` here. A tool module of
  the application that is not declared is not served; `CMDC.Tool.Project.Unserved` finds such
  modules for the messages of `mix cmdc.tools` and the MCP server.

  ## Errors

  `tools/1` never fails: an entry that is not a loaded module, or a module that is not a tool
  (it lacks `name/0`, `description/0`, `parameters/0` or `execute/2`), is an entry of `errors`
  (`%{type: :config, path: "config :cmdc_tool, tools", reason}`) and the other tools load.
  Unknown options raise `ArgumentError`.

      iex> Application.put_env(:cmdc_tool, :tools, [CMDC.Tool.Examples.Echo, :"Elixir.Nope"])
      iex> %{tools: tools, errors: [error]} = CMDC.Tool.Project.tools()
      iex> Application.delete_env(:cmdc_tool, :tools)
      iex> {tools, error.reason}
      {[CMDC.Tool.Examples.Echo], "Nope is not a compiled module (is it spelled right and under lib/?)"}
  """

  @examples [CMDC.Tool.Examples.Echo, CMDC.Tool.Examples.ReadFile, CMDC.Tool.Examples.Countdown]
  @examples_dir Path.expand("../../../../examples/tools", __DIR__)
  @where "config :cmdc_tool, tools"

  @doc false
  # The `path` of a configured tool's load error (what reports and counts recognize it by).
  def config_path, do: @where

  @doc "The library's built-in example modules (served with `--examples`)."
  @spec examples() :: [module()]
  def examples, do: @examples

  @doc "The library's example tool folder, when this checkout has one (served with `--examples`)."
  @spec example_paths() :: [String.t()]
  def example_paths, do: if(File.dir?(@examples_dir), do: [@examples_dir], else: [])

  @doc """
  The configured tool modules, in order, without duplicates: `%{tools: [module], errors:
  [entry]}`. Options: `:tools` (the entries, default `Application.get_env(:cmdc_tool, :tools)`),
  `:examples` (also the built-in examples; default `Application.get_env(:cmdc_tool,
  :examples, false)`).
  """
  @spec tools(keyword()) :: %{tools: [module()], errors: [map()]}
  def tools(opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:tools, :examples], "CMDC.Tool.Project.tools/1")

    entries =
      Keyword.get_lazy(opts, :tools, fn -> Application.get_env(:cmdc_tool, :tools, []) end)

    examples? = Keyword.get_lazy(opts, :examples, fn -> examples_configured?() end)
    entries = List.wrap(entries) ++ if(examples?, do: @examples, else: [])

    {tools, errors} =
      Enum.reduce(entries, {[], []}, fn entry, {tools, errors} ->
        case expand(entry) do
          {:ok, modules} -> {tools ++ (modules -- tools), errors}
          {:error, reason} -> {tools, errors ++ [error(reason)]}
        end
      end)

    %{tools: tools, errors: errors}
  end

  @doc "Whether `config :cmdc_tool, examples: true` asks for the examples."
  @spec examples_configured?() :: boolean()
  def examples_configured?, do: Application.get_env(:cmdc_tool, :examples, false) == true

  @doc """
  Applies the configuration of the Mix project in `dir` (default: the current folder) when no
  Mix project is running: what `bin/cmdc-mcp` does, which starts the VM without Mix so the first
  answer comes fast. Reads `config/config.exs` (with `MIX_ENV`, default `dev`) and
  `config/runtime.exs` as Mix would. Returns `:ok`, `:skipped` (Mix runs, or no config), or
  `{:error, message}` (also printed on stderr: the tools of the config are then missing).
  """
  @spec load_config(Path.t()) :: :ok | :skipped | {:error, String.t()}
  def load_config(dir \\ File.cwd!()) do
    files =
      for name <- ["config.exs", "runtime.exs"],
          file = Path.join([dir, "config", name]),
          File.regular?(file),
          do: file

    cond do
      mix_project?() or files == [] ->
        :skipped

      true ->
        env = String.to_atom(System.get_env("MIX_ENV") || "dev")

        try do
          for file <- files do
            Application.put_all_env(Config.Reader.read!(file, env: env, target: :host))
          end

          :ok
        rescue
          e ->
            message = "cmdc: reading #{dir}/config failed: #{Exception.message(e)}"
            IO.puts(:stderr, message)
            {:error, message}
        end
    end
  end

  @doc """
  A finding when the project's compile-time config (`config/config.exs` and what it imports,
  for `MIX_ENV`) sets `config :cmdc_tool`, else `nil`: Mix (1.14) recompiles every module of a
  dependency whose own application config changed, so each such edit recompiles all of
  cmdc_tool, while `config/runtime.exs`, read when the VM starts, recompiles nothing.

      iex> CMDC.Tool.Project.compile_time_config("/nonexistent")
      nil
  """
  @spec compile_time_config(Path.t()) :: String.t() | nil
  def compile_time_config(dir) do
    file = Path.join([dir, "config", "config.exs"])
    env = String.to_atom(System.get_env("MIX_ENV") || "dev")

    with true <- File.regular?(file),
         config when is_list(config) <- read_config(file, env),
         [_ | _] = keys <- Keyword.keys(Keyword.get(config, :cmdc_tool, [])) do
      "config/config.exs sets `config :cmdc_tool, #{Enum.map_join(keys, ", ", &"#{&1}:")} ...`: " <>
        "Mix recompiles all of cmdc_tool after each edit of it; move it to config/runtime.exs " <>
        "(read when the VM starts: an edit there recompiles nothing)"
    else
      _ -> nil
    end
  end

  defp read_config(file, env) do
    Config.Reader.read!(file, env: env, target: :host)
  rescue
    _ -> nil
  end

  defp mix_project? do
    Code.ensure_loaded?(Mix.Project) and apply(Mix.Project, :get, []) != nil
  end

  defp expand(module) when is_atom(module) do
    cond do
      not loaded?(module) ->
        {:error, "#{inspect(module)} is not a compiled module#{spelling(module)}"}

      tool?(module) ->
        {:ok, [module]}

      function_exported?(module, :tools, 0) ->
        expand_set(module)

      true ->
        {:error,
         "#{inspect(module)} is neither a tool (name/0, description/0, parameters/0, " <>
           "execute/2) nor a tool set (tools/0)"}
    end
  end

  defp expand(other),
    do: {:error, "#{inspect(other)} is not a module: list tool modules or tool sets"}

  # A misspelled module: the closest compiled module of the same top namespace (the app's).
  defp spelling(module) do
    name = inspect(module)
    prefix = "Elixir." <> hd(String.split(name, ".")) <> "."

    candidates =
      for {file, _, _} <- :code.all_available(),
          full = to_string(file),
          String.starts_with?(full, prefix),
          do: String.replace_prefix(full, "Elixir.", "")

    case CMDC.Tool.Options.suggest(name, candidates) do
      [best | _] -> " (did you mean #{best}?)"
      [] -> " (is it spelled right and under lib/?)"
    end
  end

  defp expand_set(module) do
    case module.tools() do
      list when is_list(list) ->
        Enum.reduce_while(list, {:ok, []}, fn m, {:ok, acc} ->
          if is_atom(m) and loaded?(m) and tool?(m),
            do: {:cont, {:ok, acc ++ [m]}},
            else: {:halt, {:error, "#{inspect(module)}.tools/0 lists #{inspect(m)}, not a tool"}}
        end)

      other ->
        {:error, "#{inspect(module)}.tools/0 returned #{inspect(other)}, not a list of modules"}
    end
  rescue
    e -> {:error, "#{inspect(module)}.tools/0 raised: #{Exception.message(e)}"}
  end

  defp loaded?(module), do: match?({:module, _}, Code.ensure_loaded(module))

  defp tool?(module) do
    Enum.all?([name: 0, description: 0, parameters: 0, execute: 2], fn {f, a} ->
      function_exported?(module, f, a)
    end)
  end

  defp error(reason),
    do: %{type: :config, source: :config, provider: "config", path: @where, reason: reason}
end
