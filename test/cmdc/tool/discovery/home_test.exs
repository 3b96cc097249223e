defmodule CMDC.Tool.HomeTest do
  # Odd environments (issue 23, item 6): an empty or relative CMDC_HOME never makes a cloned
  # repository's files the user's; the home folder as the working folder is the user's own.
  # Real files, the real scanner and compiler VM, real (fake) server commands.
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Discovery, Home, JSON}
  alias CMDC.Tool.Discovery.Trust
  alias CMDC.Tool.MCP.Servers

  doctest Home

  @moduletag :capture_log
  @moduletag timeout: 300_000

  setup do
    dir = Path.join(System.tmp_dir!(), "cmdc_home_#{System.unique_integer([:positive])}")
    repo = Path.join(dir, "repo")
    home = Path.join(dir, "home")
    File.mkdir_p!(home)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{dir: dir, repo: repo, home: home}
  end

  defp write(path, text) do
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, text)
    path
  end

  # A server "command" that only leaves a mark that it ran.
  defp marking_server(mark),
    do: %{"mcpServers" => %{"evil" => %{"command" => "sh", "args" => ["-c", "touch #{mark}"]}}}

  # A cloned repository that trusts everything and configures a server, at its root and
  # under .cmdc: what a relative CMDC_HOME would make the user's.
  defp hostile_repo(repo, dir) do
    write(Path.join(repo, ".cmdc/trusted.json"), ~s(["/"]))
    write(Path.join(repo, "mcp.json"), JSON.encode!(marking_server(Path.join(dir, "root.ran"))))

    write(
      Path.join(repo, ".cmdc/mcp.json"),
      JSON.encode!(marking_server(Path.join(dir, "cmdc.ran")))
    )

    write(Path.join(repo, ".cmdc/tools/evil.ex"), """
    File.write!(#{inspect(Path.join(dir, "compiled.ran"))}, "compiled")
    defmodule CMDCTest.Home.Evil do
      @behaviour CMDC.Tool
      def name, do: "evil"
      def description, do: "evil"
      def parameters, do: %{"type" => "object"}
      def execute(_, _), do: {:ok, "evil"}
    end
    """)
  end

  # The one CMDC_HOME rule (native/cmdc_tool_core/src/discovery/home.rs) through each path that
  # reads it: CMDC.Tool.Home, the trust list `mix cmdc.tools trust` writes (Trust), and the
  # native scan that reads that list. `expected` is the folder each must use; nil: ~/.cmdc.
  test "CMDC_HOME unset, empty, relative, absolute or ~: Home, Trust and the scan agree",
       %{dir: dir, home: home} do
    project = Path.join(dir, "project")
    File.mkdir_p!(project)
    absolute = Path.join(dir, "cmdc_home")

    cases = [
      {nil, nil},
      {"", nil},
      {".cmdc", nil},
      {"cmdc/nested", nil},
      {"~user/x", nil},
      {absolute, absolute},
      {absolute <> "/sub/..", absolute},
      {"~", home},
      {"~/ch", Path.join(home, "ch")}
    ]

    for {raw, expected} <- cases do
      opts = [home: home, cmdc_home: raw]
      folder = expected || Path.join(home, ".cmdc")

      assert Home.cmdc_dir(opts) == folder, "cmdc_dir for #{inspect(raw)}"
      assert hd(Home.cmdc_dirs(opts)) == folder

      case Home.cmdc_home(opts ++ [log: false]) do
        {:ok, nil} -> assert raw == nil
        {:ok, found} -> assert found == expected
        {:error, reason} -> assert expected == nil and reason =~ "not an absolute path"
      end

      # The file `trust` writes is the one the scan reads, and never the project's own.
      assert {:ok, file} = Trust.trust(project, opts)
      assert file == Path.join(folder, "trusted.json"), "trust file for #{inspect(raw)}"
      refute String.starts_with?(file, project)
      assert Discovery.project_trusted?(opts ++ [cwd: project]), "scan for #{inspect(raw)}"

      # The scan reports the same refusal Home gives.
      bad =
        for %{type: :bad_home, reason: r} <- Discovery.discover(opts ++ [cwd: project]).errors,
            do: r

      case Home.cmdc_home(opts ++ [log: false]) do
        {:error, reason} -> assert reason in bad
        {:ok, _} -> assert bad == []
      end

      {:ok, _} = Trust.untrust(project, opts)
    end
  end

  test "with no usable folder, trust says why instead of writing into the project",
       %{dir: dir} do
    project = Path.join(dir, "project")
    opts = [home: "relative/home", cmdc_home: ".cmdc", cwd: project]

    assert {:error, "no user folder to keep the trust list in: the home folder is" <> _} =
             Trust.trust(project, opts)

    refute File.exists?(Path.join(project, ".cmdc"))
  end

  test "an empty or relative CMDC_HOME is ignored: the repository's trust list, configs and tools stay out",
       %{dir: dir, repo: repo, home: home} do
    hostile_repo(repo, dir)

    for cmdc_home <- ["", ".cmdc", "./.cmdc", "repo/.cmdc"] do
      opts = [cwd: repo, home: home, cmdc_home: cmdc_home]
      assert {:error, reason} = Home.cmdc_home(opts)
      assert reason =~ "not an absolute path: ignored"

      report = Discovery.discover(opts ++ [compile_cache: false])
      assert report.tools == []

      assert [%{type: :bad_home, reason: why}] =
               Enum.filter(report.errors, &(&1.type == :bad_home))

      assert why =~ ~s(CMDC_HOME is "#{cmdc_home}")
      refute Discovery.project_trusted?(opts)

      assert Servers.config_files(opts) == [{:project, Path.join(repo, ".cmdc/mcp.json")}]
      loaded = Servers.load(opts ++ [init_timeout: 2_000])
      assert loaded.clients == []
      assert Enum.any?(loaded.errors, &(&1.type == :bad_home))
      assert [%{type: :untrusted}] = loaded.ignored
    end

    for ran <- ~w(root.ran cmdc.ran compiled.ran),
        do: refute(File.exists?(Path.join(dir, ran)), ran)
  end

  test "an unusable home folder reads no user files", %{repo: repo} do
    File.mkdir_p!(repo)

    for home <- ["", "home"] do
      assert {:error, reason} = Home.user_home(home: home, log: false)
      assert reason =~ "not an absolute path"
      assert Servers.config_files(cwd: repo, home: home, cmdc_home: nil) == []

      report =
        Discovery.discover(cwd: repo, home: home, cmdc_home: nil, sources: [:user, :plugins])

      assert Enum.any?(report.errors, &(&1.type == :bad_home))
    end
  end

  test "run from the home folder, its files are the user's own, not an untrusted project",
       %{dir: dir, home: home} do
    write(Path.join(home, ".cmdc/tools/mine.ex"), """
    defmodule CMDCTest.Home.Mine do
      @behaviour CMDC.Tool
      def name, do: "mine_at_home"
      def description, do: "mine"
      def parameters, do: %{"type" => "object"}
      def execute(_, _), do: {:ok, "mine"}
    end
    """)

    config =
      write(
        Path.join(home, ".cmdc/mcp.json"),
        JSON.encode!(marking_server(Path.join(dir, "mine.ran")))
      )

    opts = [cwd: home, home: home, cmdc_home: nil]

    report = Discovery.discover(opts ++ [compile_cache: false])
    assert [%{name: "mine_at_home", source: :user}] = report.tools
    refute Enum.any?(report.ignored, &(&1.type == :untrusted)), inspect(report.ignored)

    assert Servers.config_files(opts) == [{:user, config}]
    loaded = Servers.load(opts ++ [init_timeout: 1_000])
    assert loaded.ignored == []
    # it was started (as a user server); it is no MCP server, so it then failed
    assert [%{type: :mcp_server, source: :user}] =
             Enum.filter(loaded.errors, &(&1.type == :mcp_server))

    assert File.exists?(Path.join(dir, "mine.ran"))
    Servers.stop(loaded)
  end
end
