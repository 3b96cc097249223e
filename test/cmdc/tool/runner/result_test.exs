defmodule CMDC.Tool.ResultTest do
  # What the model reads is always valid UTF-8, cut on a character boundary, and says what was
  # replaced or cut.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Result, Runner}

  @replacement "\uFFFD"
  # Pieces of valid characters, surrogates (0xED 0xA0), overlong leads (0xC0), never-valid bytes.
  @bytes [?a, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0xED, 0xA0, 0xC0, 0xFF, 0x80]

  # 160 KB of text with one invalid byte near the start (it took 21 s and lost everything after
  # the byte before the runner cut in linear time).
  @bad_early :binary.copy("a", 10) <> <<0xFF>> <> :binary.copy("é", 80_000)

  defmodule Texts do
    use CMDC.Tool.TestTool, name: "texts"

    def execute(%{"which" => "bad_early"}, _), do: {:ok, CMDC.Tool.ResultTest.bad_early()}
    def execute(%{"which" => "bad_small"}, _), do: {:ok, <<"caf", 0xE9, " au lait">>}
    def execute(%{"which" => "bad_error"}, _), do: {:error, <<"no ", 0xC0, 0x80, "pe">>}
    def execute(%{"which" => "bad_raise"}, _), do: raise(<<"boom ", 0xFF>>)
  end

  @doc false
  def bad_early, do: @bad_early

  defp run(which, opts \\ []) do
    call = %{id: "c1", name: "texts", arguments: %{"which" => which}}
    # A bound on the wait, so the quadratic cut of old fails instead of hanging the suite.
    Runner.run([Texts], call, CMDC.Context.new(), Keyword.put_new(opts, :await_timeout, 10_000))
  end

  test "a long result with an invalid byte keeps everything after it, replaced and noted" do
    %{content: text, is_error: false} = run("bad_early")
    assert String.valid?(text)
    assert String.starts_with?(text, :binary.copy("a", 10) <> @replacement <> "éé")
    assert text =~ "[1 invalid UTF-8 byte replaced with U+FFFD]"
    # 100,000 bytes of the tool's text are kept: 10 + 1 + 49,994 characters "é" (2 bytes).
    assert text =~ "[output truncated: #{byte_size(@bad_early) - 99_999} more bytes]"
    [kept | _] = String.split(text, "\n…[")
    assert byte_size(kept) == 10 + 3 + 49_994 * 2
  end

  test "invalid UTF-8 below max_output is replaced too, in every kind of result" do
    assert %{content: "caf" <> @replacement <> " au lait\n…[1 invalid UTF-8 byte replaced" <> _} =
             run("bad_small")

    assert %{is_error: true, reason: :tool_error, content: error} = run("bad_error")
    assert error =~ "no #{@replacement}#{@replacement}pe"
    assert error =~ "[2 invalid UTF-8 bytes replaced with U+FFFD]"

    ExUnit.CaptureLog.capture_log(fn ->
      assert %{is_error: true, reason: :crashed, content: crash} = run("bad_raise")
      assert String.valid?(crash) and crash =~ "boom #{@replacement}"
    end)
  end

  test "cuts never split a character, whatever the limit" do
    text = "aé€😀" |> String.duplicate(50)

    for max <- 0..(byte_size(text) + 1) do
      fitted = Result.fit_text(text, max)
      assert String.valid?(fitted)
      [kept | _] = String.split(fitted, "\n…[")
      assert String.starts_with?(text, kept)
      assert byte_size(kept) <= max and byte_size(kept) > max - 4
    end
  end

  test "any bytes come out as valid UTF-8; valid text within the limit unchanged" do
    for seed <- 1..300 do
      :rand.seed(:exsss, {seed, 7, 11})
      size = :rand.uniform(400)

      bytes =
        for _ <- 1..size,
            into: <<>>,
            do: <<Enum.random(@bytes)>>

      max = :rand.uniform(500)
      fitted = Result.fit_text(bytes, max)
      assert String.valid?(fitted), "seed #{seed}"

      if String.valid?(bytes) and byte_size(bytes) <= max, do: assert(fitted == bytes)
    end
  end

  test "non-text results pass through" do
    assert Result.fit(%Result{effect: {:x, <<0xFF>>}}, 1) == %Result{effect: {:x, <<0xFF>>}}
  end
end
