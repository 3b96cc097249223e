# A tool defined, described and validated: what `make demo` shows.
defmodule Demo.WeatherTool do
  @behaviour CMDC.Tool

  @impl true
  def name, do: "get_weather"

  @impl true
  def description, do: "Current weather for a city."

  @impl true
  def parameters do
    %{
      "type" => "object",
      "properties" => %{
        "city" => %{"type" => "string", "minLength" => 1},
        "unit" => %{"enum" => ["celsius", "fahrenheit"]},
        "days" => %{"type" => "integer", "minimum" => 1, "maximum" => 7}
      },
      "required" => ["city"],
      "additionalProperties" => false
    }
  end

  @impl true
  def execute(%{"city" => city} = args, _ctx),
    do: {:ok, "#{city}: 21 degrees #{args["unit"] || "celsius"}, sunny"}
end

alias CMDC.Tool

IO.puts("== to_schema: the tools list a model request carries ==")
IO.puts(CMDC.Tool.JSON.encode!(Tool.to_schema([Demo.WeatherTool]), pretty: true))

ctx = CMDC.Context.new(session_id: "demo", working_dir: File.cwd!())
valid = ~s({"city": "Lisbon", "unit": "celsius"})
IO.puts("\n== a valid call: get_weather #{valid} ==")
{:ok, args} = Tool.validate_json(Demo.WeatherTool, valid)
{:ok, text} = Demo.WeatherTool.execute(args, ctx)
IO.puts("tool result: " <> text)

invalid = ~s({"city": "", "unit": "kelvin", "days": 10, "country": "PT"})
IO.puts("\n== an invalid call: get_weather #{invalid} ==")
{:error, errors} = Tool.validate_json(Demo.WeatherTool, invalid)
IO.puts("what the model gets back:\n" <> Tool.format_errors(errors, Demo.WeatherTool))
