"""Checks cmdc_tool's provider output with the providers' own Python packages, in one process.

Reads a JSON file: a list of cases {id, format, strict, tools, warned, original, dialect?, args,
sent} (`dialect`: the original's draft without `$schema`, "2020-12" or "4"; Draft 7 when absent)
and prints one JSON report: {"checked": {...}, "failures": [{id, check, error, warned}]}.
Patterns Python's `re` cannot compile (zod 4's `\\p{L}`) are left out of the jsonschema checks
here; the library's own validator checks them in the Elixir tests.
"""

import copy
import json
import re
import sys

from pydantic import TypeAdapter
from jsonschema import Draft4Validator, Draft7Validator, Draft202012Validator
from jsonschema.validators import validator_for
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from openai.lib._pydantic import _ensure_strict_json_schema
from anthropic.types import ToolParam
from anthropic.lib._parse._transform import transform_schema
from google.genai import types as genai
import mcp.types as mcp

CHAT = TypeAdapter(ChatCompletionFunctionToolParam)
RESPONSES = TypeAdapter(FunctionToolParam)
ANTHROPIC = TypeAdapter(ToolParam)
checked = {}
failures = []


def count(name):
    checked[name] = checked.get(name, 0) + 1


DIALECTS = {None: Draft7Validator, "2020-12": Draft202012Validator, "4": Draft4Validator}


def python_readable(s):
    if isinstance(s, list):
        return [python_readable(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {k: python_readable(v) for k, v in s.items()}
    if isinstance(out.get("pattern"), str):
        try:
            re.compile(out["pattern"])
        except re.error:
            del out["pattern"]
    return out


def validator(schema, default):
    cls = validator_for(schema, default=default)
    readable = python_readable(schema)
    cls.check_schema(readable)
    return cls(readable)


def parameters(case):
    fmt, tools = case["format"], case["tools"]
    if fmt == "openai":
        CHAT.validate_python(tools[0])
        return tools[0]["function"]["parameters"]
    if fmt == "openai_responses":
        RESPONSES.validate_python(tools[0])
        return tools[0]["parameters"]
    if fmt == "anthropic":
        ANTHROPIC.validate_python(tools[0])
        return tools[0]["input_schema"]
    if fmt in ("gemini", "gemini_json_schema"):
        decl = tools[0]["functionDeclarations"][0]
        # extra="forbid": an unknown keyword anywhere in `parameters` is refused.
        genai.FunctionDeclaration.model_validate(decl)
        return decl.get("parameters", decl.get("parametersJsonSchema"))
    if fmt == "mcp":
        mcp.Tool.model_validate(tools[0])
        return tools[0]["inputSchema"]
    raise ValueError(fmt)


def check(case):
    fmt = case["format"]
    strict = case["strict"] and fmt in ("openai", "openai_responses", "anthropic")
    params = parameters(case)
    count(f"{fmt} shape")
    if params is None:
        return
    if fmt == "gemini":
        return  # OpenAPI subset, checked by the Schema model above
    # Strict outputs are read as 2020-12 by the providers, and MCP's default is 2020-12 (the
    # output says another draft in `$schema`); other outputs keep the author's Draft 7.
    default = Draft202012Validator if strict or fmt == "mcp" else Draft7Validator
    v = validator(params, default)
    count(f"{fmt} meta-schema")
    if strict and fmt in ("openai", "openai_responses"):
        doc = copy.deepcopy(params)
        again = _ensure_strict_json_schema(doc, path=(), root=doc)
        assert again == params, f"openai's strict rewrite changes it: {json.dumps(again)}"
        count("openai strict fixpoint")
    if strict and fmt == "anthropic":
        again = transform_schema(copy.deepcopy(params))
        assert again == params, f"anthropic's transform_schema changes it: {json.dumps(again)}"
        count("anthropic transform_schema fixpoint")
    for sent in case["sent"]:
        errors = [e.message for e in v.iter_errors(sent)]
        assert not errors, f"the model's call {json.dumps(sent)} is refused: {errors}"
        count(f"{fmt} generated call")


def main():
    cases = json.load(open(sys.argv[1]))
    for case in cases:
        original = validator(case["original"], DIALECTS[case.get("dialect")])
        for args in case["args"]:
            if not original.is_valid(args):
                failures.append({"id": case["id"], "check": "corpus", "error": f"{args} invalid", "warned": False})
        count("original args")
        try:
            check(case)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
            failures.append({"id": case["id"], "check": case["format"], "error": f"{type(e).__name__}: {e}"[:600], "warned": bool(case["warned"])})
    json.dump({"checked": checked, "failures": failures}, sys.stdout)


main()
