defmodule CMDC.Tool.ScriptDescribeTest do
  # Reading Python scripts: type hints, docstrings, defaults, permissions, format, privacy.
  use ExUnit.Case, async: true
  import CMDC.Tool.ScriptCase

  @types ~S'''
  """Typing corner cases."""
  from __future__ import annotations

  import enum
  from dataclasses import dataclass
  from enum import Enum, IntEnum, auto
  from typing import Annotated, Any, Dict, List, Literal, NotRequired, Optional, TypedDict, Union


  class Color(str, Enum):
      """A primary color."""
      RED = "red"
      GREEN = "green"


  class Level(IntEnum):
      LOW = 1
      HIGH = 5


  class Auto(Enum):
      A = auto()
      B = auto()


  class Point(TypedDict):
      x: int
      y: NotRequired[float]


  class Loose(TypedDict, total=False):
      tag: str


  @dataclass
  class Box:
      """A box."""
      w: int
      h: int = 3


  def everything(
      s: str,
      i: int,
      f: float,
      b: bool,
      l: list[str],
      L: List[int],
      d: dict,
      D: Dict[str, int],
      o: Optional[int],
      p: str | None,
      lit: Literal["a", "b"],
      yes_no: Literal[True, False],
      nums: Literal[1, 2, 3],
      color: Color,
      level: Level,
      auto_: Auto,
      u: Union[int, str],
      u3: int | str | None,
      point: Point,
      loose: Loose,
      box: Box,
      quoted: "int",
      ann: Annotated[str, "Annotated text."],
      anything: Any,
      nested: list[dict[str, list[int]]],
      t: tuple[int, ...],
      untyped,
      *args,
      kw_only: int = 7,
      **kwargs,
  ):
      return None
  '''

  test "every type-hint form becomes the right JSON Schema" do
    dir = tmp_dir("types")
    {_group, %{"everything" => t}} = load!(write!(dir, "types.py", @types))
    p = params(t)

    assert prop(t, "s") == %{"type" => "string"}
    assert prop(t, "i") == %{"type" => "integer"}
    assert prop(t, "f") == %{"type" => "number"}
    assert prop(t, "b") == %{"type" => "boolean"}
    assert prop(t, "l") == %{"type" => "array", "items" => %{"type" => "string"}}
    assert prop(t, "L") == %{"type" => "array", "items" => %{"type" => "integer"}}
    assert prop(t, "d") == %{"type" => "object"}

    assert prop(t, "D") == %{
             "type" => "object",
             "additionalProperties" => %{"type" => "integer"}
           }

    # Optional without a default: nullable, not required, null by default
    assert prop(t, "o") == %{"type" => ["integer", "null"], "default" => nil}
    assert prop(t, "p") == %{"type" => ["string", "null"], "default" => nil}
    assert prop(t, "lit") == %{"type" => "string", "enum" => ["a", "b"]}
    # Literal[True, False] is a boolean, not an integer enum
    assert prop(t, "yes_no") == %{"type" => "boolean"}
    assert prop(t, "nums") == %{"type" => "integer", "enum" => [1, 2, 3]}
    # Enum subclasses: their values
    assert prop(t, "color") == %{
             "type" => "string",
             "enum" => ["red", "green"],
             "description" => "A primary color."
           }

    assert prop(t, "level") == %{"type" => "integer", "enum" => [1, 5]}
    assert prop(t, "auto_") == %{"type" => "integer", "enum" => [1, 2]}
    # Union keeps every member
    assert prop(t, "u") == %{"anyOf" => [%{"type" => "integer"}, %{"type" => "string"}]}

    assert prop(t, "u3") == %{
             "anyOf" => [%{"type" => "integer"}, %{"type" => "string"}, %{"type" => "null"}],
             "default" => nil
           }

    assert prop(t, "point") == %{
             "type" => "object",
             "properties" => %{"x" => %{"type" => "integer"}, "y" => %{"type" => "number"}},
             "required" => ["x"]
           }

    assert prop(t, "loose") == %{
             "type" => "object",
             "properties" => %{"tag" => %{"type" => "string"}}
           }

    assert prop(t, "box") == %{
             "type" => "object",
             "description" => "A box.",
             "properties" => %{
               "w" => %{"type" => "integer"},
               "h" => %{"type" => "integer", "default" => 3}
             },
             "required" => ["w"]
           }

    # string annotations (and `from __future__ import annotations`) keep their types
    assert prop(t, "quoted") == %{"type" => "integer"}
    assert prop(t, "ann") == %{"type" => "string", "description" => "Annotated text."}
    assert prop(t, "anything") == %{}

    assert prop(t, "nested") == %{
             "type" => "array",
             "items" => %{
               "type" => "object",
               "additionalProperties" => %{"type" => "array", "items" => %{"type" => "integer"}}
             }
           }

    assert prop(t, "t") == %{"type" => "array", "items" => %{"type" => "integer"}}
    # no hint, no docstring entry: still a parameter
    assert prop(t, "untyped") == %{}
    assert prop(t, "kw_only") == %{"type" => "integer", "default" => 7}
    # *args / **kwargs are not parameters; **kwargs allows extra properties
    refute Map.has_key?(p["properties"], "args")
    refute Map.has_key?(p["properties"], "kwargs")
    refute Map.has_key?(p, "additionalProperties")

    assert p["required"] ==
             ~w(s i f b l L d D lit yes_no nums color level auto_ u point loose box quoted ann anything nested t untyped)

    # the schema compiles and validates
    assert {:error, errors} = CMDC.Tool.validate(t, %{"s" => 1})
    assert Enum.any?(errors, &(&1.keyword == "required"))
  end

  test "Google, NumPy and reST docstrings, multi-line text, no Args block, no docstring" do
    dir = tmp_dir("docs")

    path =
      write!(dir, "docs.py", ~S'''
      """Doc styles.

      Second paragraph of the rule prompt.
      """


      def google(city: str, days: int = 3, note=None):
          """Get the forecast.

          Details that span
          two lines.

          Args:
              city (str): The city name,
                  continued on the next line.
              days: How many days.
              note (str, optional): A note.

          Returns:
              dict: the forecast.
          """


      def numpy(x, y=2.5, flags=()):
          """NumPy summary.

          Parameters
          ----------
          x : int
              The x value.
          y : float, optional
              The y value,
              over two lines.
          flags : list of str
              Flags.
          """


      def rest(p, q, r: bool = False):
          """reST summary.

          :param p: the p
          :type p: str
          :param int q: the q,
              continued
          :param r: the r
          :returns: nothing useful
          """


      def summary_only(a: int):
          """Just a summary, no Args block."""


      def no_doc(a, b: str = "x"):
          pass
      ''')

    {group, tools} = load!(path)
    assert group.rule_prompt == "Doc styles.\n\nSecond paragraph of the rule prompt."
    assert group.group == "docs"
    assert group.kind == :python

    g = tools["google"]

    assert g.description() ==
             "Get the forecast.\n\nDetails that span\ntwo lines.\n\nReturns:\n    dict: the forecast."

    assert prop(g, "city") == %{
             "type" => "string",
             "description" => "The city name, continued on the next line."
           }

    assert prop(g, "days") == %{
             "type" => "integer",
             "description" => "How many days.",
             "default" => 3
           }

    assert prop(g, "note") == %{
             "type" => ["string", "null"],
             "description" => "A note.",
             "default" => nil
           }

    assert params(g)["required"] == ["city"]

    n = tools["numpy"]
    assert n.description() == "NumPy summary."
    assert prop(n, "x") == %{"type" => "integer", "description" => "The x value."}

    assert prop(n, "y") == %{
             "type" => "number",
             "description" => "The y value, over two lines.",
             "default" => 2.5
           }

    assert prop(n, "flags") == %{
             "type" => "array",
             "items" => %{"type" => "string"},
             "description" => "Flags.",
             "default" => []
           }

    r = tools["rest"]
    assert r.description() == "reST summary.\n\nReturns: nothing useful"
    assert prop(r, "p") == %{"type" => "string", "description" => "the p"}
    assert prop(r, "q") == %{"type" => "integer", "description" => "the q, continued"}
    assert prop(r, "r") == %{"type" => "boolean", "description" => "the r", "default" => false}

    assert tools["summary_only"].description() == "Just a summary, no Args block."
    # no docstring: a description is still given (providers reject empty ones)
    assert tools["no_doc"].description() == "no_doc (from docs.py)"
    assert prop(tools["no_doc"], "a") == %{}
    assert prop(tools["no_doc"], "b") == %{"type" => "string", "default" => "x"}
  end

  test "private functions, formatters and imported names are not tools" do
    dir = tmp_dir("private")

    path =
      write!(dir, "priv.py", ~S'''
      from os.path import join


      def public(a: int) -> int:
          return _helper(a)


      def _helper(a):
          return a


      def render(result, args):
          return "x"


      public.format = render


      class NotATool:
          def method(self):
              pass
      ''')

    {group, tools} = load!(path)
    assert Map.keys(tools) == ["public"]
    assert group.rule_prompt == ""
    assert tools["public"].__tool_settings__().format == true

    assert tools["public"].__script__() == %{
             path: path,
             function: "public",
             group: "priv",
             kind: :python
           }
  end

  test "defaults: literals, a set, an Enum member, None, and non-literal expressions" do
    dir = tmp_dir("defaults")

    path =
      write!(dir, "defaults.py", ~S'''
      import time
      from enum import Enum


      class Mode(Enum):
          FAST = "fast"
          SLOW = "slow"


      def f(
          tags: set[str] = {"b", "c", "a"},
          mode: Mode = Mode.SLOW,
          n: float = -1.5,
          pair: tuple = (1, 2),
          opts: dict = {"k": [1, None]},
          none=None,
          when: float = time.time(),
          big: int = 10**3,
      ):
          return tags
      ''')

    {_, %{"f" => f}} = load!(path)

    assert prop(f, "tags") == %{
             "type" => "array",
             "uniqueItems" => true,
             "items" => %{"type" => "string"},
             "default" => ["a", "b", "c"]
           }

    assert prop(f, "mode") == %{
             "type" => "string",
             "enum" => ["fast", "slow"],
             "default" => "slow"
           }

    assert prop(f, "n") == %{"type" => "number", "default" => -1.5}
    assert prop(f, "pair") == %{"type" => "array", "default" => [1, 2]}
    assert prop(f, "opts") == %{"type" => "object", "default" => %{"k" => [1, nil]}}
    assert prop(f, "none") == %{"default" => nil}
    # not JSON-representable statically: no default, but still optional
    assert prop(f, "when") == %{"type" => "number"}
    assert prop(f, "big") == %{"type" => "integer"}
    refute Map.has_key?(params(f), "required")
    assert params(f)["additionalProperties"] == false
  end

  test "permissions: function attributes, module defaults and legacy spellings" do
    dir = tmp_dir("perms")

    path =
      write!(dir, "perms.py", ~S'''
      executionPolicy = "ask_always"
      resultApprovalPolicy = "onError"


      def inherits():
          pass


      def explicit():
          pass


      explicit.executionPolicy = "auto"
      explicit.resultApprovalPolicy = "always"


      def legacy_sensitive():
          pass


      legacy_sensitive.permissionLevel = "sensitive"


      def legacy_public():
          pass


      legacy_public.permissionLevel = "public"


      def legacy_moderate():
          pass


      legacy_moderate.permissionLevel = "moderate"


      def no_approval():
          pass


      no_approval.requireExecutionApproval = False


      def bogus():
          pass


      bogus.executionPolicy = "sometimes"
      ''')

    {group, t} = load!(path)

    assert group.default_permissions == %{
             "executionPolicy" => "ask-always",
             "resultApprovalPolicy" => "on-error"
           }

    s = fn name -> t[name].__tool_settings__() end
    assert s.("inherits") == %{policy: :ask_always, result_approval: :on_error, format: false}
    assert s.("explicit") == %{policy: :auto, result_approval: :always, format: false}
    assert s.("legacy_sensitive").policy == :ask_always
    assert s.("legacy_public").policy == :auto
    assert s.("legacy_moderate").policy == :ask_once
    assert s.("no_approval").policy == :auto
    # an unknown value keeps the default and is reported
    assert s.("bogus").policy == :ask_always
    assert [warning] = group.warnings
    assert warning =~ "bogus"

    # with nothing declared: ask once, never approve results
    {_, %{"plain" => plain}} = load!(write!(dir, "plain.py", "def plain():\n    pass\n"))

    assert plain.__tool_settings__() == %{
             policy: :ask_once,
             result_approval: :never,
             format: false
           }

    # defaultPermissions as a dict, legacy keys inside
    {g2, %{"x" => x}} =
      load!(
        write!(dir, "dict.py", ~S'''
        defaultPermissions = {"permissionLevel": "public", "resultApprovalPolicy": "always"}


        def x():
            pass
        ''')
      )

    assert g2.default_permissions == %{
             "executionPolicy" => "auto",
             "resultApprovalPolicy" => "always"
           }

    assert x.__tool_settings__().policy == :auto
  end

  test "a script whose top level parses argv, prints and exits is read without running it" do
    dir = tmp_dir("toplevel")

    path =
      write!(dir, "cli.py", ~S'''
      import argparse, sys
      print("top-level noise")
      parser = argparse.ArgumentParser()
      parser.add_argument("--required", required=True)
      parser.parse_args()
      sys.exit(3)


      def tool(a: int) -> int:
          """A tool."""
          return a
      ''')

    assert {_, %{"tool" => tool}} = load!(path)
    assert tool.description() == "A tool."
  end

  test "load_many isolates failures: a syntax error or a slow script does not stop others" do
    dir = tmp_dir("many")
    good = write!(dir, "good.py", "def ok(a: int):\n    return a\n")
    bad = write!(dir, "bad.py", "def broken(:\n")
    missing = Path.join(dir, "missing.py")
    # a script too large to read within the limit: the describer is killed and restarted
    huge = write!(dir, "huge.py", String.duplicate("x = [1, 2, 3, 4, 5, 6, 7, 8]\n", 300_000))
    good2 = write!(dir, "good2.py", "def ok2():\n    pass\n")

    results =
      CMDC.Tool.Script.load_many([good, bad, missing, huge, good2], describe_timeout: 2_000)

    [{^good, r1}, {^bad, r2}, {^missing, r3}, {^huge, r4}, {^good2, r5}] = results
    assert {:ok, %{tools: [_]}} = r1
    assert {:error, "syntax error in bad.py at line 1: " <> _} = r2
    assert {:error, "cannot read the script " <> _} = r3
    assert {:error, "reading the script took longer than 2000 ms"} = r4
    assert {:ok, %{tools: [_]}} = r5

    # the same script twice: the same modules, loaded once
    assert [{_, {:ok, %{tools: [m]}}}, {_, {:ok, %{tools: [m]}}}] =
             CMDC.Tool.Script.load_many([good, good])
  end

  test "generated modules work with find/2, to_schema/2 and validate/2" do
    dir = tmp_dir("api")

    path =
      write!(dir, "api.py", ~S'''
      from typing import Literal


      def get_weather(city: str, unit: Literal["c", "f"] = "c"):
          """Weather for a city."""
      ''')

    {group, _} = load!(path)
    assert {:ok, mod} = CMDC.Tool.find(group.tools, "get_weather")
    assert [%{"type" => "function", "function" => fun}] = CMDC.Tool.to_schema([mod])
    assert fun["name"] == "get_weather"
    assert fun["description"] == "Weather for a city."
    assert {:ok, _} = CMDC.Tool.validate(mod, %{"city" => "Oslo"})
    assert {:error, [e]} = CMDC.Tool.validate(mod, %{"city" => "Oslo", "unit" => "k"})
    assert e.keyword == "enum"
    assert {:error, [e]} = CMDC.Tool.validate(mod, %{"city" => "Oslo", "cty" => 1})
    assert e.keyword == "additionalProperties"
    assert CMDC.Tool.meta(mod, %{"city" => "Oslo"}) == "get_weather Oslo"
    assert mod.module_info(:attributes)[:behaviour] == [CMDC.Tool]
  end
end
