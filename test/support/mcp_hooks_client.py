"""Hooks and pending actions through cmdc_tool's stdio server, with the official MCP Python SDK.

Usage: python mcp_hooks_client.py SERVER_COMMAND [ARGS...]
Calls echo, previews an edit with edit_file, applies it with resolve, and prints one JSON
object with the tool lists and results seen on the way.
"""
import os
import re
import sys
import json

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text(result):
    return {"is_error": result.is_error, "text": result.content[0].text if result.content else None}


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    report: dict = {}

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            report["tools_before"] = sorted(t.name for t in (await session.list_tools()).tools)
            report["echo"] = text(await session.call_tool("echo", {"text": "plain"}))
            report["denied"] = text(await session.call_tool("echo", {"text": "rm -rf /"}))
            preview = await session.call_tool(
                "edit_file", {"path": "notes.txt", "old_text": "beta", "new_text": "BETA"}
            )
            report["preview"] = text(preview)
            action = re.search(r"pending action (pa_\d+)", preview.content[0].text).group(1)
            report["tools_pending"] = sorted(t.name for t in (await session.list_tools()).tools)
            report["resolve"] = text(
                await session.call_tool("resolve", {"id": action, "action": "apply"})
            )
            report["tools_after"] = sorted(t.name for t in (await session.list_tools()).tools)

    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
