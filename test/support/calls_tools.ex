defmodule CMDC.Tool.CallsTools do
  @moduledoc false
  # Tools of the calls-in / results-out tests: a structured result, a tool error, an effect.

  defmodule Weather do
    @behaviour CMDC.Tool
    def name, do: "weather"
    def description, do: "The weather in a city."

    def parameters,
      do: %{
        "type" => "object",
        "properties" => %{"city" => %{"type" => "string"}},
        "required" => ["city"],
        "additionalProperties" => false
      }

    def output_schema,
      do: %{"type" => "object", "properties" => %{"celsius" => %{"type" => "number"}}}

    def execute(%{"city" => "Nowhere"}, _), do: {:error, "no such city: Nowhere"}
    def execute(%{"city" => _}, _), do: {:ok, %{"celsius" => 21.5}}
  end

  defmodule Spawn do
    @behaviour CMDC.Tool
    def name, do: "spawn"
    def description, do: "Starts a sub-agent."
    def parameters, do: %{"type" => "object"}
    def execute(_, _), do: {:effect, {:sub_agent, "research"}}
  end
end
