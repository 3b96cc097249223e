"""Checks deferred-loading output with the providers' own Python packages.

Reads a JSON list of cases {id, kind, value}; prints {"checked": n, "failures": [{id, error}]}.
Each value is validated by its SDK type, and its keys must be keys that type declares (a
misspelled `defer_loading` would otherwise pass a TypedDict unnoticed).
"""

import json
import sys

from pydantic import TypeAdapter
from anthropic.types import (
    ToolParam,
    ToolResultBlockParam,
    ToolReferenceBlockParam,
    ToolSearchToolBm25_20251119Param,
    ToolSearchToolRegex20251119Param,
)
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import (
    FunctionToolParam,
    NamespaceToolParam,
    ResponseFunctionToolCall,
    ResponseFunctionToolCallParam,
    ToolSearchToolParam,
)
from openai.types.responses import namespace_tool_param, tool_search_output_namespace_tool_param
from openai.types.responses.tool_search_output_namespace_tool_param import (
    ToolSearchOutputNamespaceToolParam,
)
from openai.types.responses.response_input_item_param import ResponseToolSearchOutputItemParamParam
from google.genai import types as genai
import mcp.types as mcp

TYPED = {
    "anthropic_tool": ToolParam,
    "anthropic_bm25": ToolSearchToolBm25_20251119Param,
    "anthropic_regex": ToolSearchToolRegex20251119Param,
    "anthropic_tool_result": ToolResultBlockParam,
    "anthropic_tool_reference": ToolReferenceBlockParam,
    "openai_chat": ChatCompletionFunctionToolParam,
    "openai_responses_function": FunctionToolParam,
    "openai_tool_search": ToolSearchToolParam,
    "openai_tool_search_output": ResponseToolSearchOutputItemParamParam,
    "openai_namespace": NamespaceToolParam,
    "openai_namespace_function": namespace_tool_param.ToolFunction,
    "openai_output_namespace": ToolSearchOutputNamespaceToolParam,
    "openai_output_namespace_function": tool_search_output_namespace_tool_param.ToolFunction,
    "openai_function_call_param": ResponseFunctionToolCallParam,
}


def keys_declared(cls, value):
    declared = cls.__required_keys__ | cls.__optional_keys__
    unknown = set(value) - declared
    assert not unknown, f"keys {sorted(unknown)} are not in {cls.__name__}"
    missing = cls.__required_keys__ - set(value)
    assert not missing, f"required keys {sorted(missing)} missing for {cls.__name__}"


def check(case):
    kind, value = case["kind"], case["value"]
    if kind in TYPED:
        cls = TYPED[kind]
        TypeAdapter(cls).validate_python(value)
        keys_declared(cls, value)
        if kind == "anthropic_tool_result" and isinstance(value.get("content"), list):
            for block in value["content"]:
                check({"kind": "anthropic_tool_reference", "value": block})
        if kind == "openai_tool_search_output":
            for tool in value["tools"]:
                inner = "openai_output_namespace" if tool["type"] == "namespace" else "openai_responses_function"
                check({"kind": inner, "value": tool})
        if kind in ("openai_namespace", "openai_output_namespace"):
            assert value["tools"], "a namespace lists at least one function"
            for tool in value["tools"]:
                check({"kind": kind + "_function", "value": tool})
    elif kind == "openai_function_call":
        # An output item as the SDK parses it from a response (its `namespace` field).
        ResponseFunctionToolCall.model_validate(value)
        check({"kind": "openai_function_call_param", "value": value})
    elif kind == "gemini_decl":
        genai.FunctionDeclaration.model_validate(value)
    elif kind == "mcp_tool":
        mcp.Tool.model_validate(value)
    else:
        raise ValueError(f"unknown kind {kind}")


def main():
    cases = json.load(open(sys.argv[1]))
    failures = []
    for case in cases:
        try:
            check(case)
        except Exception as e:  # report every failure, not the first
            failures.append({"id": case["id"], "error": str(e)[:2000]})
    print(json.dumps({"checked": len(cases), "failures": failures}))


main()
