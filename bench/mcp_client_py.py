"""The official MCP Python client against a server, for bench/mcp_client.exs.

Usage: python mcp_client_py.py CALLS CONCURRENCY stdio SERVER_COMMAND [ARGS...]
       python mcp_client_py.py CALLS CONCURRENCY http URL
Prints one JSON line: {"sequential": calls_per_s, "concurrent": calls_per_s}.
"""
import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def measure(session: ClientSession, calls: int, concurrency: int) -> dict:
    for _ in range(20):  # warm up
        await session.call_tool("add", {"a": 1, "b": 2})
    started = time.perf_counter()
    for i in range(calls):
        await session.call_tool("add", {"a": i, "b": 1})
    sequential = calls / (time.perf_counter() - started)

    async def worker(n: int) -> None:
        for i in range(n):
            await session.call_tool("add", {"a": i, "b": 1})

    started = time.perf_counter()
    await asyncio.gather(*(worker(calls // concurrency) for _ in range(concurrency)))
    concurrent = (calls // concurrency * concurrency) / (time.perf_counter() - started)
    return {"sequential": sequential, "concurrent": concurrent}


async def main() -> None:
    calls, concurrency, transport = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if transport == "stdio":
        params = StdioServerParameters(command=sys.argv[4], args=sys.argv[5:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                print(json.dumps(await measure(session, calls, concurrency)))
    else:
        from mcp.client.streamable_http import streamable_http_client

        async with streamable_http_client(sys.argv[4]) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                print(json.dumps(await measure(session, calls, concurrency)))


asyncio.run(main())
