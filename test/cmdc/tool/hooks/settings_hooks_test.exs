defmodule CMDC.Tool.Hooks.SettingsHooksTest do
  # The runner applies the settings files' command hooks by itself (issue 40, item 1): read once,
  # read again when a file or the trust list changes, off with `settings_hooks: false`. The
  # default (the VM's current directory, no option) runs in a generated app:
  # test/cmdc/tool/cli/new_user_test.exs.
  use ExUnit.Case, async: true

  @moduletag :capture_log

  import CMDC.Tool.Eventually
  import ExUnit.CaptureLog

  alias CMDC.Tool.Hooks.Settings
  alias CMDC.Tool.{JSON, Runner}
  alias CMDC.Tool.Examples.Echo

  doctest Settings

  setup do
    root = Path.join(System.tmp_dir!(), "cmdc_settings_#{System.unique_integer([:positive])}")
    project = Path.join(root, "project")
    home = Path.join(root, "home")
    File.mkdir_p!(Path.join(project, ".claude"))
    File.mkdir_p!(Path.join(home, ".cmdc"))
    on_exit(fn -> File.rm_rf!(root) end)
    %{project: project, home: home, opts: [cwd: project, home: home, cmdc_home: nil]}
  end

  defp settings!(dir, hooks, file \\ ".claude/settings.json") do
    File.write!(Path.join(dir, file), JSON.encode!(%{"hooks" => hooks}))
  end

  defp deny_echo(reason),
    do: %{
      "PreToolUse" => [
        %{
          "matcher" => "echo",
          "hooks" => [%{"type" => "command", "command" => "echo '#{reason}' >&2; exit 2"}]
        }
      ]
    }

  defp trust!(ctx),
    do:
      File.write!(
        Path.join(ctx.home, ".cmdc/trusted.json"),
        JSON.encode!(%{"trusted" => [ctx.project]})
      )

  defp echo(opts) do
    call = %{id: "c1", name: "echo", arguments: %{"text" => "hi"}}
    Runner.run([Echo], call, %CMDC.Context{}, settings_hooks: opts)
  end

  # Reading again happens on a call at least a second after the last check: call until
  # `done?` holds for the answer (`eventually/2`), never sleep a fixed time.
  defp until(fun, done?) do
    eventually(
      fn ->
        result = fun.()
        done?.(result) && result
      end,
      message: "the settings change never applied"
    )
  end

  test "a trusted project's settings hook guards runner calls with no hooks option", ctx do
    settings!(ctx.project, deny_echo("no echo here"))
    trust!(ctx)

    result = echo(ctx.opts)
    assert result.reason == :denied
    assert result.content =~ "no echo here"

    # Untrusted: the hook is not active, the call runs, and the log says so once.
    File.rm!(Path.join(ctx.home, ".cmdc/trusted.json"))

    log =
      capture_log(fn ->
        assert %{content: "hi"} = until(fn -> echo(ctx.opts) end, &(not &1.is_error))
        assert %{content: "hi"} = echo(ctx.opts)
      end)

    assert [_] = Regex.scan(~r/hook\(s\) of .+settings\.json are not active/, log)
    assert log =~ "the project #{ctx.project} is not trusted"
  end

  test "an edited settings file is read again; an unchanged one is read once", ctx do
    settings!(ctx.project, deny_echo("first rule"))
    trust!(ctx)
    assert echo(ctx.opts).content =~ "first rule"

    # Reading is observable: the files are read by `Config.load/1`, traced here in every new
    # process (the runner runs a call in one), for this test's project only.
    :erlang.trace_pattern({CMDC.Tool.Hooks.Config, :load, 1}, true, [:local])
    :erlang.trace(:new_processes, true, [:call, {:tracer, self()}])
    on_exit(fn -> :erlang.trace(:new_processes, false, [:call]) end)

    for _ <- 1..20, do: assert(echo(ctx.opts).content =~ "first rule")
    refute read?(ctx)

    settings!(ctx.project, deny_echo("second rule"))
    assert until(fn -> echo(ctx.opts) end, &(&1.content =~ "second rule")).reason == :denied
    assert read?(ctx)

    # A file that breaks is reported once, and the other files' hooks still apply.
    File.write!(Path.join(ctx.project, ".claude/settings.local.json"), "{not json")

    log =
      capture_log(fn ->
        until(fn -> echo(ctx.opts) end, fn _ -> read?(ctx) end)
        for _ <- 1..5, do: assert(echo(ctx.opts).content =~ "second rule")
      end)

    assert [_] = Regex.scan(~r/settings\.local\.json: not valid JSON/, log)
  end

  defp read?(ctx) do
    receive do
      {:trace, _, :call, {CMDC.Tool.Hooks.Config, :load, [opts]}} ->
        if opts[:cwd] == ctx.project, do: true, else: read?(ctx)
    after
      0 -> false
    end
  end

  test "settings_hooks: false runs unguarded; a bad value or name is refused", ctx do
    settings!(ctx.project, deny_echo("guarded"))
    trust!(ctx)
    assert echo(ctx.opts).reason == :denied
    assert %{is_error: false, content: "hi"} = echo(false)

    assert %{is_error: true, reason: :denied, content: "invalid :settings_hooks option: 1" <> _} =
             echo(1)

    call = %{id: "c1", name: "echo", arguments: %{"text" => "hi"}}

    assert_raise ArgumentError, ~r/did you mean :settings_hooks/, fn ->
      Runner.run([Echo], call, %CMDC.Context{}, settings_hookz: false)
    end
  end
end

defmodule CMDC.Tool.Hooks.SettingsConfigTest do
  # `config :cmdc_tool, settings_hooks: false` (the app's opt-out) turns the runner's default
  # off; `settings_hooks: true` on a call applies them all the same. Not async: it sets the
  # application's environment.
  use ExUnit.Case, async: false

  alias CMDC.Tool.Hooks.Settings

  setup do
    previous = Application.fetch_env(:cmdc_tool, :settings_hooks)

    on_exit(fn ->
      case previous do
        {:ok, value} -> Application.put_env(:cmdc_tool, :settings_hooks, value)
        :error -> Application.delete_env(:cmdc_tool, :settings_hooks)
      end
    end)
  end

  test "the config turns the default off, not an explicit true" do
    assert Settings.enabled?()
    {:ok, default} = Settings.for_run(nil)
    assert {:ok, ^default} = Settings.for_run(true)

    Application.put_env(:cmdc_tool, :settings_hooks, false)
    refute Settings.enabled?()
    assert Settings.for_run(nil) == {:ok, []}
    assert {:ok, ^default} = Settings.for_run(true)
  end
end
