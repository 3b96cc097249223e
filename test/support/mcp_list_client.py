"""Lists the tools of a stdio MCP server with the official MCP Python SDK's `mcp.Client`.

Usage: python mcp_list_client.py MODE COMMAND [ARGS...]
  MODE  auto | legacy | 2026-07-28 (mcp.Client's `mode`)
Prints one JSON object: the protocol version and each tool as the SDK read it (by alias, no
None fields). Nothing here is cmdc_tool's code.
"""
import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    mode, command, *args = sys.argv[1:]
    server = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with Client(server, mode=mode) as client:
        listed = await client.list_tools()
        tools = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
        print(json.dumps({"protocol_version": client.protocol_version, "tools": tools}))


anyio.run(main)
