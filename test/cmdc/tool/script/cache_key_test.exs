defmodule CMDC.Tool.Script.CacheKeyTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.Script.CacheKey

  @moduletag :capture_log

  setup do
    dir = Path.join(System.tmp_dir!(), "cmdc_cachekey_#{System.unique_integer([:positive])}")
    on_exit(fn -> File.chmod(dir, 0o700) && File.rm_rf(dir) end)
    %{dir: dir}
  end

  test "created once under CMDC_HOME, private, and the same for every load", %{dir: dir} do
    home = Path.join(dir, "a")
    key = CacheKey.get(cmdc_home: home)
    assert key =~ ~r/\A[0-9a-f]{64}\z/
    file = Path.join(home, "cache.key")
    assert File.read!(file) == key
    assert File.stat!(file).access == :read_write
    assert Bitwise.band(File.stat!(file).mode, 0o077) == 0
    assert CacheKey.get(cmdc_home: home) == key
    # another user folder, another key
    assert CacheKey.get(cmdc_home: Path.join(dir, "b")) != key
  end

  test "a broken key file is replaced; an unwritable folder gives a key for this VM", %{dir: dir} do
    home = Path.join(dir, "c")
    File.mkdir_p!(home)
    File.write!(Path.join(home, "cache.key"), "short")
    key = CacheKey.get(cmdc_home: home)
    assert key =~ ~r/\A[0-9a-f]{64}\z/
    assert File.read!(Path.join(home, "cache.key")) == key

    locked = Path.join(dir, "locked")
    File.mkdir_p!(locked)
    File.chmod!(locked, 0o500)

    if File.write(Path.join(locked, "probe"), "") == :ok do
      IO.puts("[skip] running as a user who can write read-only folders (root)")
    else
      vm_key = CacheKey.get(cmdc_home: locked)
      assert vm_key =~ ~r/\A[0-9a-f]{64}\z/
      refute File.exists?(Path.join(locked, "cache.key"))
    end
  end
end
