"""Checks cmdc_tool's provider output with the providers' own Python packages, in one process.

Reads a JSON file: a list of cases {id, format, strict, tools, warnings, original, args, sent}
and prints one JSON report: {"checked": {...}, "failures": [{id, check, error, warned}]}.
"""

import copy
import json
import sys

from pydantic import TypeAdapter
from jsonschema import Draft7Validator, Draft202012Validator
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


def validator(schema, default):
    cls = validator_for(schema, default=default)
    cls.check_schema(schema)
    return cls(schema)


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
        original = validator(case["original"], Draft7Validator)
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
