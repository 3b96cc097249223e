defmodule CMDC.Tool.ScriptCacheTest do
  # The {name}.tool.json cache, edits and reloads, interpreters, PowerShell. Some tests change
  # PATH (to prove that no interpreter runs), so this module is not async.
  use ExUnit.Case, async: false
  import CMDC.Tool.ScriptCase
  import CMDC.Tool.Eventually

  alias CMDC.Tool.Script

  @v1 ~S'''
  """Version one."""


  def version() -> str:
      """Which version runs."""
      return "v1"
  '''

  @v2 ~S'''
  """Version two."""


  def version(tag: str = "x") -> str:
      """Which version runs, now with a tag."""
      return "v2 " + tag


  def added() -> int:
      return 2
  '''

  defp without_path(fun) do
    path = System.get_env("PATH")
    System.put_env("PATH", "")

    try do
      fun.()
    after
      System.put_env("PATH", path)
    end
  end

  defp bump_mtime(path, seconds) do
    File.touch!(path, System.os_time(:second) + seconds)
  end

  test "cache miss writes {name}.tool.json; a hit runs no interpreter; corrupt is rebuilt" do
    dir = tmp_dir("cache")
    path = write!(dir, "cached.py", @v1)
    cache = Path.join(dir, "cached.tool.json")

    assert {:ok, %{status: :parsed, tools: [mod]}} = Script.load(path)
    assert File.exists?(cache)
    doc = CMDC.Tool.JSON.decode!(File.read!(cache))
    assert doc["type"] == "PythonModule"
    assert doc["name"] == "cached"
    assert doc["scriptPath"] == "cached.py"
    assert doc["rulePrompt"] == "Version one."

    assert doc["defaultPermissions"] == %{
             "executionPolicy" => "ask-once",
             "resultApprovalPolicy" => "never"
           }

    assert [%{"type" => "function", "function" => %{"name" => "version"}, "permissions" => _}] =
             doc["tools"]

    # a hit: no Python on PATH, no configured interpreter, and it still loads
    without_path(fn ->
      assert {:ok, %{status: :cached, tools: [^mod], rule_prompt: "Version one."}} =
               Script.load(path, python: "/nonexistent/python3")
    end)

    # broken caches are rebuilt, never trusted
    for broken <- [
          "{\"type\": \"PythonModule\",",
          "[]",
          ~s({"type":"PythonModule","name":"cached"}),
          ""
        ] do
      File.write!(cache, broken)
      bump_mtime(cache, 10)
      assert {:ok, %{status: :rebuilt, tools: [_]}} = Script.load(path)
      assert {:ok, _} = CMDC.Tool.JSON.decode(File.read!(cache))
    end

    # cache: false neither reads nor writes it
    File.rm!(cache)
    assert {:ok, %{status: :parsed}} = Script.load(path, cache: false)
    refute File.exists?(cache)
  end

  test "the seeds' own cache files (no tag of ours) are never the script's word, even when newer" do
    dir = tmp_dir("seedcache")
    path = write!(dir, "seed.py", "def real():\n    pass\n")

    File.write!(Path.join(dir, "seed.tool.json"), ~S'''
    {"type": "PythonModule", "name": "seed", "scriptPath": "seed.py",
     "tools": [{"type": "function", "function": {"name": "from_cache", "description": "Cached.",
       "parameters": {"type": "object", "properties": {}}}}],
     "rulePrompt": "From the cache.", "defaultPermissions": {"executionPolicy": "auto"}}
    ''')

    bump_mtime(Path.join(dir, "seed.tool.json"), 10)

    assert {:ok, %{status: :rebuilt, tools: [mod], rule_prompt: "", warnings: [warning]}} =
             Script.load(path)

    assert mod.name() == "real"
    # the cache's looser default (auto) is not taken: the script says nothing, so ask once
    assert mod.__tool_settings__().policy == :ask_once
    assert warning =~ ~s(lists a tool "from_cache" that the script does not define; not offered)
    # rewritten as ours: the next load is a hit
    assert {:ok, %{status: :cached, tools: [^mod]}} = Script.load(path)
  end

  test "editing a script: load re-reads it, calls run the new code, schemas follow" do
    dir = tmp_dir("edit")
    path = write!(dir, "edit.py", @v1)
    {group, %{"version" => version}} = load!(path)
    assert group.status == :parsed
    assert {:ok, "v1"} = version.execute(%{}, %CMDC.Context{})
    assert {:ok, %{worker: w1}} = Script.call(version, %{})
    assert {:error, _} = CMDC.Tool.validate(version, %{"tag" => "t"})

    File.write!(path, @v2)
    bump_mtime(path, 5)

    # the warm worker is replaced on the next call, even before a reload
    assert {:ok, %{value: "v2 x", worker: w2}} = Script.call(version, %{})
    assert w2 != w1

    {group2, tools} = load!(path)
    assert group2.status == :stale
    assert group2.rule_prompt == "Version two."
    assert Map.keys(tools) == ["added", "version"]
    # same module, new description and schema (its MD5 changed, so validation recompiled)
    assert tools["version"] == version
    assert version.description() == "Which version runs, now with a tag."
    assert {:ok, _} = CMDC.Tool.validate(version, %{"tag" => "t"})
    assert {:ok, "v2 t"} = version.execute(%{"tag" => "t"}, %CMDC.Context{})

    # loading again: a cache hit with the same modules
    assert {:ok, %{status: :cached, tools: mods}} = Script.load(path)
    assert Enum.sort(mods) == Enum.sort(Map.values(tools))

    # a function removed from the script loses its module
    File.write!(path, @v1)
    bump_mtime(path, 10)
    assert {:ok, %{status: :stale, tools: [^version]}} = Script.load(path)
    refute :erlang.module_loaded(tools["added"])

    Script.unload([version])
    refute :erlang.module_loaded(version)
  end

  test "no interpreter anywhere: a clear error naming the fix" do
    dir = tmp_dir("nointerp")
    path = write!(dir, "lonely.py", "def f():\n    pass\n")

    without_path(fn ->
      assert {:error, message} = Script.load(path, cache: false)
      assert message =~ "no Python interpreter found"
      assert message =~ "python: \"/path/to/python3\""
    end)

    # with a configured interpreter and nothing on PATH, that one runs
    # the real interpreter (a pyenv shim on PATH would itself need PATH)
    {python, 0} = System.cmd("python3", ["-c", "import sys; print(sys.executable)"])
    python = String.trim(python)

    without_path(fn ->
      assert {:ok, %{tools: [f]}} = Script.load(path, cache: false, python: python)
      assert {:ok, %{value: nil}} = Script.call(f, %{})
    end)
  end

  test "workers can be listed and stopped" do
    dir = tmp_dir("stop")
    path = write!(dir, "stop.py", "import os\n\ndef pid():\n    return os.getpid()\n")
    {_, %{"pid" => pid}} = load!(path)
    assert {:ok, %{value: os_pid}} = Script.call(pid, %{})
    assert {^path, [^os_pid]} = List.keyfind(Script.workers(), path, 0)
    assert Script.stop(path) == 1
    eventually(fn -> not alive?(os_pid) end)
    assert {:ok, %{value: other}} = Script.call(pid, %{})
    assert other != os_pid
  end

  test "workers idle longer than :idle_timeout are stopped" do
    dir = tmp_dir("idle")
    path = write!(dir, "idle.py", "import os\n\ndef pid():\n    return os.getpid()\n")
    {_, %{"pid" => pid}} = load!(path, idle_timeout: 300)
    assert {:ok, %{value: os_pid}} = Script.call(pid, %{})
    eventually(fn -> not alive?(os_pid) end)
    assert {^path, []} = List.keyfind(Script.workers(), path, 0)
    assert {:ok, %{value: other}} = Script.call(pid, %{})
    assert other != os_pid
  end

  @ps1 ~S'''
  <#
  .SYNOPSIS
      Windows helpers.
  # TOOL_CONFIG: {"resultApprovalPolicy": "on-error"}
  #>

  function Get-Greeting {
      <#
      .SYNOPSIS
          Greets someone.
      .PARAMETER Name
          Who to greet.
      .PARAMETER Times
          How often.
      #>
      param(
          [Parameter(Mandatory = $true)][string]$Name,
          [ValidateSet('plain', 'loud')][string]$Style = 'plain',
          [int]$Times = 1,
          [switch]$Wave
      )
      "Hello, $Name"
  }

  # TOOL_CONFIG: {"executionPolicy": "ask-always"}
  function Remove-Things {
      param([Parameter(Mandatory)][string[]]$Paths)
  }

  function Format-Get-Greeting($result, $params) { "$result!" }
  '''

  test "PowerShell scripts are read natively, without pwsh, and cached" do
    dir = tmp_dir("ps")
    path = write!(dir, "win.ps1", @ps1)

    assert {:ok, group} = Script.load(path)
    assert group.kind == :powershell
    assert group.status == :parsed
    assert group.rule_prompt == "Windows helpers."
    tools = Map.new(group.tools, &{&1.name(), &1})
    assert Map.keys(tools) == ["Get-Greeting", "Remove-Things"]
    g = tools["Get-Greeting"]
    assert g.description() == "Greets someone."

    assert g.parameters() == %{
             "type" => "object",
             "additionalProperties" => false,
             "required" => ["Name"],
             "properties" => %{
               "Name" => %{"type" => "string", "description" => "Who to greet."},
               "Style" => %{"type" => "string", "enum" => ["plain", "loud"], "default" => "plain"},
               "Times" => %{"type" => "integer", "default" => 1, "description" => "How often."},
               "Wave" => %{"type" => "boolean", "default" => false}
             }
           }

    assert g.__tool_settings__() == %{policy: :ask_once, result_approval: :on_error, format: true}

    assert tools["Remove-Things"].__tool_settings__().policy == :ask_always

    assert tools["Remove-Things"].parameters()["properties"]["Paths"] == %{
             "type" => "array",
             "items" => %{"type" => "string"}
           }

    assert CMDC.Tool.JSON.decode!(File.read!(Path.join(dir, "win.tool.json")))["type"] ==
             "PowerShellModule"

    assert {:ok, %{status: :cached}} = Script.load(path)
  end

  @pwsh_present if System.find_executable("pwsh"),
                  do: [skip: "pwsh is installed here, so the missing-pwsh error cannot occur"],
                  else: []

  @tag @pwsh_present
  test "without pwsh on PATH a PowerShell call returns a clear error" do
    dir = tmp_dir("nopwsh")
    {_, %{"Get-Greeting" => g}} = load!(write!(dir, "win.ps1", @ps1))

    assert {:error, %{kind: "pwsh_missing", message: message}} =
             Script.call(g, %{"Name" => "Ada"})

    assert message =~ "needs `pwsh`"
    assert {:error, ^message} = g.execute(%{"Name" => "Ada"}, %CMDC.Context{})
  end

  @pwsh_missing if System.find_executable("pwsh"),
                  do: [],
                  else: [
                    skip:
                      "pwsh is not installed: PowerShell tools are parsed natively, but " <>
                        "running them needs pwsh on PATH (it cannot be installed on this machine)"
                  ]

  if @pwsh_missing != [] do
    IO.puts("\n[skip] #{inspect(__MODULE__)}: #{@pwsh_missing[:skip]}")
  end

  @tag @pwsh_missing
  test "PowerShell tools run through pwsh, with their formatter" do
    dir = tmp_dir("pwsh")
    {_, %{"Get-Greeting" => g}} = load!(write!(dir, "win.ps1", @ps1))
    assert {:ok, "Hello, Ada!"} = g.execute(%{"Name" => "Ada"}, %CMDC.Context{})
  end
end
