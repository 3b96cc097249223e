defmodule CMDC.Tool.FormatErrorsTest do
  # The text a model gets for an invalid call stays small (issue 23, item 8): 20 invalid
  # arguments against a 20,000-property schema gave 430 kB.
  use ExUnit.Case, async: true

  alias CMDC.Tool.Schema

  test "20 invalid arguments against a 20,000-property schema: a capped text that says what it left out" do
    props =
      Map.new(1..20_000, fn i ->
        {"parameter_#{String.pad_leading("#{i}", 5, "0")}", %{"type" => "integer"}}
      end)

    schema = %{
      "type" => "object",
      "properties" => Map.put(props, "mode", %{"enum" => Enum.map(1..500, &"m#{&1}")}),
      "required" => ["parameter_20000", "mode"],
      "additionalProperties" => false
    }

    args =
      Map.new(1..20, fn i ->
        {"parameter_#{String.pad_leading("#{i}", 5, "0")}", String.duplicate("x", 5_000)}
      end)
      |> Map.put("unknown_one", 1)
      |> Map.put("unknown_two", 2)

    {:ok, compiled} = Schema.compile(schema)
    {:error, errors} = Schema.validate(compiled, args)
    assert length(errors) > 20
    text = CMDC.Tool.format_errors(errors, schema)

    IO.puts(
      "format_errors: #{length(errors)} errors, 20,001 properties -> #{byte_size(text)} bytes"
    )

    assert byte_size(text) < 20_000

    lines = String.split(text, "\n")
    assert hd(lines) == "Invalid arguments:"
    assert Enum.count(lines, &String.starts_with?(&1, "- at")) == 20
    assert Enum.any?(lines, &(&1 =~ ~r/^- … and \d+ more errors$/))
    # a long message (it quotes the 5,000-character value) is cut, and says so
    assert Enum.all?(lines, &(String.length(&1) < 400 or String.starts_with?(&1, "Accepted")))
    assert text =~ "… (cut)"

    accepted = List.last(lines)
    assert accepted =~ "Accepted parameters: "
    # required ones first, then the rest up to the cap; the enum capped too
    assert accepted =~ "parameter_20000 (integer, required)"
    assert accepted =~ "mode (one of: "
    assert accepted =~ "(and 480 more)"
    assert accepted =~ "(and 19951 more, not listed)."
  end

  test "small errors are unchanged: every error and every parameter" do
    {:error, errors} = CMDC.Tool.validate(CMDC.Tool.Examples.ReadFile, %{"limit" => 0})
    text = CMDC.Tool.format_errors(errors, CMDC.Tool.Examples.ReadFile)
    refute text =~ "more"
    assert text =~ "Accepted parameters: limit (integer), path (string, required)."
  end
end
