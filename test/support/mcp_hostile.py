"""Hostile MCP servers for cmdc_tool's client tests (issue 23): each mode breaks one rule.

Usage: python3 mcp_hostile.py MODE [N]          (stdio; standard library only)
       python3 mcp_hostile.py http MODE PORT    (Streamable HTTP, modern era; the modes of
                                                 `tools/call`: endless_sse, huge_body, ANSWERS;
                                                 list_ + an ANSWERS key: that for tools/list)

Every stdio mode speaks the legacy handshake (`server/discover` gets -32601, as an older server
answers) and then misbehaves as its name says; `good` does not misbehave at all.
"""
import json
import os
import sys
import threading
import time

MODE = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 and MODE != "http" else 0
OUT = sys.stdout.buffer
LOCK = threading.Lock()


def write(obj_or_bytes):
    data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode()
    with LOCK:
        OUT.write(data + b"\n")
        OUT.flush()


def result(id_, value):
    write({"jsonrpc": "2.0", "id": id_, "result": value})


def tool(name, schema=None):
    return {"name": name, "description": "t", "inputSchema": schema or {"type": "object"}}


def tools_page(id_, cursor):
    if MODE == "list_array":
        return result(id_, [])
    if MODE == "bad_utf8":
        head = b'{"jsonrpc":"2.0","id":%d,"result":{"tools":[{"name":"bad\xff\xfe","inputSchema":{}}]}}'
        return write(head % id_)
    if MODE == "deep":
        # Written by hand: Python's own encoder refuses this depth.
        schema = '{"type":"object","properties":{"x":' * 5000 + "{}" + "}}" * 5000
        text = '{"jsonrpc":"2.0","id":%d,"result":{"tools":[{"name":"deep","inputSchema":' % id_
        return write((text + schema + "}]}}").encode())
    if MODE == "huge_line":
        pad = "x" * (64 * 1024 * 1024)
        return write({"jsonrpc": "2.0", "id": id_, "result": {"tools": [tool("t")], "pad": pad}})
    if MODE == "endless_cursor":
        n = int(cursor or "0")
        return result(id_, {"tools": [tool("t%d" % n)], "nextCursor": str(n + 1)})
    if MODE == "silent_list":
        return None
    if MODE in ("many", "relist_loop"):
        base = int(cursor or "0")
        names = ["tool_%d_%d" % (ROUND[0], i) for i in range(N)]
        if MODE == "relist_loop":
            ROUND[0] += 1
            threading.Timer(0.01, lambda: write(
                {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})).start()
        return result(id_, {"tools": [tool(n) for n in names[base:]]})
    return result(id_, {"tools": [tool("echo", {"type": "object",
                                                "properties": {"text": {"type": "string"}}})]})


ROUND = [0]


def flood(kind):
    if kind == "stderr":
        line = b"E" * 200 + b"\n"
        err = sys.stderr.buffer
        while True:
            err.write(line * 50)
    else:
        # notify: small messages in batches; big: 1 MB messages (the window's byte bound).
        size, batch = (200, 50) if kind == "notify" else (1 << 20, 1)
        msg = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "info", "data": "x" * size}}).encode() + b"\n"
        while True:
            with LOCK:
                OUT.write(msg * batch)


def handle(msg):
    method, id_ = msg.get("method"), msg.get("id")
    if method == "server/discover":
        return write({"jsonrpc": "2.0", "id": id_,
                      "error": {"code": -32601, "message": "Method not found"}})
    if method == "initialize":
        if MODE == "init_array":
            return result(id_, [])
        caps = [] if MODE == "caps_array" else {"tools": {"listChanged": True}}
        return result(id_, {"protocolVersion": "2025-11-25", "capabilities": caps,
                            "serverInfo": {"name": "hostile-" + MODE, "version": "0"}})
    if method == "notifications/initialized":
        if MODE == "crash_loop":
            os._exit(7)
        if MODE in ("stderr_flood", "notify_flood", "big_flood"):
            threading.Thread(target=flood, args=(MODE.split("_")[0],), daemon=True).start()
        return None
    if method == "tools/list":
        return tools_page(id_, (msg.get("params") or {}).get("cursor"))
    if method == "tools/call":
        if MODE == "progress_list":
            write({"jsonrpc": "2.0", "method": "notifications/progress", "params": [1]})
            write({"jsonrpc": "2.0", "id": id_, "result": []})
            return None
        args = msg["params"].get("arguments") or {}
        if args.get("text") == "noisy":
            sys.stderr.write("warning: something odd in an earlier call\n")
            sys.stderr.flush()
        if args.get("text") == "die":
            os._exit(9)
        return result(id_, {"content": [{"type": "text", "text": args.get("text", "")}]})
    if id_ is not None:
        write({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "no"}})


def stdio():
    for line in sys.stdin.buffer:
        if line.strip():
            handle(json.loads(line))


