defmodule CMDC.Tool.ProviderCallsTest do
  # The round trip of every format, with the providers' own Python packages on both ends, in
  # one Python process (provider_calls.py): to_schema → a response naming those tools, built
  # with the package's response type → from_response → run_many → to_message → validated by
  # the package's types for the next request.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Calls, JSON, ProviderCheck, Result, Runner}
  alias CMDC.Tool.CallsTools.{Spawn, Weather}
  alias CMDC.Tool.Examples.Echo

  @moduletag timeout: 600_000
  @script Path.expand("../../../support/provider_calls.py", __DIR__)
  @tools [Echo, Weather, Spawn]
  @formats [:openai, :openai_responses, :anthropic, :gemini, :gemini_json_schema, :mcp]

  test "every format round-trips through the providers' own packages" do
    case ProviderCheck.python() do
      {:ok, python} ->
        port = open(python)

        try do
          for format <- @formats, do: round_trip(port, format)
        after
          Port.close(port)
        end

      {:skip, reason} ->
        IO.puts("\nskipped: the provider packages could not be installed: #{reason}")
    end
  end

  defp round_trip(port, format) do
    names =
      format
      |> then(&CMDC.Tool.to_schema(@tools, %{}, format: &1, warnings: :ignore))
      |> names(format)

    assert Enum.sort(names) == ~w(echo spawn weather), "#{format}: #{inspect(names)}"

    planned = planned(format)
    response = request(port, %{op: "build", format: format, calls: planned})["response"]

    assert is_binary(response),
           "#{format}: the package could not build the response: #{inspect(response)}"

    assert {:ok, calls} = Calls.from_response(format, response)
    assert Enum.map(calls, & &1.name) == Enum.map(planned, & &1.name), "#{format}"

    if format in [:gemini, :gemini_json_schema] do
      assert [id1, id2, "g-3" | _] = Enum.map(calls, & &1.id)
      assert String.starts_with?(id1, "cmdc_gemini_") and id1 != id2
      assert {:ok, ^calls} = Calls.from_response(format, response), "stable ids"
    else
      assert Enum.map(calls, & &1.id) == Enum.map(planned, & &1.id), "#{format}"
    end

    results = Runner.run_many(@tools, calls, %CMDC.Context{})
    errors = Enum.map(results, & &1.is_error)
    expected_errors = Enum.map(planned, &(&1.expect == :error))
    assert errors == expected_errors, "#{format}: #{inspect(Enum.map(results, & &1.content))}"

    message = Result.to_message(format, results)
    check = request(port, %{op: "check", format: format, message: message})
    assert check == %{"ok" => true}, "#{format}: #{inspect(check)}\n#{JSON.encode!(message)}"
    assert_marks(format, message, planned)
  end

  # The calls the model makes: one that works, a structured result, a tool error, an invalid
  # argument, an effect; for the formats that send arguments as text, text that is not JSON.
  defp planned(format) do
    text? = format in [:openai, :openai_responses]
    args = fn map -> if text?, do: JSON.encode!(map), else: map end

    base = [
      %{id: "c-1", name: "echo", arguments: args.(%{"text" => "héllo ✓"}), expect: :ok},
      %{id: "c-2", name: "weather", arguments: args.(%{"city" => "Oslo"}), expect: :ok},
      %{id: "c-3", name: "weather", arguments: args.(%{"city" => "Nowhere"}), expect: :error},
      %{id: "c-4", name: "weather", arguments: args.(%{"city" => 5}), expect: :error},
      %{id: "c-5", name: "spawn", arguments: args.(%{}), expect: :ok}
    ]

    base =
      if text?,
        do: base ++ [%{id: "c-6", name: "echo", arguments: ~s({"text": "cut), expect: :error}],
        else: base

    case format do
      # Gemini gives ids rarely: the first two calls have none, the third one does.
      f when f in [:gemini, :gemini_json_schema] ->
        base
        |> Enum.with_index()
        |> Enum.map(fn
          {call, 2} -> %{call | id: "g-3"}
          {call, i} when i < 2 -> %{call | id: nil}
          {call, _} -> call
        end)

      _ ->
        base
    end
  end

  defp assert_marks(:anthropic, %{"content" => blocks}, planned) do
    assert Enum.map(blocks, &(&1["is_error"] == true)) ==
             Enum.map(planned, &(&1.expect == :error))
  end

  defp assert_marks(:mcp, responses, planned) do
    assert Enum.map(responses, & &1["result"]["isError"]) ==
             Enum.map(planned, &(&1.expect == :error))

    assert Enum.at(responses, 1)["result"]["structuredContent"] == %{"celsius" => 21.5}
  end

  defp assert_marks(format, %{"parts" => parts}, planned)
       when format in [:gemini, :gemini_json_schema] do
    responses = Enum.map(parts, & &1["functionResponse"])

    assert Enum.map(responses, &Map.has_key?(&1["response"], "error")) ==
             Enum.map(planned, &(&1.expect == :error))

    assert Enum.map(responses, & &1["id"]) == [nil, nil, "g-3", "c-4", "c-5"]
    assert Enum.at(responses, 1)["response"] == %{"output" => %{"celsius" => 21.5}}
  end

  defp assert_marks(format, items, planned) when format in [:openai, :openai_responses] do
    key = if format == :openai, do: "tool_call_id", else: "call_id"
    assert Enum.map(items, & &1[key]) == Enum.map(planned, & &1.id)
  end

  defp names(tools, :openai), do: Enum.map(tools, & &1["function"]["name"])

  defp names(tools, f) when f in [:openai_responses, :anthropic, :mcp],
    do: Enum.map(tools, & &1["name"])

  defp names([%{"functionDeclarations" => decls}], _gemini), do: Enum.map(decls, & &1["name"])

  defp open(python) do
    Port.open({:spawn_executable, python}, [:binary, :exit_status, {:packet, 4}, args: [@script]])
  end

  defp request(port, body) do
    send(port, {self(), {:command, JSON.encode!(body)}})

    receive do
      {^port, {:data, data}} -> JSON.decode!(data)
      {^port, {:exit_status, status}} -> flunk("provider_calls.py exited with #{status}")
    end
  end
end
