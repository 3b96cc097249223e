defmodule CMDC.Tool.Approval do
  @moduledoc """
  Result approval: after a tool ran, a result its settings mark for review goes to the approver
  before the model sees it. It applies to every tool kind (an Elixir tool sets
  `result_approval:` in `tool_options/0`, a script `resultApprovalPolicy` or
  `requireResultApproval`, a registry or metadata file its per-tool settings).

    * `:never` (default) - the result goes to the model as is.
    * `:on_error` - error results go to the approver first.
    * `:always` - every result goes to the approver first.

  The approver is the runner's `:approver` option (or `context.private.approver`), called with
  `%{tool: name, args: args, call_id: id, result: %CMDC.Tool.Result{}}` (the `:result` key tells
  it apart from the question asked before a call) and answering `:allow`, `:deny` or
  `{:deny, why}`. Without an approver (headless) the result is withheld: the model gets an error
  result saying so, never the content.

      iex> result = %CMDC.Tool.Result{content: "secret"}
      iex> CMDC.Tool.Approval.review(result, "read", %{}, "c1", %{result_approval: :always}, %CMDC.Context{}, []).content
      "the result of read needs approval before the model may see it, and no one can approve here (headless): withheld. To show it without asking, pass `--allow read` to `mix cmdc.mcp` / `cmdc-mcp` / `mix cmdc.tools call`, or set the tool's result approval to never (`resultApprovalPolicy = \"never\"`, `result_approval: :never`)."
  """

  alias CMDC.Tool.Result

  @type decision :: :allow | :deny | {:deny, String.t()}

  @doc "Passes `result` on, or withholds it, according to the tool's `:result_approval`."
  @spec review(Result.t(), String.t(), map(), term(), map(), CMDC.Context.t(), keyword()) ::
          Result.t()
  def review(%Result{} = result, name, args, id, settings, context, opts) do
    if needs_review?(Map.get(settings, :result_approval, :never), result) do
      approver = Keyword.get(opts, :approver) || Map.get(context.private, :approver)
      decide(approver, result, %{tool: name, args: args, call_id: id, result: result})
    else
      result
    end
  end

  defp needs_review?(:never, _result), do: false
  defp needs_review?(:on_error, %Result{is_error: is_error}), do: is_error
  # :always, and anything unexpected (fail-safe)
  defp needs_review?(_, _result), do: true

  defp decide(nil, _result, %{tool: name}) do
    Result.error(
      "the result of #{name} needs approval before the model may see it, and no one can " <>
        "approve here (headless): withheld. To show it without asking, pass `--allow #{name}` " <>
        "to `mix cmdc.mcp` / `cmdc-mcp` / `mix cmdc.tools call`, or set the tool's result " <>
        "approval to never (`resultApprovalPolicy = \"never\"`, `result_approval: :never`).",
      :withheld
    )
  end

  defp decide(approver, result, request) do
    case approver.(request) do
      :allow ->
        result

      # An approver with no answer for this tool: as if there were none.
      nil ->
        decide(nil, result, request)

      {:deny, why} ->
        Result.error("the result of #{request.tool} was not approved: #{why}", :withheld)

      _ ->
        Result.error("the result of #{request.tool} was not approved.", :withheld)
    end
  end

  @doc """
  How to let `name` (tool `module`) run without asking, for the headless refusal: the flag, and
  the setting in the tool's own file (a script's path is named).

      iex> CMDC.Tool.Approval.how_to_allow(nil, "deploy") =~ "--allow deploy"
      true
  """
  @spec how_to_allow(module() | nil, String.t()) :: String.t()
  def how_to_allow(module, name) do
    "To let it run without asking, give it policy auto: pass `--allow #{name}` to " <>
      "`mix cmdc.mcp` / `cmdc-mcp` / `mix cmdc.tools call`, or " <> in_file(module, name)
  end

  defp in_file(module, name) do
    # A runner caller (an agent's code, a test) has the `policies:` option whatever the kind.
    runner = "pass `policies: %{\"#{name}\" => :auto}` (or an `approver:`) to CMDC.Tool.Runner."

    case module && :persistent_term.get({CMDC.Tool.Script, module}, nil) do
      %{script: %{path: path, function: function, kind: :python}} ->
        "add `#{function}.executionPolicy = \"auto\"` below the function in #{path}, or " <>
          runner

      %{script: %{path: path, kind: :powershell}} ->
        "add `# TOOL_CONFIG: {\"executionPolicy\": \"auto\"}` to the function's help in " <>
          "#{path}, or " <> runner

      _ ->
        "return `[policy: :auto]` from the tool's `tool_options/0` (Elixir), or " <> runner
    end
  end
end
