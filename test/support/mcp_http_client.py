"""Drives cmdc_tool's MCP server with the official MCP Python SDK's `mcp.Client`, in either era.

Usage: python mcp_http_client.py MODE TARGET [--marker PATH] [COMMAND ARGS...]
  MODE    auto | legacy | 2026-07-28 (mcp.Client's `mode`)
  TARGET  a URL (Streamable HTTP) or `stdio` (then COMMAND ARGS start the server)
  --marker PATH  open subscriptions/listen (modern only), create PATH once acknowledged, and
                 wait up to 60 s for a tools-list change (the test changes the tool list).
Prints one JSON object with what it observed. Nothing here is cmdc_tool's code.
"""
import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    mode, target, *rest = sys.argv[1:]
    marker = None
    if rest[:1] == ["--marker"]:
        marker, rest = rest[1], rest[2:]
    if target == "stdio":
        server = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
    else:
        server = target
    report: dict = {}

    async with Client(server, mode=mode) as client:
        report["protocol_version"] = client.protocol_version
        info = client.server_info
        report["server_name"] = info.name if info else None
        listed = await client.list_tools()
        report["tools"] = [t.name for t in listed.tools]

        ok = await client.call_tool("echo", {"text": "héllo"})
        report["echo"] = {"is_error": ok.is_error, "text": ok.content[0].text}
        bad = await client.call_tool("echo", {"text": 5})
        report["bad_args"] = {"is_error": bad.is_error, "text": bad.content[0].text}
        try:
            await client.call_tool("no_such_tool", {})
            report["unknown"] = "no error"
        except Exception as e:  # the SDK raises on a JSON-RPC error
            report["unknown"] = str(e)

        if "countdown" in report["tools"]:
            progress: list = []

            async def on_progress(value, total, message):
                progress.append(message)

            r = await client.call_tool("countdown", {"n": 3, "delay_ms": 20}, progress_callback=on_progress)
            report["countdown"] = {"text": r.content[0].text, "progress": progress}

        if marker:
            async with client.listen(tools_list_changed=True) as sub:
                report["honored"] = sub.honored.model_dump(by_alias=True, exclude_none=True)
                open(marker, "w").close()
                with anyio.move_on_after(60):
                    async for event in sub:
                        report["event"] = type(event).__name__
                        break
            report["tools_after"] = [t.name for t in (await client.list_tools()).tools]

    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
