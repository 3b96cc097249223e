"""Start-up of an MCP stdio server as the official MCP Python client sees it, for bench/mcp.exs.

Usage: python mcp_start_py.py SERVER_COMMAND [ARGS...]
Prints one JSON line: {"first_list_ms": ..., "tools": n}, the time from spawning the server to
the answer of the first tools/list (initialize included).
"""
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    started = time.perf_counter()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            ms = (time.perf_counter() - started) * 1000
    print(json.dumps({"first_list_ms": ms, "tools": len(listed.tools)}))


if __name__ == "__main__":
    anyio.run(main)
