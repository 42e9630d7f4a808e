"""An HTTP proxy in front of moto that answers chosen EC2 actions with an AWS error,
so tests can throttle or refuse the CPI the way real EC2 does (moto never throttles and
accepts any credentials)."""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ERROR_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
    "<Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>"
)
STATUS = {"RequestLimitExceeded": 503, "AuthFailure": 401, "InternalError": 500, "UnauthorizedOperation": 403,
          "ThrottlingException": 429, "AccessDeniedException": 403}
#: EBS direct APIs are REST (rest-json): the action comes from the method and path.
REST_ACTIONS = (
    ("PUT", re.compile(r"^/snapshots/[^/]+/blocks/\d+$"), "PutSnapshotBlock"),
    ("POST", re.compile(r"^/snapshots/completion/[^/]+$"), "CompleteSnapshot"),
    ("POST", re.compile(r"^/snapshots$"), "StartSnapshot"),
)


class FaultProxy:
    """`faults[action] = (code, times)`: the next `times` requests of `action` fail with
    `code` (times=None: all of them). `seen` counts every request by action."""

    def __init__(self, upstream: str):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.faults: dict[str, tuple[str, int | None]] = {}
        self.seen: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                return

            def do_POST(self):
                self._handle()

            def do_PUT(self):
                self._handle()

            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urllib.parse.urlsplit(self.path).path
                rest = next((name for method, pattern, name in REST_ACTIONS
                             if method == self.command and pattern.match(path)), None)
                if rest:
                    action = rest
                else:
                    action = urllib.parse.parse_qs(body.decode(errors="replace")).get("Action", ["?"])[0]
                fault = proxy._take(action)
                if not fault:
                    self._forward(body)
                    return
                self.send_response(STATUS.get(fault, 400))
                if rest:  # rest-json errors: the code travels in a header
                    payload = json.dumps({"message": f"injected {fault}"}).encode()
                    self.send_header("Content-Type", "application/json")
                    self.send_header("x-amzn-ErrorType", fault)
                else:
                    payload = ERROR_XML.format(code=fault, message=f"injected {fault}").encode()
                    self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _forward(self, body: bytes):
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                conn.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _take(self, action: str) -> str | None:
        with self._lock:
            self.seen[action] += 1
            fault = self.faults.get(action)
            if not fault:
                return None
            code, times = fault
            if times is not None:
                if times <= 0:
                    return None
                self.faults[action] = (code, times - 1)
            self.failed[action] += 1
            return code

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
