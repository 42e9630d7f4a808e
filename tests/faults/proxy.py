"""A fault-injecting HTTP proxy on 127.0.0.1, in front of the moto server or one OpenStack
API, so tests can make the IaaS as hostile as a busy real cloud:

- at a configurable rate, answer with throttling (EC2 `RequestLimitExceeded`; OpenStack
  429 or 413 with `Retry-After`), a 503, or a dropped connection (closed before any
  response, and before anything reached the upstream, so no request is half done);
- enforce a requests-per-second limit (a token bucket) and throttle what exceeds it, as
  EC2's per-account buckets do;
- `inject()` deterministic faults for one request pattern, `times` times;
- count everything, so tests and bench/throttle.py can report what the CPI received.

    with FaultProxy("http://127.0.0.1:5001", flavor="aws", fault_rate=0.3, rate_limit=20) as proxy:
        ... point the CPI's endpoint at proxy.url ...
        proxy.stats["throttled"]
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "content-length", "server", "date"}

AWS_ERROR = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
             "<Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>")


@dataclass
class Rule:
    """A deterministic fault: requests whose method and path (or EC2 Action) match get
    `status` (or a dropped connection when status is None), `times` times (None: always)."""

    method: str | None
    pattern: re.Pattern
    kind: str  # throttle | overlimit | unavailable | drop | error
    times: int | None = 1
    code: str = ""  # EC2 error code or OpenStack message, for kind == "error"
    status: int = 400


class FaultProxy:
    def __init__(self, upstream: str, *, flavor: str = "aws", fault_rate: float = 0.0,
                 kinds: tuple[str, ...] = ("throttle", "unavailable", "drop"), rate_limit: float | None = None,
                 burst: float | None = None, retry_after: float = 1.0, seed: int | None = None):
        assert flavor in ("aws", "openstack")
        self.upstream = urllib.parse.urlsplit(upstream)
        self.flavor = flavor
        self.fault_rate = fault_rate
        self.kinds = kinds
        self.rate_limit = rate_limit
        self.burst = burst if burst is not None else (rate_limit or 1.0)
        self.retry_after = retry_after
        self.rules: list[Rule] = []
        self.stats: Counter[str] = Counter()
        self.by_action: Counter[str] = Counter()
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._tokens = self.burst
        self._refilled = time.monotonic()
        self._server: ThreadingHTTPServer | None = None

    # -- configuration
    def inject(self, pattern: str, kind: str, *, method: str | None = None, times: int | None = 1,
               code: str = "", status: int = 400) -> None:
        self.rules.append(Rule(method, re.compile(pattern), kind, times, code, status))

    @property
    def url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FaultProxy":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output readable
                return

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                proxy._serve(self, body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- the decision for one request
    def _action(self, handler: BaseHTTPRequestHandler, body: bytes) -> str:
        if self.flavor == "aws":
            query = urllib.parse.parse_qs(body.decode(errors="replace"))
            query.update(urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query))
            return query.get("Action", [handler.path])[0]
        return f"{handler.command} {urllib.parse.urlsplit(handler.path).path}"

    def _choose(self, method: str, action: str) -> Rule | str | None:
        with self._lock:
            for rule in self.rules:
                if (rule.method in (None, method)) and rule.pattern.search(action) and rule.times != 0:
                    if rule.times is not None:
                        rule.times -= 1
                    return rule
            if self.rate_limit:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._refilled) * self.rate_limit)
                self._refilled = now
                if self._tokens < 1.0:
                    self.stats["rate_limited"] += 1
                    return "throttle"
                self._tokens -= 1.0
            if self.fault_rate and self._random.random() < self.fault_rate:
                return self._random.choice(self.kinds)
        return None

    def _serve(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        action = self._action(handler, body)
        with self._lock:
            self.stats["requests"] += 1
            self.by_action[action] += 1
        choice = self._choose(handler.command, action)
        kind = choice.kind if isinstance(choice, Rule) else choice
        if kind is None:
            self._forward(handler, body)
            return
        with self._lock:
            self.stats[kind] += 1
            if kind in ("throttle", "overlimit"):
                self.stats["throttled"] += 1
        if kind == "drop":
            handler.close_connection = True
            try:
                handler.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the client may already be gone; either way it gets no response
            return
        status, headers, payload = self._fault_response(kind, choice if isinstance(choice, Rule) else None)
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _fault_response(self, kind: str, rule: Rule | None) -> tuple[int, dict, bytes]:
        retry_after = {"Retry-After": f"{self.retry_after:g}"}
        if self.flavor == "aws":
            code, status = {
                "throttle": ("RequestLimitExceeded", 503),
                "overlimit": ("RequestLimitExceeded", 503),
                "unavailable": ("Unavailable", 503),
                "error": (rule.code if rule else "InternalError", rule.status if rule else 500),
            }[kind]
            payload = AWS_ERROR.format(code=code, message=f"injected by the fault proxy: {code}").encode()
            return status, {"Content-Type": "text/xml;charset=UTF-8"}, payload
        if kind == "throttle":
            body = {"overLimit": {"code": 429, "message": "Rate limit exceeded (fault proxy)", "retryAfter": self.retry_after}}
            return 429, {"Content-Type": "application/json", **retry_after}, json.dumps(body).encode()
        if kind == "overlimit":
            body = {"overLimit": {"code": 413, "message": "This request was rate-limited (fault proxy)", "retryAfter": self.retry_after}}
            return 413, {"Content-Type": "application/json", **retry_after}, json.dumps(body).encode()
        if kind == "unavailable":
            return 503, {"Content-Type": "text/plain"}, b"503 Service Unavailable (fault proxy)"
        status = rule.status if rule else 500
        return status, {"Content-Type": "application/json"}, json.dumps({"error": {"code": status, "message": rule.code if rule else ""}}).encode()

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=120)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        with self._lock:
            self.stats["forwarded"] += 1
        handler.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in _HOP_BY_HOP:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)
