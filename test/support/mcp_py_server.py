"""An MCP server built with the official Python SDK (mcp on PyPI), for cmdc_tool's client tests.

Usage: python mcp_py_server.py stdio
       python mcp_py_server.py http PORT            (stateful: legacy sessions)
       python mcp_py_server.py http-stateless PORT
Nothing here is cmdc_tool's code: the protocol side is entirely the SDK's.
"""
import os
import sys

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer

server = MCPServer("py-sdk-server")
CANCELLED = {"count": 0}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Count to steps, reporting progress at each one."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
        await anyio.sleep(0.05)
    return f"counted to {steps}"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, noticing cancellation."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        CANCELLED["count"] += 1
        raise
    return "slept"


@server.tool()
def cancelled() -> int:
    """How many sleeps were cancelled."""
    return CANCELLED["count"]


@server.tool()
async def crash(after: float = 0.2) -> str:
    """Exit the whole server process in the middle of the call."""
    await anyio.sleep(after)
    os._exit(3)


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"failed on purpose: {reason}")


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"\x00" * 8, format="png")


@server.tool()
def weather(city: str) -> dict:
    """Structured output."""
    return {"city": city, "temperature": 21}


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds a tool named `late` and tells the client (notifications/tools/list_changed)."""

    def late() -> str:
        """A tool added while the server runs."""
        return "late tool here"

    server.add_tool(late)
    # Both eras: the session's notification (2025 clients), the subscription bus
    # (`subscriptions/listen` streams of 2026-07-28 clients).
    await ctx.request_context.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "grown"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            stateless_http=sys.argv[1] == "http-stateless",
        )
