defmodule CMDC.Tool.CallsGuideTest do
  # docs/CALLS.md's agent loop, run as written: a user copying it gets what it says.
  use ExUnit.Case, async: true

  @guide Path.expand("../../../../docs/CALLS.md", __DIR__)
  @external_resource @guide

  test "the guide's agent loop runs offline against its recorded response" do
    [_, after_marker] = String.split(File.read!(@guide), "<!-- example: agent loop -->", parts: 2)
    [_, code, _] = String.split(after_marker, ~r/^```.*$/m, parts: 3)

    # A module name of its own, so this test never clashes with another definition.
    code = String.replace(code, "MyAgent", "CMDC.Tool.CallsGuideTest.MyAgent")
    {answer, binding} = Code.eval_string(code)

    assert answer == "The tool said: hello from the tool"
    assert [user, assistant, results] = binding[:conversation]
    assert user == %{"role" => "user", "content" => "Echo hello."}

    assert [%{"type" => "text"}, %{"type" => "tool_use", "id" => "toolu_01"}] =
             assistant["content"]

    assert results == %{
             "role" => "user",
             "content" => [
               %{
                 "type" => "tool_result",
                 "tool_use_id" => "toolu_01",
                 "content" => "hello from the tool"
               }
             ]
           }
  end
end
