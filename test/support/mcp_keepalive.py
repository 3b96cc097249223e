"""A small MCP server (2026-07-28, stateless, JSON answers) over HTTP/1.1 that counts the TCP
connections its clients open, for cmdc_tool's keep-alive tests. Standard library only.

Usage: python mcp_keepalive.py MODE PORT [IDLE_SECONDS]
  keepalive  connections kept open between requests, closed after IDLE_SECONDS idle (default 30)
  close      every answer says `Connection: close` and the connection ends
  http10     every answer is HTTP/1.0 (no keep-alive)
  drop_reused  the second request on a connection is read, then the connection closed without
             a byte of answer (a server timing an idle connection out as the request arrives)
  cut_reused   the third request on a connection gets half a status line, then the close
GET /stats: {"connections", "open", "max_open", "requests", "dropped"} (MCP connections only),
and "echoed": the texts echo was called with, in order.
Tools: echo(text), sleep(seconds).
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, PORT = sys.argv[1], int(sys.argv[2])
IDLE = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
LOCK = threading.Lock()
STATS = {"connections": 0, "open": 0, "max_open": 0, "requests": 0, "dropped": 0, "echoed": []}

TOOLS = [
    {"name": "echo", "description": "Echo text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "sleep", "description": "Sleep, then answer.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
]


def bump(**changes):
    with LOCK:
        for key, delta in changes.items():
            STATS[key] += delta
        STATS["max_open"] = max(STATS["max_open"], STATS["open"])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0" if MODE == "http10" else "HTTP/1.1"
    timeout = IDLE  # an idle connection is closed after this long

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.mcp = False
        self.served = 0

    def finish(self):
        if self.mcp:
            bump(open=-1)
        super().finish()

    def answer(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if MODE == "close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                return self.answer(json.loads(json.dumps(STATS)))
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if not self.mcp:
            self.mcp = True
            bump(connections=1, open=1)
        self.served += 1
        bump(requests=1)
        if self.served == 2 and MODE == "drop_reused":
            bump(dropped=1)
            self.close_connection = True
            return
        if self.served == 3 and MODE == "cut_reused":
            self.wfile.write(b"HTTP/1.1 20")
            self.wfile.flush()
            self.close_connection = True
            return
        msg = json.loads(body)
        id_, method = msg.get("id"), msg.get("method")
        if id_ is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            return self.end_headers()
        if method == "server/discover":
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "keepalive", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name, args = msg["params"]["name"], msg["params"].get("arguments", {})
            if name == "sleep":
                time.sleep(args.get("seconds", 0))
                text = "slept"
            else:
                text = args.get("text", "")
                with LOCK:
                    STATS["echoed"].append(text)
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            return self.answer({"jsonrpc": "2.0", "id": id_,
                                "error": {"code": -32601, "message": "no such method"}})
        result["resultType"] = "complete"
        self.answer({"jsonrpc": "2.0", "id": id_, "result": result})


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
