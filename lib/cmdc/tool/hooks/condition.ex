defmodule CMDC.Tool.Hooks.Condition do
  @moduledoc """
  A hook's `if` condition, in Claude Code's permission-rule syntax: the hook runs only for
  calls the rule matches (tool events only; other events ignore it, as Claude Code does).

    * `Tool` - any call of the tool (`*` in the name is a wildcard: `mcp__github__*`);
    * `Tool(prefix:*)` - the tool's argument starts with `prefix` (`Bash(git commit:*)`);
    * `Tool(pattern)` with `*` - a wildcard match (`Bash(npm run *)`; for file tools `*` stays
      within a folder and `**` crosses folders, and a pattern without `/` is matched against
      the file's name: `Edit(*.ts)`, `Write(src/**)`);
    * `Tool(exact)` - the argument is exactly that.

  The argument each tool's rule reads: `Bash` its `command` (a compound command matches when
  one of its parts, split at `&&`, `||`, `;` and `|`, does), `Read`/`Write`/`Edit`/`MultiEdit`
  its `file_path`, `NotebookEdit` its `notebook_path`, `WebFetch` its `url` (`domain:host`
  matches the URL's host), `WebSearch` its `query`; any other tool the first of `command`,
  `file_path`, `path`, `url`, `query` it is given as a string. A call without that argument
  does not match a rule with one.

      iex> {:ok, c} = CMDC.Tool.Hooks.Condition.parse("Bash(git commit:*)")
      iex> CMDC.Tool.Hooks.Condition.match?(c, ["Bash"], %{"command" => "git add . && git commit -m x"})
      true
      iex> CMDC.Tool.Hooks.Condition.match?(c, ["Bash"], %{"command" => "git push"})
      false
      iex> {:ok, c} = CMDC.Tool.Hooks.Condition.parse("Edit(*.ts)")
      iex> CMDC.Tool.Hooks.Condition.match?(c, ["Edit"], %{"file_path" => "/p/src/a.ts"})
      true
      iex> CMDC.Tool.Hooks.Condition.parse("Bash(git")
      {:error, ~s|"if": "Bash(git" is not a permission rule (Tool, Tool(prefix:*), Tool(exact))|}
  """

  @enforce_keys [:source, :tool]
  defstruct [:source, :tool, :content]

  @type t :: %__MODULE__{
          source: String.t(),
          tool: Regex.t() | String.t(),
          content: nil | {:prefix, String.t()} | {:exact, String.t()} | {:glob, String.t()}
        }

  @arguments %{
    "Bash" => "command",
    "Read" => "file_path",
    "Write" => "file_path",
    "Edit" => "file_path",
    "MultiEdit" => "file_path",
    "NotebookEdit" => "notebook_path",
    "WebFetch" => "url",
    "WebSearch" => "query"
  }
  @file_tools ~w(Read Write Edit MultiEdit NotebookEdit)
  @fallback ~w(command file_path path url query)

  @doc "Parses an `if` value: `{:ok, nil}` when absent, `{:ok, condition}` or `{:error, why}`."
  @spec parse(term()) :: {:ok, t() | nil} | {:error, String.t()}
  def parse(nil), do: {:ok, nil}

  def parse(text) when is_binary(text) do
    case Regex.run(~r/\A\s*([^()\s]+)\s*(?:\((.*)\))?\s*\z/s, text) do
      [_, tool] ->
        {:ok, %__MODULE__{source: text, tool: tool_pattern(tool)}}

      [_, tool, ""] ->
        {:ok, %__MODULE__{source: text, tool: tool_pattern(tool)}}

      [_, tool, content] ->
        {:ok, %__MODULE__{source: text, tool: tool_pattern(tool), content: content(content)}}

      nil ->
        {:error,
         ~s|"if": #{inspect(text)} is not a permission rule (Tool, Tool(prefix:*), Tool(exact))|}
    end
  end

  def parse(other),
    do: {:error, ~s|"if" must be a permission rule as a string, got #{inspect(other, limit: 5)}|}

  defp tool_pattern(tool) do
    if String.contains?(tool, "*"), do: wildcard(tool, ".*"), else: tool
  end

  defp content(text) do
    cond do
      String.ends_with?(text, ":*") -> {:prefix, String.trim_trailing(text, ":*")}
      String.contains?(text, "*") -> {:glob, text}
      true -> {:exact, text}
    end
  end

  @doc "Whether the condition holds for a call of a tool known by `names` with `args`."
  @spec match?(t() | nil, [String.t()], map()) :: boolean()
  def match?(nil, _names, _args), do: true

  def match?(%__MODULE__{tool: tool, content: content}, names, args) do
    case Enum.filter(names, &tool_match?(tool, &1)) do
      [] -> false
      _ when content == nil -> true
      matched -> Enum.any?(matched, &content_match?(content, &1, args))
    end
  end

  defp tool_match?(%Regex{} = re, name), do: Regex.match?(re, name)
  defp tool_match?(tool, name), do: tool == name

  defp content_match?(content, tool, args) when is_map(args) do
    case argument(tool, args) do
      nil -> false
      value -> value_match?(content, tool, value)
    end
  end

  defp content_match?(_content, _tool, _args), do: false

  defp argument(tool, args) do
    case Map.fetch(@arguments, tool) do
      {:ok, key} -> string(args[key])
      :error -> Enum.find_value(@fallback, &string(args[&1]))
    end
  end

  defp string(value) when is_binary(value), do: value
  defp string(_), do: nil

  defp value_match?(content, "Bash", command) do
    parts = String.split(command, ~r/&&|\|\||;|\|/)
    Enum.any?([command | parts], &one?(content, "Bash", String.trim(&1)))
  end

  defp value_match?({:exact, "domain:" <> host}, "WebFetch", url),
    do: URI.parse(url).host == host

  defp value_match?(content, tool, value), do: one?(content, tool, value)

  defp one?({:exact, text}, _tool, value), do: value == text
  defp one?({:prefix, text}, _tool, value), do: String.starts_with?(value, text)

  defp one?({:glob, pattern}, tool, value) when tool in @file_tools do
    {pattern, value} =
      if String.contains?(pattern, "/"),
        do: {String.trim_leading(pattern, "./"), value},
        else: {pattern, Path.basename(value)}

    re = wildcard(pattern, "[^/]*")
    # A relative pattern matches the end of an absolute path (`src/**` under any project).
    Regex.match?(re, value) or
      (String.starts_with?(value, "/") and
         Regex.match?(Regex.compile!("(?:^|/)" <> strip(re.source)), value))
  end

  defp one?({:glob, pattern}, _tool, value), do: Regex.match?(wildcard(pattern, ".*"), value)

  defp strip("\\A" <> rest), do: rest
  defp strip(source), do: source

  # `**` crosses folders, `*` is `star`; everything else literal. Anchored at both ends.
  defp wildcard(pattern, star) do
    body =
      pattern
      |> String.split("**")
      |> Enum.map_join(".*", fn piece ->
        piece |> String.split("*") |> Enum.map_join(star, &Regex.escape/1)
      end)

    Regex.compile!("\\A" <> body <> "\\z", "s")
  end
end
