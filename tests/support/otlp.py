"""An OpenTelemetry collector on 127.0.0.1 as far as the CPI can tell: it takes OTLP/HTTP
(protobuf) on /v1/traces, decodes every request with OpenTelemetry's own protobuf classes
and keeps the spans; or, as asked, it hangs or fails.

Spans are kept as plain dicts (name, ids, parent, attributes, times, status, resource) so
that tests read them without protobuf."""

from __future__ import annotations

import http.server
import threading
from typing import Any


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def decode(body: bytes) -> list[dict[str, Any]]:
    """The spans of one ExportTraceServiceRequest."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append({
                    "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                    "parent_id": span.parent_span_id.hex() or None, "attributes": _attributes(span.attributes),
                    "start_ns": span.start_time_unix_nano, "end_ns": span.end_time_unix_nano,
                    "status": span.status.code, "status_message": span.status.message, "resource": resource,
                })
    return spans


class Collector:
    """`mode`: "ok" (answers 200 with an empty ExportTraceServiceResponse), "hang" (reads
    the request and never answers until closed), "fail" (answers 503)."""

    def __init__(self, mode: str = "ok"):
        self.mode = mode
        self.requests: list[dict[str, Any]] = []
        self.spans: list[dict[str, Any]] = []
        self._released = threading.Event()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                collector.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if collector.mode == "hang":
                    collector._released.wait(60)
                    return
                if collector.mode == "fail":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                collector.spans.extend(decode(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def traces(self) -> dict[str, list[dict[str, Any]]]:
        """The spans received, by trace id."""
        found: dict[str, list[dict[str, Any]]] = {}
        for span in self.spans:
            found.setdefault(span["trace_id"], []).append(span)
        return found

    def close(self) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()


def refused_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port just freed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/traces"


def tree(spans: list[dict[str, Any]]) -> str:
    """One trace as an indented tree, each span with its start (ms after the root's) and
    duration: for a failing assertion's message, and for reading a trace by hand."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in sorted(spans, key=lambda s: s["start_ns"]):
        children.setdefault(span["parent_id"], []).append(span)
    roots = children.get(None, [])
    origin = roots[0]["start_ns"] if roots else 0
    lines: list[str] = []

    def walk(span: dict[str, Any], depth: int) -> None:
        took = (span["end_ns"] - span["start_ns"]) / 1e6
        start = (span["start_ns"] - origin) / 1e6
        keys = ("cpi.attempts", "cpi.looks", "cpi.retry_wait_s", "cpi.shared_rate_wait_s", "error.type")
        notes = ", ".join(f"{k.split('.')[-1]} {span['attributes'][k]}" for k in keys if k in span["attributes"])
        notes = f"  ({notes})" if notes else ""
        lines.append(f"{start:9.1f} ms {took:9.1f} ms  {'  ' * depth}{span['name']}{notes}")
        for child in children.get(span["span_id"], []):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return "\n".join(lines)
