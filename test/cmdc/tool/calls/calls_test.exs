defmodule CMDC.Tool.CallsTest do
  # Calls in (CMDC.Tool.Calls.from_response/2) and results out (CMDC.Tool.Result.to_message/3),
  # each format, run through the real runner.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Calls, JSON, Result, Runner}
  alias CMDC.Tool.CallsTools.{Spawn, Weather}
  alias CMDC.Tool.Examples.Echo

  doctest CMDC.Tool.Calls

  @tools [Echo, Weather, Spawn]

  defp run(format, response) do
    assert {:ok, calls} = Calls.from_response(format, response)
    {calls, Runner.run_many(@tools, calls, %CMDC.Context{})}
  end

  test "openai: calls in order with their ids; bad arguments are an error result, the rest run" do
    response = %{
      "choices" => [
        %{
          "message" => %{
            "role" => "assistant",
            "content" => nil,
            "tool_calls" => [
              call_openai("call_a", "echo", ~s({"text": "one"})),
              call_openai("call_b", "weather", ~s({"city": "Oslo")),
              call_openai("call_c", "weather", ~s(["Oslo"])),
              call_openai("call_d", "echo", ~s({"text": "two"}))
            ]
          }
        }
      ]
    }

    {calls, results} = run(:openai, JSON.encode!(response))
    assert Enum.map(calls, & &1.id) == ~w(call_a call_b call_c call_d)
    assert Enum.map(results, & &1.id) == ~w(call_a call_b call_c call_d)
    assert [%{content: "one"}, bad_json, not_object, %{content: "two"}] = results
    assert %{is_error: true, reason: :invalid} = bad_json
    assert bad_json.content =~ "JSON"
    assert %{is_error: true, reason: :invalid} = not_object
    assert not_object.content =~ "object"

    assert [%{"role" => "tool", "tool_call_id" => "call_a", "content" => "one"} | _] =
             msgs = Result.to_message(:openai, results)

    assert length(msgs) == 4
  end

  test "openai: an empty arguments text is {}; a message alone is read; no calls is []" do
    message = %{"role" => "assistant", "tool_calls" => [call_openai("c", "spawn", "")]}

    assert {:ok, [%{id: "c", name: "spawn", arguments: %{}}]} =
             Calls.from_response(:openai, message)

    assert {:ok, []} =
             Calls.from_response(:openai, %{
               "choices" => [%{"message" => %{"role" => "assistant", "content" => "hi"}}]
             })
  end

  test "responses: function_call items with namespace, other items skipped" do
    output = [
      %{"type" => "reasoning", "id" => "rs_1", "summary" => []},
      %{
        "type" => "function_call",
        "call_id" => "fc_1",
        "name" => "echo",
        "arguments" => ~s({"text":"x"})
      },
      %{
        "type" => "function_call",
        "call_id" => "fc_2",
        "name" => "create_issue",
        "namespace" => "github",
        "arguments" => "{}"
      },
      %{"type" => "message", "role" => "assistant", "content" => []}
    ]

    assert {:ok, [first, second]} = Calls.from_response(:openai_responses, %{"output" => output})
    assert first == %{id: "fc_1", name: "echo", arguments: %{"text" => "x"}}
    assert second == %{id: "fc_2", name: "create_issue", namespace: "github", arguments: %{}}

    results = Runner.run_many(@tools, [first], %CMDC.Context{})

    assert [%{"type" => "function_call_output", "call_id" => "fc_1", "output" => "x"}] =
             Result.to_message(:openai_responses, results)
  end

  test "anthropic: tool_use blocks; errors carry is_error; effects and structured results" do
    content = [
      %{"type" => "text", "text" => "Checking."},
      %{
        "type" => "tool_use",
        "id" => "tu_1",
        "name" => "weather",
        "input" => %{"city" => "Oslo"}
      },
      %{"type" => "tool_use", "id" => "tu_2", "name" => "weather", "input" => %{"city" => 5}},
      %{
        "type" => "tool_use",
        "id" => "tu_3",
        "name" => "weather",
        "input" => %{"city" => "Nowhere"}
      },
      %{"type" => "tool_use", "id" => "tu_4", "name" => "spawn", "input" => %{}},
      %{"type" => "tool_use", "id" => "tu_5", "name" => "nope", "input" => %{}}
    ]

    {_calls, results} = run(:anthropic, %{"role" => "assistant", "content" => content})
    message = Result.to_message(:anthropic, results, effect_text: fn {:sub_agent, w} -> w end)
    assert %{"role" => "user", "content" => blocks} = message
    assert Enum.map(blocks, & &1["tool_use_id"]) == ~w(tu_1 tu_2 tu_3 tu_4 tu_5)

    assert [ok, invalid, failed, effect, unknown] = blocks
    assert JSON.decode!(ok["content"]) == %{"celsius" => 21.5}
    refute Map.has_key?(ok, "is_error")
    assert invalid["is_error"] and invalid["content"] =~ "city"
    assert failed["is_error"] and failed["content"] == "no such city: Nowhere"
    assert effect["content"] == "research" and not Map.has_key?(effect, "is_error")
    assert unknown["is_error"] and unknown["content"] =~ "nope"
  end

  test "gemini: stable generated ids left out of functionResponse, given ids kept" do
    response = %{
      "candidates" => [
        %{
          "content" => %{
            "role" => "model",
            "parts" => [
              %{"text" => "Sure."},
              %{"functionCall" => %{"name" => "weather", "args" => %{"city" => "Oslo"}}},
              %{"functionCall" => %{"name" => "weather", "args" => %{"city" => "Nowhere"}}},
              %{
                "functionCall" => %{"id" => "given", "name" => "echo", "args" => %{"text" => "e"}}
              }
            ]
          }
        }
      ]
    }

    {calls, results} = run(:gemini, response)
    assert {:ok, ^calls} = Calls.from_response(:gemini, JSON.encode!(response))
    assert [g1, g2, %{id: "given"}] = calls
    assert g1.id != g2.id
    assert String.starts_with?(g1.id, "cmdc_gemini_")

    assert %{"role" => "user", "parts" => [p1, p2, p3]} = Result.to_message(:gemini, results)

    assert p1 == %{
             "functionResponse" => %{
               "name" => "weather",
               "response" => %{"output" => %{"celsius" => 21.5}}
             }
           }

    assert p2 == %{
             "functionResponse" => %{
               "name" => "weather",
               "response" => %{"error" => "no such city: Nowhere"}
             }
           }

    assert p3["functionResponse"] == %{
             "id" => "given",
             "name" => "echo",
             "response" => %{"output" => "e"}
           }
  end

  test "mcp: tools/call requests in, JSON-RPC CallToolResults out" do
    requests = [
      %{
        "jsonrpc" => "2.0",
        "id" => 7,
        "method" => "tools/call",
        "params" => %{"name" => "weather", "arguments" => %{"city" => "Oslo"}}
      },
      %{"jsonrpc" => "2.0", "method" => "notifications/progress", "params" => %{}},
      %{
        "jsonrpc" => "2.0",
        "id" => "8",
        "method" => "tools/call",
        "params" => %{"name" => "weather", "arguments" => %{"city" => "Nowhere"}}
      }
    ]

    {calls, results} = run(:mcp, requests)
    assert Enum.map(calls, & &1.id) == [7, "8"]
    assert [ok, err] = Result.to_message(:mcp, results)
    assert %{"jsonrpc" => "2.0", "id" => 7, "result" => %{"isError" => false} = r} = ok
    assert r["structuredContent"] == %{"celsius" => 21.5}
    assert [%{"type" => "text", "text" => text}] = r["content"]
    assert JSON.decode!(text) == %{"celsius" => 21.5}

    assert %{
             "id" => "8",
             "result" => %{"isError" => true, "content" => [%{"text" => "no such city: Nowhere"}]}
           } = err

    assert {:ok, [%{id: 1}]} =
             Calls.from_response(:mcp, %{
               "id" => 1,
               "method" => "tools/call",
               "params" => %{"name" => "echo"}
             })
  end

  test "large results are capped as the runner caps them" do
    big = %Result{id: "c", name: "echo", content: String.duplicate("é", 100_000)}
    [msg] = Result.to_message(:openai, [big])
    assert byte_size(msg["content"]) < 100_100
    assert msg["content"] =~ "[output truncated: 100000 more bytes]"
    [small] = Result.to_message(:openai, [big], max_output: 10)
    assert small["content"] == "ééééé\n…[output truncated: 199990 more bytes]"
  end

  test "bodies that are not the format's response are errors, never crashes" do
    for {format, body} <- [
          openai: "{",
          openai: %{"id" => "x"},
          openai: %{
            "choices" => [
              %{"message" => %{"role" => "assistant", "tool_calls" => [%{"type" => "function"}]}}
            ]
          },
          openai_responses: %{"output" => [%{"type" => "function_call"}]},
          anthropic: %{"content" => "text"},
          anthropic: 42,
          gemini: %{"candidates" => [%{"content" => %{"parts" => [%{"functionCall" => %{}}]}}]},
          mcp: %{"jsonrpc" => "2.0"}
        ] do
      assert {:error, message} = Calls.from_response(format, body)
      assert message =~ "#{format} response"
      assert_raise ArgumentError, fn -> Calls.from_response!(format, body) end
    end

    assert_raise ArgumentError, ~r/unknown format :cohere/, fn ->
      Calls.from_response(:cohere, %{})
    end

    assert_raise ArgumentError, ~r/max_outptu/, fn ->
      Result.to_message(:openai, [], max_outptu: 1)
    end
  end

  defp call_openai(id, name, args),
    do: %{"id" => id, "type" => "function", "function" => %{"name" => name, "arguments" => args}}
end