def http(mode, port):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send_json(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            method, id_ = msg.get("method"), msg.get("id")
            if mode == "legacy_only":
                return self.legacy(msg, method, id_)
            if method == "server/discover":
                return self.send_json({"jsonrpc": "2.0", "id": id_, "result": {
                    "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                    "resultType": "complete"}})
            if method == "tools/list" and mode.startswith("list_"):
                return self.endless(*ANSWERS[mode[len("list_"):]])
            if method == "tools/list":
                return self.send_json({"jsonrpc": "2.0", "id": id_, "result": {
                    "tools": [tool("call")], "resultType": "complete"}})
            if method != "tools/call":
                self.send_response(202)
                self.send_header("Content-Length", "0")
                return self.end_headers()
            if mode == "endless_sse":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                event = ("data: " + json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "info", "data": "y" * 1000}}) + "\n\n").encode()
                try:
                    while True:
                        self.wfile.write(event * 20)
                except (BrokenPipeError, ConnectionResetError):
                    STATS["closed"] += 1
                    return
            if mode == "answer_linger":
                # the response, then the stream kept open with keep-alives for ever
                answer = json.dumps({"jsonrpc": "2.0", "id": id_, "result": {
                    "content": [{"type": "text", "text": "answered"}]}})
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 b"Content-Length: 1000000000\r\n\r\n")
                self.wfile.write(b"data: %s\n\n" % answer.encode())
                return self.endless(None, [], b": keep-alive\n\n", 0.2, False)
            if mode in ANSWERS:
                return self.endless(*ANSWERS[mode])
            if mode == "huge_body":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(300 * 1024 * 1024 + 100))
                self.end_headers()
                try:
                    self.wfile.write(b'{"jsonrpc":"2.0","id":%d,"result":{"pad":"' % id_)
                    chunk = b"z" * (1024 * 1024)
                    for _ in range(300):
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    STATS["closed"] += 1

        # An answer that never ends on its own (issue 23): `pace` seconds between writes of
        # `piece` (one bytes object, written again and again: nothing is allocated per write).
        # It stops when the client closes the connection, and counts that in STATS.
        def endless(self, status, headers, piece, pace, chunked):
            if status is not None:  # None: the head is sent already
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    piece = b"%x\r\n%s\r\n" % (len(piece), piece)
                self.end_headers()
            try:
                while True:
                    self.wfile.write(piece)
                    self.wfile.flush()
                    if pace:
                        time.sleep(pace)
            except (BrokenPipeError, ConnectionResetError):
                STATS["closed"] += 1

        # A 2025 server: no server/discover (400, as older SDKs answer a request without a
        # session), `initialize` opens a session that every later request must name.
        def legacy(self, msg, method, id_):
            STATS.setdefault("headers", []).append(self.headers.get("Mcp-Method"))
            if method == "initialize":
                body = json.dumps({"jsonrpc": "2.0", "id": id_, "result": {
                    "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "legacy-only", "version": "1"}}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Mcp-Session-Id", "s-1")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self.wfile.write(body)
            if self.headers.get("Mcp-Session-Id") != "s-1":
                body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32000, "message": "Bad Request: No valid session ID provided"}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self.wfile.write(body)
            if id_ is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                return self.end_headers()
            if method == "tools/list":
                return self.send_json({"jsonrpc": "2.0", "id": id_, "result": {"tools": [tool("call")]}})
            return self.send_json({"jsonrpc": "2.0", "id": id_, "result": {
                "content": [{"type": "text", "text": "legacy"}]}})

        def do_GET(self):
            if self.path == "/stats":
                return self.send_json(STATS)
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

    GIB = str(1024 ** 3)
    ANSWERS = {
        # a 500 whose body says it is 1 GB, sent as fast as the client reads
        "error_flood": (500, [("Content-Type", "text/plain"), ("Content-Length", GIB)],
                        b"server on fire " * 65536, 0, False),
        # a 400 whose chunked body never ends
        "chunked_error": (400, [("Content-Type", "text/plain")], b"bad request " * 5000, 0, True),
        # a 200 event stream that only ever sends keep-alive comments
        "silent_sse": (200, [("Content-Type", "text/event-stream")], b": keep-alive\n\n", 0.2,
                       True),
        # a 200 event stream whose one event never ends: tiny data lines, no blank line
        "endless_event": (200, [("Content-Type", "text/event-stream")], b"data: x\n" * 8192, 0,
                          True),
        # an event stream whose one line never ends
        "endless_line": (200, [("Content-Type", "text/event-stream")], b"data: " + b"y" * 65536,
                         0, True),
        # a 200 JSON body of 1 kB sent one byte every 0.2 s
        "trickle": (200, [("Content-Type", "application/json"), ("Content-Length", "1000")], b"{",
                    0.2, False),
    }
    STATS = {"closed": 0}
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    if MODE == "http":
        http(sys.argv[2], int(sys.argv[3]))
    else:
        stdio()
