"""End-to-end MCP client for cmdc_tool's stdio server, using the official MCP Python SDK.

Usage: python mcp_client.py SERVER_COMMAND [ARGS...]
Prints one JSON object with what it observed; exits non-zero on an unexpected failure.
stdin may hold a JSON list of extra calls: [[tool_name, arguments], ...].
`stream_errors` lists what the transport could not read (anything on stdout that is not a
JSON-RPC message shows up there).
"""
import asyncio
import json
import os
import sys
import time

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    # The SDK passes a minimal environment by default; the server must see MIX_ENV and the like.
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    report: dict = {}
    errors: list = []

    async def on_message(message) -> None:
        if isinstance(message, Exception):
            errors.append(repr(message))

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            started = time.monotonic()
            init = await session.initialize()
            report["protocol_version"] = init.protocol_version
            report["server_name"] = init.server_info.name

            listed = await session.list_tools()
            report["list_time_ms"] = round((time.monotonic() - started) * 1000, 1)
            report["tools"] = sorted(t.name for t in listed.tools)
            report["tool_meta"] = {
                t.name: {
                    "title": t.title,
                    "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True)
                    if t.annotations
                    else None,
                    "output_schema": t.output_schema,
                }
                for t in listed.tools
            }

            ok = await session.call_tool("echo", {"text": "héllo"})
            report["echo"] = {"is_error": ok.is_error, "text": ok.content[0].text}

            bad = await session.call_tool("echo", {"text": 5})
            report["bad_args"] = {"is_error": bad.is_error, "text": bad.content[0].text}

            try:
                await session.call_tool("no_such_tool", {})
                report["unknown"] = "no error"
            except Exception as e:  # the SDK raises on a JSON-RPC error
                report["unknown"] = str(e)

            extra = sys.stdin.read() if not sys.stdin.isatty() else ""
            for name, args in json.loads(extra or "[]"):
                progress: list = []

                async def on_progress(value, total, message, progress=progress):
                    progress.append(message)

                try:
                    result = await session.call_tool(name, args, progress_callback=on_progress)
                except Exception as e:  # e.g. the SDK's own check of structuredContent
                    report.setdefault("calls", []).append({"name": name, "exception": str(e)})
                    continue
                report.setdefault("calls", []).append(
                    {
                        "name": name,
                        "is_error": result.is_error,
                        "text": result.content[0].text if result.content else None,
                        "progress": progress,
                        "structured": result.structured_content,
                    }
                )

            # Cancel a slow call: the SDK sends notifications/cancelled when the caller gives up.
            if "countdown" in report["tools"]:
                t0 = time.monotonic()
                with anyio.move_on_after(0.5):
                    await session.call_tool("countdown", {"n": 100, "delay_ms": 1000})
                report["cancel_after_ms"] = round((time.monotonic() - t0) * 1000)
                # The server must still answer after a cancellation.
                again = await session.call_tool("echo", {"text": "still here"})
                report["after_cancel"] = again.content[0].text

    report["stream_errors"] = errors
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
