defmodule CMDC.Tool.Test do
  @moduledoc """
  Helpers for your ExUnit tests of tools: call a tool by name the way a model does, and check
  that its schema converts to every provider's format without a change of meaning.

      defmodule MyAgent.Tools.WeatherTest do
        use ExUnit.Case, async: true
        import CMDC.Tool.Test

        alias MyAgent.Tools.Weather

        test "a valid call runs" do
          assert %{is_error: false, content: "Oslo: " <> _} = call([Weather], "get_weather", %{"city" => "Oslo"})
        end

        test "an invalid call gets a message the model can act on" do
          assert %{reason: :invalid, content: content} = call([Weather], "get_weather", %{})
          assert content =~ ~s("city" is a required property)
        end

        test "every provider takes the schema as written" do
          assert %{openai_strict: [_], gemini: [_]} = schemas!([Weather])
        end
      end

  `call/4` goes through `CMDC.Tool.Runner`, so the test sees what the model would: arguments
  validated against the schema (atom keys become strings), the tool's policy, its time-out,
  and its result as a `CMDC.Tool.Result`. Hooks of the settings files are not applied (a test
  does not depend on the machine's `~/.claude/settings.json`) unless `settings_hooks:` says so.

  `mix cmdc.gen.tool` writes a test using these helpers next to each tool it generates.

  ## Errors

  `call/4` never raises for a failing call: the result says why (`is_error: true`, `reason`).
  `call!/4` raises `CMDC.Tool.Test.Error` for one. `schemas!/2` raises `CMDC.Tool.Test.Error`
  naming the format and every schema part whose meaning the conversion changes. Unknown options
  raise `ArgumentError`.
  """

  alias CMDC.Tool.{Providers, Result, Runner}
  alias CMDC.Tool.Providers.Warnings

  defmodule Error do
    @moduledoc "A tool call that failed (`CMDC.Tool.Test.call!/4`) or a schema a format changes."
    defexception [:message]
  end

  @call_options [:context | Runner.options()]

  @doc """
  Calls the tool `name` of `tools` (modules or a `CMDC.Tool.Registry`) with `args` (a map, or
  JSON text as a model sends it) through `CMDC.Tool.Runner`, and returns the
  `CMDC.Tool.Result`.

  Options: `:context` (a `CMDC.Context`, default one whose `working_dir` is the current
  directory) and those of `CMDC.Tool.Runner.run/4` (`:settings_hooks` defaults to `false`).

      iex> result = CMDC.Tool.Test.call([CMDC.Tool.Examples.Echo], "echo", %{text: "hi"})
      iex> {result.is_error, result.content}
      {false, "hi"}
      iex> CMDC.Tool.Test.call([CMDC.Tool.Examples.Echo], "echo", %{}).reason
      :invalid
  """
  @spec call(term(), String.t(), map() | String.t(), keyword()) :: Result.t()
  def call(tools, name, args \\ %{}, opts \\ []) do
    CMDC.Tool.Options.check!(opts, @call_options, "CMDC.Tool.Test.call/4")
    {context, opts} = Keyword.pop_lazy(opts, :context, &context/0)
    opts = Keyword.put_new(opts, :settings_hooks, false)
    Runner.run(tools, %{id: "test-call", name: name, arguments: args}, context, opts)
  end

  @doc """
  `call/4`, answering the content of a successful result, raising `CMDC.Tool.Test.Error` with
  the model's message for a failed one.

      iex> CMDC.Tool.Test.call!([CMDC.Tool.Examples.Echo], "echo", ~s({"text": "hi"}))
      "hi"
  """
  @spec call!(term(), String.t(), map() | String.t(), keyword()) :: term()
  def call!(tools, name, args \\ %{}, opts \\ []) do
    case call(tools, name, args, opts) do
      %Result{is_error: false, content: content} ->
        content

      %Result{reason: reason, content: content} ->
        raise Error, "#{name} failed (#{inspect(reason)}): #{content}"
    end
  end

  @doc """
  Converts `tools` to every provider format (`CMDC.Tool.Providers.formats/0`) and OpenAI's
  strict mode — what `mix cmdc.tools doctor` checks — and answers `%{label => tools list}`;
  raises `CMDC.Tool.Test.Error` naming the format and each schema part whose meaning it changes
  (`CMDC.Tool.Providers.Warnings.notable/2`, as `warnings: :raise` would). Option `:formats`
  picks the labels, among them also `:openai_responses_strict` and `:anthropic_strict`.

      iex> schemas = CMDC.Tool.Test.schemas!([CMDC.Tool.Examples.Echo], formats: [:mcp, :gemini])
      iex> hd(schemas.mcp)["name"]
      "echo"
      iex> CMDC.Tool.Test.schemas!([CMDC.Tool.Examples.Echo])
      ** (CMDC.Tool.Test.Error) openai_strict: the tools list changes what 1 schema part(s) mean:
      echo: `additionalProperties` at the root closed: the object is open (it takes keys it does not list) and strict mode closes every object, so a call with another key is refused (OpenAI strict mode); the result accepts less than the original
  """
  @spec schemas!(term(), keyword()) :: %{atom() => [map()]}
  def schemas!(tools, opts \\ []) do
    CMDC.Tool.Options.check!(opts, [:formats], "CMDC.Tool.Test.schemas!/2")
    variants = variants()
    labels = Keyword.get_lazy(opts, :formats, fn -> Providers.formats() ++ [:openai_strict] end)

    case Enum.reject(labels, &Map.has_key?(variants, &1)) do
      [] ->
        Map.new(labels, &{&1, convert!(tools, &1, Map.fetch!(variants, &1))})

      unknown ->
        raise ArgumentError,
              "unknown formats #{inspect(unknown)}; known: #{inspect(Enum.sort(Map.keys(variants)))}"
    end
  end

  defp convert!(tools, label, opts) do
    {list, warnings} = Providers.convert(tools, %{}, opts)

    modules =
      if is_struct(tools, CMDC.Tool.Registry), do: CMDC.Tool.Registry.list(tools), else: tools

    case Warnings.notable(warnings, modules) do
      [] ->
        list

      notable ->
        raise Error,
              "#{label}: the tools list changes what #{length(notable)} schema part(s) mean:\n" <>
                Providers.format_warnings(notable)
    end
  end

  # Every format, and strict mode where a provider has one.
  defp variants do
    plain = Map.new(Providers.formats(), &{&1, [format: &1]})

    strict =
      for f <- [:openai, :openai_responses, :anthropic],
          into: %{},
          do: {:"#{f}_strict", [format: f, strict: true]}

    Map.merge(plain, strict)
  end

  defp context, do: CMDC.Context.new(session_id: "test", working_dir: File.cwd!())
end
