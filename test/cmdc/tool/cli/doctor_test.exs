defmodule CMDC.Tool.CLI.DoctorTest do
  # `mix cmdc.tools doctor` judges script caches by the loader's own rule (content hash + the
  # user's HMAC tag), so what it calls stale is exactly what the next start re-reads.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO

  alias CMDC.Tool.CLI.Commands
  alias CMDC.Tool.Script

  @moduletag :tmp_dir
  @source "def f(x: int) -> int:\n    \"\"\"Double.\"\"\"\n    return 2 * x\n"

  setup do
    if System.find_executable("python3"),
      do: :ok,
      else: {:ok, skip: "python3 is not installed: scripts cannot be described"}
  end

  defp doctor(dir) do
    capture_io(fn -> capture_io(:stderr, fn -> Commands.doctor([dir], mcp: false) end) end)
  end

  # A script loaded once: its cache written and stamped by this user's loader.
  defp loaded_script(dir) do
    script = Path.join(dir, "t.py")
    File.write!(script, @source)
    assert {:ok, %{status: :parsed}} = Script.load(script)
    assert {:ok, %{status: :cached}} = Script.load(script)
    {script, Path.join(dir, "t.tool.json")}
  end

  defp set_mtime(path, seconds_from_now) do
    time = System.os_time(:second) + seconds_from_now
    File.touch!(path, time)
    %{mtime: mtime} = File.stat!(path, time: :posix)
    mtime
  end

  test "a cache the loader uses is no finding", %{tmp_dir: dir} do
    {script, _cache} = loaded_script(dir)
    refute doctor(dir) =~ "t.py:"
    assert [{^script, {:ok, %{status: :cached, cache: :fresh}}}] = Script.cache_status([script])
  end

  test "an edit that kept an old mtime (the cache looks newer) is stale for both", %{
    tmp_dir: dir
  } do
    {script, cache} = loaded_script(dir)
    old = set_mtime(script, -3600)
    File.write!(script, String.replace(@source, "2 * x", "3 * x"))
    # touch-free: the script's time is put back, the cache is newer than the script
    assert set_mtime(script, -3600) == old
    set_mtime(cache, 0)

    assert [{^script, {:ok, %{status: :stale, cache: :stale}}}] = Script.cache_status([script])
    assert doctor(dir) =~ "t.py: its cache t.tool.json is stale (the script changed"
    # the doctor's load rebuilt it: the loader and the doctor agree again
    assert [{^script, {:ok, %{cache: :fresh}}}] = Script.cache_status([script])
  end

  test "a forged cache (a looser policy written in, the tag left as it was) is not this " <>
         "user's, even with the newest mtime",
       %{tmp_dir: dir} do
    {script, cache} = loaded_script(dir)
    {:ok, doc} = CMDC.Tool.JSON.decode(File.read!(cache))
    forged = put_in(doc, ["defaultPermissions"], %{"executionPolicy" => "auto"})
    File.write!(cache, CMDC.Tool.JSON.encode!(forged))
    set_mtime(script, -3600)
    set_mtime(cache, 0)

    assert [{^script, {:ok, %{status: :rebuilt, cache: :untrusted, detail: detail}}}] =
             Script.cache_status([script])

    assert detail =~ "not this user's"
    out = doctor(dir)
    assert out =~ "t.py: its cache t.tool.json is not this user's ("
    assert out =~ "it will be rebuilt"

    # the loader's own verdict on the same forged file
    File.write!(cache, CMDC.Tool.JSON.encode!(forged))
    assert {:ok, %{status: :rebuilt}} = Script.load(script)
  end

  test "a cache written under another user's key is untrusted; a missing one is reported",
       %{tmp_dir: dir} do
    {script, _cache} = loaded_script(dir)

    assert [{^script, {:ok, %{status: :rebuilt, cache: :untrusted}}}] =
             Script.cache_status([script], cache_key: String.duplicate("k", 32))

    File.rm!(Path.join(dir, "t.tool.json"))
    assert [{^script, {:ok, %{status: :parsed, cache: :missing}}}] = Script.cache_status([script])
    assert doctor(dir) =~ "t.py: not cached yet"
    assert [{_, {:ok, %{cache: :off}}}] = Script.cache_status([script], cache: false)
  end
end
