defmodule CMDC.Tool.MCP.Exec do
  @moduledoc false
  # One tools/call: validate, execute, normalize. Runs in the call's own process.

  @spec call(module(), map(), CMDC.Context.t(), (String.t() -> any())) ::
          CMDC.Tool.result() | {:invalid, String.t()}
  def call(module, args, context, _on_update) do
    case CMDC.Tool.validate(module, args) do
      {:ok, args} ->
        try do
          case module.execute(args, context) do
            {:ok, text} when is_binary(text) -> {:ok, text}
            {:error, text} when is_binary(text) -> {:error, text}
            {:effect, _} = effect -> effect
            other -> {:error, "the tool returned #{inspect(other, limit: 5)}"}
          end
        rescue
          e -> {:error, "the tool failed: " <> Exception.message(e)}
        end

      {:error, errors} ->
        {:invalid, CMDC.Tool.format_errors(errors, module)}
    end
  end
end
