"""A fault-injecting HTTP proxy on 127.0.0.1, in front of the moto server or one OpenStack
API, so tests can make the IaaS as hostile as a busy real cloud (moto never throttles and
accepts any credentials; the loopback OpenStack services are never busy):

- at a configurable rate, answer with throttling (EC2 `RequestLimitExceeded`; OpenStack
  429 or 413 with `Retry-After`), a 503, a dropped connection (`drop`: closed before
  anything reached the upstream), or a lost answer (`lost`: the upstream carried the
  request out, then the connection is dropped, so the client cannot know it did);
- enforce a requests-per-second limit (a token bucket) and throttle what exceeds it, as
  EC2's per-account buckets do;
- `inject()` deterministic faults for one request pattern, `times` times: an AWS error
  code (XML for the EC2/STS query APIs, rest-json with `x-amzn-ErrorType` for the EBS
  direct APIs), or an OpenStack status with the headers and body a real service sends;
- record every request, so tests can `count()` what the CPI sent and what it got back,
  read the parameters of the AWS query API requests it sent (`params()`), and
  bench/throttle.py can report totals (`stats`, `by_action`).

A request is known by its action: for `flavor="aws"` the query API's `Action` (or the EBS
direct operation its method and path name, e.g. `PutSnapshotBlock`); for
`flavor="openstack"` `"METHOD /path"`; for `flavor="vsphere"` the SOAP method
(`CloneVM_Task`) or `"METHOD /path"` for the file service. Patterns are searched in the action.

`flavor="vsphere"` serves HTTPS (a certificate made for the run) in front of the simulator's
HTTPS, a vCenter's busy answer is a 503 from its reverse proxy, and the fault kind `session`
answers a SOAP NotAuthenticated fault, as a vCenter does to a request of a session it dropped.

    with FaultProxy("http://127.0.0.1:5001", flavor="aws", fault_rate=0.3, rate_limit=20) as proxy:
        ... point the CPI's endpoint at proxy.url ...
        proxy.stats["throttled"]

    with FaultProxy("http://127.0.0.1:8774", flavor="openstack") as proxy:
        proxy.inject(r"/servers$", "error", method="POST", status=429, headers={"Retry-After": "1"})
        ... endpoint_overrides: {"compute": proxy.url + "/v2.1"} ...
        assert proxy.count(r"/servers$", method="POST", status=202) == 1
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import random
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple, Self

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "content-length", "server", "date", "host"}

AWS_ERROR = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
             "<Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>")
#: The HTTP status AWS answers each error code with (others: 400).
AWS_STATUS = {"RequestLimitExceeded": 503, "Unavailable": 503, "AuthFailure": 401, "InternalError": 500,
              "UnauthorizedOperation": 403, "ThrottlingException": 429, "AccessDeniedException": 403}
#: The EBS direct APIs are REST (rest-json): their operation comes from the method and path.
EBS_DIRECT_ACTIONS = (
    ("PUT", re.compile(r"^/snapshots/[^/]+/blocks/\d+$"), "PutSnapshotBlock"),
    ("POST", re.compile(r"^/snapshots/completion/[^/]+$"), "CompleteSnapshot"),
    ("POST", re.compile(r"^/snapshots$"), "StartSnapshot"),
)
_REST_JSON = {name for _, _, name in EBS_DIRECT_ACTIONS}


@dataclass
class Rule:
    """A deterministic fault: requests whose method and action match get `kind`, `times`
    times (None: always). `status`, `headers` and `body` override the kind's usual answer."""

    method: str | None
    pattern: re.Pattern
    kind: str  # throttle | overlimit | unavailable | drop | error
    times: int | None = 1
    code: str = ""  # AWS error code or OpenStack message, for kind == "error"
    status: int | None = None  # None: the kind's usual status (an AWS code's from AWS_STATUS)
    headers: dict[str, str] = field(default_factory=dict)
    body: dict | None = None  # a JSON body instead of the usual error document


_SOAP_METHOD = re.compile(rb"<(?:\w+:)?Body[^>]*>\s*<(?:\w+:)?(\w+)")
NOT_AUTHENTICATED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"'
    b' xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema"'
    b' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault>'
    b"<faultcode>ServerFaultCode</faultcode><faultstring>The session is not authenticated (fault proxy).</faultstring>"
    b'<detail><NotAuthenticatedFault xmlns="urn:vim25" xsi:type="NotAuthenticated">'
    b'<object type="Folder">group-d1</object><privilegeId>System.View</privilegeId></NotAuthenticatedFault>'
    b"</detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>")


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """A server context with a self-signed certificate for 127.0.0.1, made once per run."""
    import datetime
    import ipaddress
    import tempfile

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fault proxy")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as directory:
        cert_path, key_path = f"{directory}/cert.pem", f"{directory}/key.pem"
        with open(cert_path, "wb") as out:
            out.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(key_path, "wb") as out:
            out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
        context.load_cert_chain(cert_path, key_path)
    return context


