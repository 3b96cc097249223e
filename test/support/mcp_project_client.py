"""Starts an MCP server the way a client does from a project's .mcp.json, with the official MCP
Python SDK, and reports what it lists and answers.

Usage: python mcp_project_client.py MCP_JSON SERVER_NAME CALLS_JSON
CALLS_JSON: [[tool_name, arguments], ...]. The server starts in "/" (as Claude Desktop may start
it): the entry's own arguments must say which project it serves. Prints one JSON line.
"""
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    config_path, name, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    with open(config_path) as f:
        entry = json.load(f)["mcpServers"][name]
    env = dict(os.environ)
    env.update(entry.get("env", {}))
    params = StdioServerParameters(
        command=entry["command"], args=entry.get("args", []), env=env, cwd="/"
    )
    report: dict = {"calls": []}
    started = time.monotonic()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            report["first_list_ms"] = round((time.monotonic() - started) * 1000, 1)
            report["tools"] = sorted(t.name for t in listed.tools)
            for tool, args in calls:
                try:
                    result = await session.call_tool(tool, args)
                    text = "".join(c.text for c in result.content if hasattr(c, "text"))
                    report["calls"].append({"is_error": bool(result.is_error), "text": text})
                except Exception as e:  # an unknown tool is a JSON-RPC error
                    report["calls"].append({"is_error": True, "text": "raised: " + str(e)})
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
