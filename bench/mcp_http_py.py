"""The reference for bench/mcp_http.exs: the official MCP Python SDK's Streamable HTTP server
(uvicorn) serving one trivial tool, `echo`, in its fastest setting (stateless, JSON responses).

Usage: python mcp_http_py.py PORT
Nothing here is cmdc_tool's code.
"""
import sys

from mcp.server.mcpserver import MCPServer

# Access logs off: the reference at its best.
server = MCPServer("py-sdk-bench", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Echo the given text back."""
    return text


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), json_response=True, stateless_http=True)
