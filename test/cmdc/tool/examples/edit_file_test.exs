defmodule CMDC.Tool.Examples.EditFileTest do
  use ExUnit.Case, async: true

  alias CMDC.Tool.{Pending, Runner}
  alias CMDC.Tool.Examples.EditFile

  doctest EditFile

  setup do
    dir = Path.join(System.tmp_dir!(), "cmdc_edit_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    File.write!(Path.join(dir, "a.txt"), "one\ntwo\ntwo\n")
    on_exit(fn -> File.rm_rf!(dir) end)

    %{
      dir: dir,
      ctx: %CMDC.Context{session_id: "edit-#{System.unique_integer()}", working_dir: dir}
    }
  end

  defp edit(ctx, old, new, path \\ "a.txt") do
    args = %{"path" => path, "old_text" => old, "new_text" => new}
    Runner.run([EditFile], %{id: "1", name: "edit_file", arguments: args}, ctx)
  end

  test "nothing is pending when the text is missing, repeated, or the file absent", %{ctx: ctx} do
    assert edit(ctx, "three", "3").content == "a.txt: old_text was not found"
    assert edit(ctx, "two", "2").content =~ "old_text occurs 2 times"
    assert edit(ctx, "x", "y", "nope.txt").content == "nope.txt: no such file or directory"
    assert Pending.list(ctx.session_id) == []
  end

  test "a file changed since the preview is not written", %{dir: dir, ctx: ctx} do
    assert edit(ctx, "one", "1").content =~ "- one\n+ 1"
    [%{id: id}] = Pending.list(ctx.session_id)
    File.write!(Path.join(dir, "a.txt"), "someone else wrote this\n")
    resolve = %{id: "2", name: "resolve", arguments: %{"id" => id, "action" => "apply"}}
    r = Runner.run([EditFile], resolve, ctx)
    assert r.is_error and r.content =~ "a.txt changed since the preview: not written"
    assert File.read!(Path.join(dir, "a.txt")) == "someone else wrote this\n"
  end
end
