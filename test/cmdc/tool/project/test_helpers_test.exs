defmodule CMDC.Tool.TestHelpersTest do
  # CMDC.Tool.Test, the helpers users' tests (and the generator's) call.
  use ExUnit.Case, async: true

  alias CMDC.Tool.Test, as: T
  alias CMDC.Tool.Examples.Echo

  doctest CMDC.Tool.Test

  defmodule Bounded do
    @behaviour CMDC.Tool
    def name, do: "bounded"
    def description, do: "A tool whose schema strict OpenAI cannot say."

    def parameters,
      do: %{"type" => "object", "properties" => %{"s" => %{"type" => "string", "minLength" => 2}}}

    def execute(_args, _ctx), do: {:error, "always fails"}
  end

  test "call! raises with the model's message; call returns the result" do
    assert %{is_error: true, reason: :tool_error} = T.call([Bounded], "bounded", %{s: "ab"})

    assert_raise T.Error, "bounded failed (:tool_error): always fails", fn ->
      T.call!([Bounded], "bounded", %{"s" => "ab"})
    end

    assert %{reason: :unknown_tool, content: "Unknown tool: ech" <> _} = T.call([Echo], "ech")
  end

  test "schemas! names the format and the change; formats: limits the check" do
    error = assert_raise T.Error, fn -> T.schemas!([Bounded]) end
    assert error.message =~ "minLength"
    assert error.message =~ ~r/^(openai|anthropic|gemini)/

    assert %{mcp: [%{"name" => "bounded"}]} = T.schemas!([Bounded], formats: [:mcp])

    assert_raise ArgumentError, ~r/unknown formats \[:openia\]/, fn ->
      T.schemas!([Bounded], formats: [:openia])
    end

    assert_raise ArgumentError, ~r/did you mean :formats/, fn ->
      T.schemas!([Echo], format: [:mcp])
    end
  end

  test "the settings files' hooks are off unless asked for; options are checked" do
    assert T.call!([Echo], "echo", %{text: "x"}, settings_hooks: false) == "x"

    assert_raise ArgumentError, ~r/did you mean :context/, fn ->
      T.call([Echo], "echo", %{text: "x"}, contex: nil)
    end
  end
end
