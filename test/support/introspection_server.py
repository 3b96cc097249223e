"""A small OAuth 2.0 token introspection endpoint (RFC 7662) for cmdc_tool's HTTP server tests.

Usage: python introspection_server.py RESOURCE [--tls CERT_PEM KEY_PEM]
Listens on 127.0.0.1 (a free port, printed on stdout as the first line; over TLS with that
certificate when given) and answers
POST /introspect (form field `token`, HTTP Basic client credentials `rs:secret` required):
  good-token     active, aud = RESOURCE (also any token starting with good-)
  short-*        active, aud = RESOURCE, exp 2 s after its first introspection
  foreign-token  active, aud = https://other.example/mcp
  expired-token  active, exp in the past
  float-exp      active, exp a float in the future; string-exp: a string in the future
  huge-length    a content-length of 300 MB, the body written slowly
  huge-stream    300 MB without a content-length (the connection's end frames it)
  many-aud       active, aud a list of 2,000,000 entries (about 22 MB)
  anything else  {"active": false}
GET /stats answers how many times each token was introspected (JSON object).
Built on the standard library only.
"""
import base64
import json
import ssl
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOURCE = sys.argv[1]
CREDENTIALS = "Basic " + base64.b64encode(b"rs:secret").decode()
COUNTS = {}
SHORT = {}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = json.dumps(COUNTS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        if self.path != "/introspect" or self.headers.get("Authorization") != CREDENTIALS:
            self.send_response(401)
            self.end_headers()
            return
        token = form.get("token", [""])[0]
        COUNTS[token] = COUNTS.get(token, 0) + 1
        now = int(time.time())
        if token.startswith("huge-"):
            return self.huge(token)
        if token.startswith("short-"):
            exp = SHORT.setdefault(token, now + 2)
            claims = {"active": exp > now, "aud": RESOURCE, "exp": exp}
        elif token.startswith("good-"):
            claims = {"active": True, "aud": RESOURCE, "exp": now + 600}
        else:
            claims = None
        claims = claims or {
            "good-token": {"active": True, "aud": RESOURCE, "exp": now + 600, "sub": "alice"},
            "foreign-token": {"active": True, "aud": "https://other.example/mcp", "exp": now + 600},
            "expired-token": {"active": True, "aud": RESOURCE, "exp": now - 10},
            "float-exp": {"active": True, "aud": RESOURCE, "exp": now + 600.5},
            "string-exp": {"active": True, "aud": RESOURCE, "exp": str(now + 600)},
            "many-aud": {"active": True, "aud": ["x"] * 2_000_000 + [RESOURCE], "exp": now + 600},
        }.get(token, {"active": False})
        body = json.dumps(claims).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def huge(self, token):
        """300 MB of JSON-looking bytes; stops when the client hangs up."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if token == "huge-length":
            self.send_header("Content-Length", str(300_000_000))
        self.end_headers()
        chunk = b"[" + b"0," * 32_767
        try:
            self.wfile.write(b'{"active": true, "aud": ')
            for _ in range(300_000_000 // len(chunk)):
                self.wfile.write(chunk)
                if token == "huge-length":
                    time.sleep(0.01)
        except OSError:
            pass

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that refused our certificate, or hung up on a huge answer: expected."""


server = Server(("127.0.0.1", 0), Handler)
if "--tls" in sys.argv:
    at = sys.argv.index("--tls")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[at + 1], sys.argv[at + 2])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
