defmodule CMDC.Tool.Test.Realistic do
  @moduledoc false
  # A realistic set of tools for the provider tests: nested objects, enums, optional fields,
  # `$ref`/`$defs`, arrays of objects, `const`, a tool without parameters.

  def all,
    do: [__MODULE__.Weather, __MODULE__.CreateEvent, __MODULE__.SearchCode, __MODULE__.ListFiles]

  defmodule Weather do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "get_weather"
    def description, do: "Current weather for a city."

    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "city" => %{"type" => "string", "minLength" => 1, "description" => "City name"},
          "unit" => %{"enum" => ["celsius", "fahrenheit"]},
          "days" => %{"type" => "integer", "minimum" => 1, "maximum" => 7}
        },
        "required" => ["city"],
        "additionalProperties" => false
      }
    end

    def execute(_args, _ctx), do: {:ok, "sunny"}
  end

  defmodule CreateEvent do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "create_event"
    def description, do: "Create a calendar event."
    def description(%{working_dir: dir}), do: "Create a calendar event (calendar in #{dir})."
    def description(_), do: description()

    def parameters do
      %{
        "$schema" => "http://json-schema.org/draft-07/schema#",
        "type" => "object",
        "properties" => %{
          "title" => %{"type" => "string"},
          "kind" => %{"const" => "meeting"},
          "when" => %{"$ref" => "#/$defs/time_range"},
          "attendees" => %{
            "type" => "array",
            "items" => %{
              "type" => "object",
              "properties" => %{
                "email" => %{"type" => "string", "format" => "email"},
                "optional" => %{"type" => "boolean"}
              },
              "required" => ["email"]
            }
          },
          "tags" => %{"type" => "array", "items" => %{"type" => "string"}, "uniqueItems" => true}
        },
        "required" => ["title", "when"],
        "$defs" => %{
          "time_range" => %{
            "type" => "object",
            "properties" => %{
              "start" => %{"type" => "string", "format" => "date-time"},
              "end" => %{"type" => "string", "format" => "date-time"}
            },
            "required" => ["start"]
          }
        }
      }
    end

    def execute(_args, _ctx), do: {:ok, "created"}
  end

  defmodule SearchCode do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "search_code"
    def description, do: "Search the code base."

    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "query" => %{"type" => "string"},
          "filters" => %{
            "type" => "object",
            "properties" => %{
              "language" => %{"type" => ["string", "null"]},
              "path_prefix" => %{"type" => "string", "pattern" => "^[a-z/]+$"}
            }
          },
          "limit" => %{"type" => "integer", "exclusiveMinimum" => 0},
          "mode" => %{"enum" => ["literal", "regex"], "default" => "literal"}
        },
        "required" => ["query"]
      }
    end

    def execute(_args, _ctx), do: {:ok, "found"}
  end

  defmodule ListFiles do
    @moduledoc false
    @behaviour CMDC.Tool
    def name, do: "list_files"
    def description, do: "List the files of the working directory."
    def parameters, do: %{"type" => "object", "properties" => %{}}
    def execute(_args, _ctx), do: {:ok, ""}
  end
end
