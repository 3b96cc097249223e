defmodule CMDC.Tool.Calls.Messages do
  @moduledoc false
  # Results out: the message, items or blocks each provider's next request carries for a batch
  # of results. Called by `CMDC.Tool.Result.to_message/3`, which caps the text first; results
  # are read by field (not matched as structs) so this file does not depend back on Result.

  alias CMDC.Tool.Calls

  @doc false
  def build(format, results, effect_text) do
    build_for(format, Enum.map(results, &text(&1, effect_text)))
  end

  # {result, text}: the text the model reads; an effect's result carries no text of its own.
  defp text(%{content: text} = result, _effect_text) when is_binary(text), do: {result, text}
  defp text(%{effect: effect} = result, fun) when is_function(fun, 1), do: {result, fun.(effect)}
  defp text(result, text) when is_binary(text), do: {result, text}

  defp build_for(:openai, pairs) do
    for {r, text} <- pairs, do: %{"role" => "tool", "tool_call_id" => r.id, "content" => text}
  end

  defp build_for(:openai_responses, pairs) do
    for {r, text} <- pairs,
        do: %{"type" => "function_call_output", "call_id" => r.id, "output" => text}
  end

  defp build_for(:anthropic, pairs) do
    blocks =
      for {r, text} <- pairs do
        %{"type" => "tool_result", "tool_use_id" => r.id, "content" => text}
        |> put_if(r.is_error, "is_error", true)
      end

    %{"role" => "user", "content" => blocks}
  end

  defp build_for(format, pairs) when format in [:gemini, :gemini_json_schema] do
    parts =
      for {r, text} <- pairs do
        response =
          cond do
            r.is_error -> %{"error" => text}
            is_map(r.structured) -> %{"output" => r.structured}
            true -> %{"output" => text}
          end

        response = %{"name" => r.name, "response" => response}
        %{"functionResponse" => put_if(response, given_id?(r.id), "id", r.id)}
      end

    %{"role" => "user", "parts" => parts}
  end

  defp build_for(:mcp, pairs) do
    for {r, text} <- pairs do
      result =
        %{"content" => [%{"type" => "text", "text" => text}], "isError" => r.is_error}
        |> put_if(is_map(r.structured), "structuredContent", r.structured)

      %{"jsonrpc" => "2.0", "id" => r.id, "result" => result}
    end
  end

  defp build_for(format, _pairs),
    do:
      raise(
        ArgumentError,
        "CMDC.Tool.Result.to_message/3: unknown format #{inspect(format)}; " <>
          "expected one of #{inspect(Calls.formats())}"
      )

  # Gemini matches a response to its call by the id only when the model gave one.
  defp given_id?(id) when is_binary(id), do: not String.starts_with?(id, Calls.gemini_prefix())
  defp given_id?(id), do: id != nil

  defp put_if(map, true, key, value), do: Map.put(map, key, value)
  defp put_if(map, _, _key, _value), do: map
end