class Seen(NamedTuple):
    """One request and the status it was answered with (None: the connection was dropped)."""

    action: str
    method: str
    path: str
    status: int | None
    dry_run: bool = False  # an EC2 request with DryRun=true (it changes nothing)
    params: dict[str, str] | None = None  # an AWS query API request's parameters (flattened, as sent)


class FaultProxy:
    def __init__(self, upstream: str, *, flavor: str = "aws", fault_rate: float = 0.0,
                 kinds: tuple[str, ...] = ("throttle", "unavailable", "drop"), rate_limit: float | None = None,
                 burst: float | None = None, retry_after: float = 1.0, seed: int | None = None):
        assert flavor in ("aws", "openstack", "vsphere")
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
        self.seen: list[Seen] = []
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._tokens = self.burst
        self._answered_tokens: dict[tuple[str, str], tuple[int, str, list, bytes]] = {}
        self._refilled = time.monotonic()
        self._server: ThreadingHTTPServer | None = None

    # -- configuration and what happened
    def inject(self, pattern: str, kind: str, *, method: str | None = None, times: int | None = 1,
               code: str = "", status: int | None = None, headers: dict[str, str] | None = None,
               body: dict | None = None) -> None:
        with self._lock:
            self.rules.append(Rule(method, re.compile(pattern), kind, times, code, status, dict(headers or {}), body))

    def clear(self) -> None:
        """Forget the injected faults (what was seen stays)."""
        with self._lock:
            self.rules.clear()

    def count(self, pattern: str, *, method: str | None = None, status: int | None = None) -> int:
        """How many requests whose action matches `pattern` (and method, and the status they
        were answered with, when given) the proxy has answered so far."""
        regex = re.compile(pattern)
        with self._lock:
            return sum(1 for seen in self.seen if regex.search(seen.action) and method in (None, seen.method)
                       and status in (None, seen.status))

    def params(self, pattern: str) -> list[dict[str, str]]:
        """The parameters of the AWS query API requests whose action matches `pattern`, in
        the order they came, as sent (`BlockDeviceMappings.1.DeviceName`: `/dev/sdb`)."""
        regex = re.compile(pattern)
        with self._lock:
            return [seen.params for seen in self.seen if seen.params is not None and regex.search(seen.action)]

    @property
    def url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
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
        if self.flavor == "vsphere":
            self._server.socket = _tls_context().wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- the decision for one request
    def _action(self, method: str, target: str, body: bytes) -> str:
        path = urllib.parse.urlsplit(target).path
        if self.flavor == "vsphere" and method == "POST" and path == "/sdk":
            found = _SOAP_METHOD.search(body)
            return found.group(1).decode() if found else "POST /sdk"
        if self.flavor in ("openstack", "vsphere"):
            return f"{method} {path}"
        for rest_method, rest_path, name in EBS_DIRECT_ACTIONS:
            if method == rest_method and rest_path.match(path):
                return name
        query = urllib.parse.parse_qs(body.decode(errors="replace"))
        query.update(urllib.parse.parse_qs(urllib.parse.urlsplit(target).query))
        return query.get("Action", [target])[0]

    def _query_params(self, action: str, body: bytes) -> dict[str, str] | None:
        if self.flavor != "aws" or action in _REST_JSON:
            return None
        return {k: v[0] for k, v in urllib.parse.parse_qs(body.decode(errors="replace")).items()}

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
        """Decide, forward or make up the answer, record it, and only then send it: a client
        that has its answer finds the request already counted."""
        action = self._action(handler.command, handler.path, body)
        with self._lock:
            self.stats["requests"] += 1
            self.by_action[action] += 1
        choice = self._choose(handler.command, action)
        rule = choice if isinstance(choice, Rule) else None
        kind = rule.kind if rule else choice
        if kind == "session" and (" " in action or action in ("Login", "Logout", "RetrieveServiceContent")):
            kind = None  # a session fault is a SOAP method's, and no answer to logging in
        reason = None
        if kind in (None, "lost"):
            status, reason, headers, payload = self._forward_once(handler, body, action)
        elif kind == "drop":
            status, headers, payload = None, [], b""
        else:
            status, fault_headers, payload = self._fault_response(kind, rule, action)
            headers = list(fault_headers.items())
        with self._lock:
            if kind is None:
                self.stats["forwarded"] += 1
            else:
                self.stats[kind] += 1
                if kind in ("throttle", "overlimit"):
                    self.stats["throttled"] += 1
            self.seen.append(Seen(action, handler.command, urllib.parse.urlsplit(handler.path).path, status,
                                  self.flavor == "aws" and b"DryRun=true" in body, self._query_params(action, body)))
        if status is None or kind == "lost":
            handler.close_connection = True
            with contextlib.suppress(OSError):  # ENOTCONN: the client is gone already, as a drop wants
                handler.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(handler, status, reason, headers, payload)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, reason: str | None, headers: list[tuple[str, str]],
              payload: bytes) -> None:
        """Every answer closes its connection, so each request is one connection: no
        keep-alive socket outlives an injected fault or a stopped proxy in the client's pool
        (where it would cost an extra, unplanned failure and skew the counts)."""
        handler.send_response(status, reason)
        for key, value in headers:
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)
        handler.close_connection = True

    def _fault_response(self, kind: str, rule: Rule | None, action: str) -> tuple[int, dict, bytes]:
        if self.flavor == "aws":
            status, headers, payload = self._aws_error(kind, rule, action)
        elif self.flavor == "vsphere":
            status, headers, payload = self._vsphere_error(kind, rule)
        else:
            status, headers, payload = self._openstack_error(kind, rule)
        if rule and rule.body is not None:
            headers["Content-Type"] = "application/json"
            payload = json.dumps(rule.body).encode()
        if rule:
            headers.update(rule.headers)
        return status, headers, payload

    def _aws_error(self, kind: str, rule: Rule | None, action: str) -> tuple[int, dict, bytes]:
        """EC2 and STS (query APIs) send errors as XML; the EBS direct APIs (rest-json) send
        the code in `x-amzn-ErrorType`, and throttle with ThrottlingException."""
        rest_json = action in _REST_JSON
        if kind == "error":
            code = (rule.code if rule else "") or "InternalError"
        elif kind == "unavailable":
            code = "Unavailable"
        else:
            code = "ThrottlingException" if rest_json else "RequestLimitExceeded"
        status = rule.status if rule and rule.status is not None else AWS_STATUS.get(code, 400)
        message = f"injected by the fault proxy: {code}"
        if rest_json:
            return status, {"Content-Type": "application/json", "x-amzn-ErrorType": code}, \
                json.dumps({"message": message}).encode()
        return status, {"Content-Type": "text/xml;charset=UTF-8"}, AWS_ERROR.format(code=code, message=message).encode()

    def _vsphere_error(self, kind: str, rule: Rule | None) -> tuple[int, dict, bytes]:
        if kind == "session":
            return 500, {"Content-Type": "text/xml; charset=utf-8"}, NOT_AUTHENTICATED
        status = (rule.status if rule else None) or 503
        return status, {"Content-Type": "text/plain", "Retry-After": f"{self.retry_after:g}"}, \
            b"503 Service Unavailable (fault proxy)"

    def _openstack_error(self, kind: str, rule: Rule | None) -> tuple[int, dict, bytes]:
        explicit = rule.status if rule else None
        if kind in ("throttle", "overlimit"):
            status = explicit or (429 if kind == "throttle" else 413)
            message = "Rate limit exceeded" if kind == "throttle" else "This request was rate-limited"
            body = {"overLimit": {"code": status, "message": f"{message} (fault proxy)",
                                  "retryAfter": self.retry_after}}
            headers = {"Content-Type": "application/json", "Retry-After": f"{self.retry_after:g}"}
            return status, headers, json.dumps(body).encode()
        if kind == "unavailable":
            return explicit or 503, {"Content-Type": "text/plain"}, b"503 Service Unavailable (fault proxy)"
        status = explicit or (400 if rule else 500)
        message = (rule.code if rule else "") or "injected by the fault proxy"
        body = json.dumps({"error": {"code": status, "message": message}}).encode()
        return status, {"Content-Type": "application/json"}, body

    def _forward_once(self, handler: BaseHTTPRequestHandler, body: bytes, action: str) -> tuple[int, str, list, bytes]:
        """EC2 answers a request repeating an earlier one's ClientToken with the earlier
        answer instead of acting twice; moto does not, so the proxy does it for it: a
        `lost` answer to a create is then as harmless here as on EC2."""
        token = None
        if self.flavor == "aws":
            token = urllib.parse.parse_qs(body.decode(errors="replace")).get("ClientToken", [None])[0]
        if token is not None:
            with self._lock:
                earlier = self._answered_tokens.get((action, token))
            if earlier is not None:
                return earlier
        answer = self._forward(handler, body)
        if token is not None and answer[0] < 300:
            with self._lock:
                self._answered_tokens[(action, token)] = answer
        return answer

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, str, list, bytes]:
        """Pass the request on as a direct client would send it: with the upstream's own
        address as Host (the OpenStack services build the links in their answers from it)
        and a Content-Length even on an empty POST/PUT/PATCH."""
        host, port = self.upstream.hostname, self.upstream.port or 80
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["Host"] = f"{host}:{port}"
        if body or handler.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body))
        if self.upstream.scheme == "https":  # the simulator's own certificate: nothing to verify here
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=300, context=ssl._create_unverified_context())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=300)
        try:
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
        return response.status, response.reason, kept, payload
