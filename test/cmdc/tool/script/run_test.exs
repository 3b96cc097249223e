defmodule CMDC.Tool.ScriptRunTest do
  # Running script tools in persistent workers: results, errors, isolation, lifecycle.
  use ExUnit.Case, async: true
  import CMDC.Tool.ScriptCase
  import CMDC.Tool.Eventually

  alias CMDC.Tool.Script

  @ctx %CMDC.Context{session_id: "test"}

  test "a call returns the result; format makes the text; args and results keep Unicode" do
    dir = tmp_dir("basic")

    path =
      write!(dir, "basic.py", ~S'''
      def add(a: int, b: int = 2) -> int:
          return a + b


      def echo(text: str) -> dict:
          return {"text": text, "len": len(text)}


      def greet(name: str) -> str:
          return "héllo " + name


      def weather(city: str) -> dict:
          return {"city": city, "temp": 21}


      weather.format = lambda result, args: f"{result['city']}: {result['temp']}°C (asked {args['city']})"


      def nothing():
          pass


      def posonly(a: int, /, b: int = 1) -> list:
          return [a, b]


      def maybe(note: str = None) -> str:
          return repr(note)


      async def later(x: int) -> int:
          import asyncio
          await asyncio.sleep(0)
          return x * 2
      ''')

    {_, t} = load!(path)
    assert t["add"].execute(%{"a" => 1}, @ctx) == {:ok, "3"}
    assert t["add"].execute(%{"a" => 1, "b" => 40}, @ctx) == {:ok, "41"}

    assert {:ok, %{value: %{"text" => "天气 ☀", "len" => 4}, text: text}} =
             Script.call(t["echo"], %{"text" => "天气 ☀"})

    assert CMDC.Tool.JSON.decode!(text) == %{"text" => "天气 ☀", "len" => 4}
    assert t["greet"].execute(%{"name" => "Zoë"}, @ctx) == {:ok, "héllo Zoë"}
    assert t["weather"].execute(%{"city" => "Oslo"}, @ctx) == {:ok, "Oslo: 21°C (asked Oslo)"}
    assert t["nothing"].execute(%{}, @ctx) == {:ok, "null"}
    assert t["later"].execute(%{"x" => 21}, @ctx) == {:ok, "42"}
    assert t["posonly"].execute(%{"a" => 5}, @ctx) == {:ok, "[5,1]"}
    assert {:ok, _} = CMDC.Tool.validate(t["maybe"], %{"note" => nil})
    assert t["maybe"].execute(%{"note" => nil}, @ctx) == {:ok, "None"}
    assert t["maybe"].execute(%{"note" => "x"}, @ctx) == {:ok, "'x'"}
  end

  test "arguments are converted to the hinted Enum, dataclass, set; Optional may be omitted" do
    dir = tmp_dir("coerce")

    path =
      write!(dir, "coerce.py", ~S'''
      from __future__ import annotations
      from dataclasses import dataclass
      from enum import Enum
      from typing import Optional


      class Color(Enum):
          RED = "red"


      @dataclass
      class Box:
          w: int
          h: int = 1


      def kinds(c: Color, b: Box, tags: set[str], maybe: Optional[int]) -> list:
          return [type(c).__name__, c.value, b.w * b.h, sorted(tags), maybe]
      ''')

    {_, %{"kinds" => k}} = load!(path)

    assert {:ok, %{value: value}} =
             Script.call(k, %{"c" => "red", "b" => %{"w" => 3}, "tags" => ["b", "a", "b"]})

    assert value == ["Color", "red", 3, ["a", "b"], nil]
  end

  test "output to stdout and stderr (Python, C level, child processes) never corrupts results" do
    dir = tmp_dir("noise")

    path =
      write!(dir, "noise.py", ~S'''
      import os, subprocess, sys
      print("import-time noise")


      def noisy(n: int) -> dict:
          print("printed", n)
          sys.stdout.write("written\n")
          print("to stderr", file=sys.stderr)
          os.write(1, b"raw fd 1 \xff\xfe\n")
          os.write(2, b"raw fd 2\n")
          subprocess.run(["echo", "child process output"])
          subprocess.run(["echo", "to sys.stdout"], stdout=sys.stdout)
          sys.stdout.buffer.write(b"bytes \xff\xfe not UTF-8\n")
          return {"n": n}
      ''')

    {_, %{"noisy" => noisy}} = load!(path)

    assert {:ok, %{value: %{"n" => 7}, text: ~s({"n":7}), log: log}} =
             Script.call(noisy, %{"n" => 7})

    assert log =~ "printed 7"
    assert log =~ "written"
    assert log =~ "to stderr"
    assert log =~ "bytes \\xff\\xfe not UTF-8"
    # twice in a row on the same worker: the channel stayed in sync
    assert {:ok, %{value: %{"n" => 8}}} = Script.call(noisy, %{"n" => 8})
  end

  test "an exception gives its message to the model, the traceback only to the log" do
    dir = tmp_dir("exc")

    path =
      write!(dir, "exc.py", ~S'''
      def fails(city: str):
          raise ValueError(f"unknown city: {city}")


      def exits():
          import sys
          sys.exit(4)


      def ok():
          return "fine"
      ''')

    {_, t} = load!(path)

    assert t["fails"].execute(%{"city" => "Atlantis"}, @ctx) ==
             {:error, "ValueError: unknown city: Atlantis"}

    assert {:error, %{kind: "exception", log: log}} = Script.call(t["fails"], %{"city" => "X"})
    assert log =~ "Traceback"
    assert log =~ "exc.py"
    assert {:error, "the function called sys.exit(4)"} = t["exits"].execute(%{}, @ctx)
    # the worker survives both
    assert {:ok, "fine"} = t["ok"].execute(%{}, @ctx)
  end

  test "results that are not JSON and text that is not UTF-8 give clear errors" do
    dir = tmp_dir("notjson")

    path =
      write!(dir, "notjson.py", ~S'''
      def a_set():
          return {1, 2}


      def an_object():
          return object()


      def a_tuple():
          return (1, 2)


      def nested_bytes():
          return {"ok": [1, b"raw"]}


      def nan():
          return float("nan")


      def int_keys():
          return {1: "a"}


      def surrogate():
          return b"\xff".decode("utf-8", "surrogateescape")


      def bad_format():
          return 1


      bad_format.format = lambda result, args: 42
      ''')

    {_, t} = load!(path)
    err = fn name -> Script.call(t[name], %{}) end

    assert {:error,
            %{kind: "result", message: "the function returned a set, which is not JSON" <> _}} =
             err.("a_set")

    assert {:error, %{kind: "result", message: "the function returned a object" <> _}} =
             err.("an_object")

    assert {:error, %{kind: "result", message: "the function returned a tuple" <> _}} =
             err.("a_tuple")

    assert {:error, %{message: "the function returned a bytes at /ok/1, which is not JSON" <> _}} =
             err.("nested_bytes")

    assert {:error, %{message: "the result holds nan at the root, which JSON cannot carry"}} =
             err.("nan")

    assert {:error, %{message: "the result has a dict key 1 (int)" <> _}} = err.("int_keys")

    assert {:error,
            %{kind: "result", message: "the result holds text that is not valid UTF-8" <> _}} =
             err.("surrogate")

    # the function ran: a broken formatter gives the raw result and a warning (issue 15)
    ExUnit.CaptureLog.capture_log(fn ->
      assert {:ok, %{value: 1, text: "1", log: log}} = Script.call(t["bad_format"], %{})
      assert log =~ "the format function returned a int, not a str; the raw result was returned"
    end)
  end

  test "a script that exits or fails at import time gives a clear error when called" do
    dir = tmp_dir("import")

    exits =
      write!(dir, "exits.py", ~S'''
      import sys
      print("about to exit")
      sys.exit(2)


      def tool():
          return 1
      ''')

    raises = write!(dir, "raises.py", "import no_such_module_here\n\ndef tool():\n    return 1\n")
    hard = write!(dir, "hard.py", "import os\nos._exit(9)\n\ndef tool():\n    return 1\n")

    {_, %{"tool" => t1}} = load!(exits)
    {_, %{"tool" => t2}} = load!(raises)
    {_, %{"tool" => t3}} = load!(hard)

    assert {:error, %{kind: "import", message: m1, log: log}} = Script.call(t1, %{})
    assert m1 =~ "the script exited while being imported (sys.exit(2))"
    assert log =~ "about to exit"

    assert {:error, %{kind: "import", message: m2}} = Script.call(t2, %{})
    assert m2 =~ "ModuleNotFoundError: No module named 'no_such_module_here'"

    assert {:error, %{kind: "import", message: m3}} = Script.call(t3, %{})
    assert m3 =~ "exited while importing the script (exit code 9)"
  end

  test "a crash mid-call is reported and the next call gets a fresh worker" do
    dir = tmp_dir("crash")

    path =
      write!(dir, "crash.py", ~S'''
      import os, sys


      def crash(code: int):
          print("going down", file=sys.__stderr__)
          os._exit(code)


      def pid() -> int:
          return os.getpid()
      ''')

    {_, t} = load!(path)
    assert {:ok, %{value: first}} = Script.call(t["pid"], %{})

    assert {:error, %{kind: "crashed", message: message, log: log}} =
             Script.call(t["crash"], %{"code" => 3})

    assert message =~ "exited during the call (exit code 3)"
    assert message =~ "crash.crash"
    assert log =~ "going down"
    assert {:ok, %{value: second}} = Script.call(t["pid"], %{})
    assert first != second

    # a warm worker killed from outside while idle is replaced without failing a call
    System.cmd("kill", ["-9", "#{second}"])
    eventually(fn -> not alive?(second) end)
    assert {:ok, %{value: third}} = Script.call(t["pid"], %{})
    assert third != second
  end

  test "a hung call times out: the worker and its children are killed, the next call is fresh" do
    dir = tmp_dir("hang")

    path =
      write!(dir, "hang.py", ~S'''
      import os, subprocess, time


      def hang(marker: str):
          child = subprocess.Popen(["sleep", "60"])
          with open(marker, "w") as f:
              f.write(f"{os.getpid()} {child.pid}")
          time.sleep(60)


      def pid() -> int:
          return os.getpid()
      ''')

    {_, t} = load!(path)
    marker = Path.join(dir, "pids")
    # a warm worker, so the time limit is all the call's
    assert {:ok, %{value: warm}} = Script.call(t["pid"], %{})

    assert {:error, %{kind: "timeout", message: message}} =
             Script.call(t["hang"], %{"marker" => marker}, timeout: 2_000)

    assert message =~ "hang timed out after 2000 ms; its worker was killed"
    [worker, child] = marker |> File.read!() |> String.split() |> Enum.map(&String.to_integer/1)
    assert worker == warm
    eventually(fn -> not alive?(worker) end)
    eventually(fn -> not alive?(child) end)
    assert {:ok, %{value: fresh}} = Script.call(t["pid"], %{})
    assert fresh != worker
  end

  test "cancel/1 and the caller's exit stop a call and kill its worker" do
    dir = tmp_dir("cancel")

    path =
      write!(dir, "cancel.py", ~S'''
      import os, time


      def hang(marker: str):
          with open(marker, "w") as f:
              f.write(str(os.getpid()))
          time.sleep(60)
      ''')

    {_, %{"hang" => hang}} = load!(path)

    # explicit cancel, from the handle the messages carry
    marker = Path.join(dir, "one")
    test = self()

    caller =
      spawn(fn ->
        send(test, {:result, Script.call(hang, %{"marker" => marker}, timeout: 60_000)})
      end)

    eventually(fn -> File.exists?(marker) and File.read!(marker) != "" end)
    worker = String.to_integer(File.read!(marker))
    Process.exit(caller, :kill)

    eventually(fn -> not alive?(worker) end, message: "the worker of a dead caller was not killed")

    # a direct cancel through the handle of start_call/3
    marker2 = Path.join(dir, "two")
    {:ok, handle} = Script.start_call(hang, %{"marker" => marker2})

    eventually(fn -> File.exists?(marker2) and File.read!(marker2) != "" end)
    worker2 = String.to_integer(File.read!(marker2))
    assert Script.cancel(handle) == :ok

    assert {:error, %{kind: "cancelled", message: message}} = Script.await(handle)
    assert message =~ "hang was cancelled (cancelled by the caller); its worker was killed"
    eventually(fn -> not alive?(worker2) end)
    assert Script.cancel(handle) == :not_running
  end

  test "overlapping calls run on a small pool of workers" do
    dir = tmp_dir("pool")

    path =
      write!(dir, "pool.py", ~S'''
      import os, time


      def slow(i: int) -> list:
          time.sleep(0.4)
          return [i, os.getpid()]
      ''')

    {_, %{"slow" => slow}} = load!(path)

    results =
      1..6
      |> Task.async_stream(fn i -> Script.call(slow, %{"i" => i}, max_workers: 3) end,
        max_concurrency: 6,
        timeout: 30_000
      )
      |> Enum.map(fn {:ok, {:ok, %{value: [i, pid]}}} -> {i, pid} end)

    assert Enum.map(results, &elem(&1, 0)) == Enum.to_list(1..6)
    pids = results |> Enum.map(&elem(&1, 1)) |> Enum.uniq()
    assert length(pids) > 1
    assert length(pids) <= 3
    assert [{_, idle}] = Enum.filter(Script.workers(), fn {p, _} -> p == path end)
    assert Enum.sort(idle) == Enum.sort(pids)
  end

  test "a 128 KiB argument crosses on the frame channel, not argv" do
    dir = tmp_dir("big")

    path =
      write!(dir, "big.py", ~S'''
      def size(text: str) -> dict:
          return {"chars": len(text), "tail": text[-3:], "echo": text}
      ''')

    {_, %{"size" => size}} = load!(path)
    text = String.duplicate("ab€", 50_000) <> "end"
    assert byte_size(text) > 128 * 1024
    assert {:ok, %{value: value}} = Script.call(size, %{"text" => text})
    assert value["chars"] == String.length(text)
    assert value["tail"] == "end"
    assert value["echo"] == text
  end

  test "progress values arrive as partial results before the result" do
    dir = tmp_dir("progress")

    path =
      write!(dir, "progress.py", ~S'''
      try:
          from cmdc_tool import progress
      except ImportError:  # outside the worker
          def progress(value):
              pass


      def steps(n: int) -> str:
          for i in range(n):
              progress({"step": i + 1, "of": n})
          return "done"
      ''')

    {_, %{"steps" => steps}} = load!(path)
    test = self()

    assert {:ok, %{value: "done"}} =
             Script.call(steps, %{"n" => 3}, on_progress: &send(test, {:p, &1}))

    assert_received {:p, %{"step" => 1, "of" => 3}}
    assert_received {:p, %{"step" => 2, "of" => 3}}
    assert_received {:p, %{"step" => 3, "of" => 3}}

    # through execute/2 and the context
    ctx = %CMDC.Context{private: %{on_progress: &send(test, {:ctx, &1})}}
    assert {:ok, "done"} = steps.execute(%{"n" => 1}, ctx)
    assert_received {:ctx, %{"step" => 1}}
  end

  test "the worker runs in the script's folder: helper modules import, relative files open" do
    dir = tmp_dir("folder")
    write!(dir, "helpers.py", "def shout(s):\n    return s.upper()\n")
    write!(dir, "data.txt", "from a file")

    path =
      write!(dir, "uses_helper.py", ~S'''
      import os
      from helpers import shout


      def run() -> list:
          with open("data.txt") as f:
              return [shout("hi"), f.read(), os.getcwd()]
      ''')

    {_, %{"run" => run}} = load!(path)
    assert {:ok, %{value: ["HI", "from a file", cwd]}} = Script.call(run, %{})
    assert Path.expand(cwd) == Path.expand(dir)
  end

  test "a venv's python3 in the script's folder is the interpreter" do
    dir = tmp_dir("venv")
    real = System.find_executable("python3")

    write!(dir, ".venv/bin/python3", """
    #!/bin/sh
    export CMDC_TEST_VENV=yes
    exec "#{real}" "$@"
    """)

    File.chmod!(Path.join(dir, ".venv/bin/python3"), 0o755)

    path =
      write!(dir, "venv_tool.py", ~S'''
      import os


      def which() -> str:
          return os.environ.get("CMDC_TEST_VENV", "no")
      ''')

    {_, %{"which" => which}} = load!(path)
    assert {:ok, %{value: "yes"}} = Script.call(which, %{})
  end

  test "unknown functions and bad arguments are reported, not crashes" do
    dir = tmp_dir("args")
    path = write!(dir, "args.py", "def f(a: int):\n    return a\n")
    {_, %{"f" => f}} = load!(path)

    assert {:error, %{kind: "arguments", message: "bad arguments for f: " <> _}} =
             Script.call(f, %{"zzz" => 1})

    assert {:error, %{kind: "arguments"}} = Script.call(f, %{"a" => {:not, :json}})

    File.write!(path, "def g():\n    return 1\n")
    future = System.os_time(:second) + 5
    File.touch!(path, future)

    assert {:error, %{kind: "unknown_function", message: "the script has no public function 'f'"}} =
             Script.call(f, %{"a" => 1})
  end
end
