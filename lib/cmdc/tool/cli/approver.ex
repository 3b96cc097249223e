defmodule CMDC.Tool.CLI.Approver do
  @moduledoc false
  # Approval from the person at the terminal (`mix cmdc.tools call`): the tool, its meta/1
  # summary and the arguments before a call (and the result, where result approval applies);
  # --yes approves everything (scripted use); off a terminal without --yes nothing marked for
  # approval runs or shows, and the message names the flag.

  import CMDC.Tool.CLI.Output, only: [bold: 1]

  @doc "The approver for `CMDC.Tool.Runner`: `for(tools, yes?, terminal?)`."
  def for(_tools, true, _terminal?), do: fn _request -> :allow end

  def for(tools, false, true), do: &ask(tools, &1)

  def for(_tools, false, false) do
    fn request ->
      {:deny,
       "#{if Map.has_key?(request, :result), do: "its result", else: "it"} needs approval and " <>
         "this is not an interactive terminal; pass --yes to approve (e.g. in scripts)"}
    end
  end

  @doc "Whether both stdin and stdout are a terminal (the BEAM's own descriptors)."
  def terminal? do
    Enum.all?([0, 1], fn fd ->
      case File.read_link("/proc/self/fd/#{fd}") do
        {:ok, "/dev/pts/" <> _} -> true
        {:ok, "/dev/tty" <> _} -> true
        _ -> false
      end
    end)
  end

  defp ask(tools, request) do
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
end
