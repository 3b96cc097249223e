"""Calls in / results out, checked with the providers' own Python packages, in one process.

Talks over stdin/stdout in frames of a 4-byte big-endian length and a JSON body
(Erlang's {:packet, 4}), until stdin closes:

  {"op": "build", "format": f, "calls": [{"id", "name", "arguments"}]}
      -> {"response": json_text}: a model response making those calls, built with the
         package's response type (ChatCompletion, Response, Message, GenerateContentResponse,
         mcp JSONRPCRequest/CallToolRequest) and dumped to JSON as the API sends it.
  {"op": "check", "format": f, "message": m}
      -> {"ok": true} or {"ok": false, "error": text}: `m` (the output of
         CMDC.Tool.Result.to_message/3) validated by the package's types for the next request.
"""

import json
import struct
import sys
import typing

from pydantic import TypeAdapter
from openai.types.chat import ChatCompletion, ChatCompletionToolMessageParam
from openai.types.responses import Response
from openai.types.responses.response_input_param import FunctionCallOutput, ResponseInputParam
from anthropic.types import Message, MessageParam, ToolResultBlockParam
from google.genai import types as genai
import mcp.types as mcp

TOOL_MESSAGE = TypeAdapter(ChatCompletionToolMessageParam)
CALL_OUTPUT = TypeAdapter(FunctionCallOutput)
RESPONSE_INPUT = TypeAdapter(ResponseInputParam)
MESSAGE_PARAM = TypeAdapter(MessageParam)
TOOL_RESULT = TypeAdapter(ToolResultBlockParam)


def keys_of(typed_dict):
    # A union of TypedDicts (anthropic's MessageParam): the keys of any of them.
    if typing.get_args(typed_dict):
        return [k for arg in typing.get_args(typed_dict) for k in keys_of(arg)]
    known = set(getattr(typed_dict, "__annotations__", {}))
    for attr in ("__required_keys__", "__optional_keys__"):
        known |= set(getattr(typed_dict, attr, ()))
    return [known]


def only_known_keys(typed_dict, value, where):
    # Pydantic ignores unknown keys of a TypedDict; the API refuses them.
    extras = [set(value) - known for known in keys_of(typed_dict)]
    extra = min(extras, key=len)
    if extra:
        raise ValueError(f"{where}: keys the type does not have: {sorted(extra)}")


def build(fmt, calls):
    if fmt == "openai":
        tool_calls = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
        body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt",
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": None,
                                         "tool_calls": tool_calls}}]}
        return ChatCompletion.model_validate(body).model_dump_json()
    if fmt == "openai_responses":
        output = [{"type": "reasoning", "id": "rs_1", "summary": []}]
        for c in calls:
            item = {"type": "function_call", "id": "fc_" + c["id"], "call_id": c["id"],
                    "name": c["name"], "arguments": c["arguments"], "status": "completed"}
            if c.get("namespace"):
                item["namespace"] = c["namespace"]
            output.append(item)
        body = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt",
                "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": []}
        return Response.model_validate(body).model_dump_json()
    if fmt == "anthropic":
        content = [{"type": "text", "text": "Let me check."}] + [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
            for c in calls
        ]
        body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": content, "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1}}
        return Message.model_validate(body).model_dump_json()
    if fmt in ("gemini", "gemini_json_schema"):
        parts = [genai.Part(text="Sure.")] + [
            genai.Part(function_call=genai.FunctionCall(
                name=c["name"], args=c["arguments"], **({"id": c["id"]} if c.get("id") else {})))
            for c in calls
        ]
        response = genai.GenerateContentResponse(candidates=[
            genai.Candidate(content=genai.Content(role="model", parts=parts))])
        return response.model_dump_json(by_alias=True, exclude_none=True)
    if fmt == "mcp":
        requests = []
        for c in calls:
            mcp.CallToolRequest.model_validate(
                {"method": "tools/call", "params": {"name": c["name"], "arguments": c["arguments"]}})
            req = mcp.JSONRPCRequest(jsonrpc="2.0", id=c["id"], method="tools/call",
                                     params={"name": c["name"], "arguments": c["arguments"]})
            requests.append(json.loads(req.model_dump_json(by_alias=True, exclude_none=True)))
        return json.dumps(requests)
    raise ValueError(fmt)


def check(fmt, message):
    if fmt == "openai":
        for m in message:
            TOOL_MESSAGE.validate_python(m)
            only_known_keys(ChatCompletionToolMessageParam, m, "tool message")
        return
    if fmt == "openai_responses":
        for item in message:
            CALL_OUTPUT.validate_python(item)
            only_known_keys(FunctionCallOutput, item, "function_call_output")
        RESPONSE_INPUT.validate_python(message)
        return
    if fmt == "anthropic":
        MESSAGE_PARAM.validate_python(message)
        only_known_keys(MessageParam, message, "message")
        for block in message["content"]:
            TOOL_RESULT.validate_python(block)
            only_known_keys(ToolResultBlockParam, block, "tool_result")
        return
    if fmt in ("gemini", "gemini_json_schema"):
        # extra="forbid": an unknown key anywhere is refused.
        content = genai.Content.model_validate(message)
        for part in content.parts:
            if part.function_response is None or part.function_response.name is None:
                raise ValueError(f"a part without functionResponse.name: {part}")
        return
    if fmt == "mcp":
        for response in message:
            mcp.JSONRPCResponse.model_validate(response)
            mcp.CallToolResult.model_validate(response["result"])
        return
    raise ValueError(fmt)


def read_frame():
    header = sys.stdin.buffer.read(4)
    if len(header) < 4:
        return None
    (size,) = struct.unpack(">I", header)
    return json.loads(sys.stdin.buffer.read(size))


def write_frame(value):
    body = json.dumps(value).encode()
    sys.stdout.buffer.write(struct.pack(">I", len(body)) + body)
    sys.stdout.buffer.flush()


def main():
    while (request := read_frame()) is not None:
        try:
            if request["op"] == "build":
                write_frame({"response": build(request["format"], request["calls"])})
            else:
                check(request["format"], request["message"])
                write_frame({"ok": True})
        except Exception as e:  # the test reports it, with the case
            write_frame({"ok": False, "error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
