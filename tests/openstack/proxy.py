"""A small HTTP proxy on 127.0.0.1 in front of one OpenStack API, answering chosen requests
with an error before passing the rest through: the CPI is pointed at it with
`endpoint_overrides` and must ride out 429/413 (Retry-After) and 503 the way it would from
a real, busy cloud.

    with FaultProxy("http://127.0.0.1:8774") as proxy:
        proxy.inject("POST", r"/servers$", 429, headers={"Retry-After": "1"}, times=1)
        ... endpoint_overrides: {"compute": proxy.url + "/v2.1"} ...
        assert proxy.count("POST", r"/servers$") == 2
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "content-length"}


@dataclass
class Fault:
    method: str
    path: re.Pattern
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict | None = None
    times: int | None = 1  # None: every matching request

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and bool(self.path.search(path)) and (self.times is None or self.times > 0)


class FaultProxy:
    def __init__(self, upstream: str):
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream_host = parsed.hostname
        self.upstream_port = parsed.port or 80
        self._faults: list[Fault] = []
        self.seen: list[tuple[str, str, int]] = []  # (method, path, status answered)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def inject(self, method: str, path_regex: str, status: int, *, headers: dict[str, str] | None = None,
               body: dict | None = None, times: int | None = 1) -> None:
        with self._lock:
            self._faults.append(Fault(method, re.compile(path_regex), status, dict(headers or {}), body, times))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def count(self, method: str, path_regex: str, status: int | None = None) -> int:
        pattern = re.compile(path_regex)
        with self._lock:
            return sum(1 for m, p, s in self.seen
                       if m == method and pattern.search(p) and (status is None or s == status))

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    if fault.times is not None:
                        fault.times -= 1
                    return fault
        return None

    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.seen.append((method, path, status))

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # keep pytest's output clean
                return

            def _relay(self):
                path = urllib.parse.urlsplit(self.path).path
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._fault_for(self.command, path)
                if fault is not None:
                    payload = json.dumps(fault.body if fault.body is not None else
                                         {"error": {"code": fault.status, "message": "injected by the test proxy"}})
                    data = payload.encode()
                    self.send_response(fault.status)
                    for key, value in fault.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(data)
                    self.close_connection = True
                    proxy._record(self.command, path, fault.status)
                    return
                upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=300)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() != "host"}
                headers["Host"] = f"{proxy.upstream_host}:{proxy.upstream_port}"
                if body or self.command in ("POST", "PUT", "PATCH"):
                    headers["Content-Length"] = str(len(body))
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                finally:
                    upstream.close()
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                self.close_connection = True
                proxy._record(self.command, path, response.status)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _relay

        return Handler
