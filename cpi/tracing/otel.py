"""A traced call: OpenTelemetry's SDK records its spans in memory, and at the call's end
one bounded OTLP/HTTP request (protobuf) takes them to the collector.

Imported only when tracing is on (cpi.tracing.settings found an endpoint). Spans are kept
in memory and sent once, at the end of the call, not as they end: one request per call
instead of one per span, none while the cloud works, and a collector that is slow or down
costs the call at most `timeout` once. After a failed export the collector counts as down
for DOWN_FOR seconds (a private file in the CPI user's cache says so): the calls of a
deploy made meanwhile drop their spans at once, and say so in their log, instead of each
waiting for it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from cpi.logs import DEBUG, WARNING
from cpi.tracing.settings import Settings
from cpi.tracing.span import Span

if TYPE_CHECKING:
    from types import TracebackType

    from cpi.logs import CallLog

#: How long a collector that failed an export counts as down (seconds).
DOWN_FOR = 30.0

#: The most of a collector's answer read (bytes): an OTLP answer is empty or a few words.
ANSWER_LIMIT = 64 << 10

SCALARS = (str, bool, int, float)


def _value(value: object) -> Any:
    """An attribute value OpenTelemetry takes: scalars as they are, a list of scalars, or
    anything else as its str (None is dropped by the caller)."""
    if isinstance(value, SCALARS):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return str(value)


def where(endpoint: str) -> str:
    """The collector as the log names it: scheme, host and port, never a user:password in
    the URL or its query."""
    parts = urlsplit(endpoint)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


class _Span(Span):
    """A live child span; the current span inside its `with` block."""

    __slots__ = ("_scope", "_span")

    def __init__(self, tracer: otel_trace.Tracer, name: str, attributes: dict[str, object],
                 parent: otel_context.Context | None):
        self._scope = tracer.start_as_current_span(
            name, context=parent, attributes={k: _value(v) for k, v in attributes.items() if v is not None},
            record_exception=False, set_status_on_exception=False)
        self._span: otel_trace.Span | None = None

    def set(self, key: str, value: object) -> None:
        if self._span is not None and value is not None:
            self._span.set_attribute(key, _value(value))

    def fail(self, error: BaseException) -> None:
        if self._span is not None:
            self._span.set_attribute("error.type", type(error).__name__)
            self._span.set_status(Status(StatusCode.ERROR, str(error)[:512]))

    def __enter__(self) -> _Span:
        self._span = self._scope.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if error is not None:
            self.fail(error)
        self._scope.__exit__(kind, error, traceback)


class CallTrace:
    """The spans of one CPI call: the call's own (the root) and its children."""

    def __init__(self, settings: Settings, method: str, api_version: int, context: dict,
                 started_ns: int, cache: str | None = None):
        self.settings = settings
        self.cache = cache
        self.memory = InMemorySpanExporter()
        resource = Resource.create({**settings.resource, "service.name": settings.service_name})
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("cpi")
        attributes = {"bosh.method": method, "bosh.api_version": api_version,
                      "bosh.request_id": context.get("request_id"),
                      "bosh.director_uuid": context.get("director_uuid")}
        self.root = self.tracer.start_span(f"cpi {method}", start_time=started_ns,
                                           attributes={k: _value(v) for k, v in attributes.items()
                                                       if isinstance(v, SCALARS)})
        self._token = otel_context.attach(otel_trace.set_span_in_context(self.root))

    def _parent(self) -> otel_context.Context | None:
        """None (the current span) but in a thread the call started, which begins with an
        empty OpenTelemetry context: there, the call's own span."""
        if otel_trace.get_current_span().get_span_context().is_valid:
            return None
        return otel_trace.set_span_in_context(self.root)

    def child(self, name: str, attributes: dict[str, object]) -> Span:
        """A span under the current one."""
        return _Span(self.tracer, name, attributes, self._parent())

    def record(self, name: str, started_ns: int, attributes: dict[str, object]) -> None:
        """A span from `started_ns` to now, under the current one."""
        self.tracer.start_span(name, context=self._parent(), start_time=started_ns,
                               attributes={k: _value(v) for k, v in attributes.items() if v is not None}).end()

    def annotate(self, **attributes: object) -> None:
        """Attributes of the call itself (the cloud, its account, the arguments' cids)."""
        for key, value in attributes.items():
            if value is not None:
                self.root.set_attribute(key, _value(value))

    def end(self, result: object, error: Any) -> None:
        """The call's outcome on its span: the result's cid, or the error's type and
        ok_to_retry (`error` is a cpi.errors.BoshError)."""
        if error is not None:
            self.root.set_attribute("error.type", error.wire_type)
            self.root.set_attribute("bosh.ok_to_retry", bool(error.ok_to_retry))
            self.root.set_status(Status(StatusCode.ERROR, error.wire_type))
        else:
            cid = result[0] if isinstance(result, list) and result else result
            if isinstance(cid, str):
                self.root.set_attribute("bosh.result.cid", cid)
        otel_context.detach(self._token)
        self.root.end()

    # --- export -----------------------------------------------------------------------

    def export(self, log: CallLog) -> None:
        """Send the call's spans, within settings.timeout; what was not sent is counted in
        the log with why. Never raises: a trace must not change a call's outcome."""
        spans = self.memory.get_finished_spans()
        if not spans:
            return
        collector = where(self.settings.endpoint)
        down = self._down(collector)
        if down is not None:
            log.emit(WARNING, "cpi.tracing",
                     f"{len(spans)} spans dropped: the collector at {collector} {down}")
            return
        try:
            why = self._send(spans)
        except Exception as exc:  # noqa: BLE001 - an SDK surprise (an endpoint urllib3 cannot parse) drops the spans
            why = type(exc).__name__
        if why is None:
            log.emit(DEBUG, "cpi.tracing", f"{len(spans)} spans sent to {collector}")
            return
        log.emit(WARNING, "cpi.tracing", f"{len(spans)} spans dropped: the collector at {collector} "
                                                 f"did not take them ({why}); not tried again for {DOWN_FOR:.0f} s")
        self._mark_down(collector, why)

    def _send(self, spans: Any) -> str | None:
        """None when the collector took `spans`, else why not. One POST, no retry: the
        call's time is the director's, and a collector that failed is left alone for a
        while (DOWN_FOR) rather than tried again at once. The answer is read up to
        ANSWER_LIMIT bytes: nothing a collector says is worth more."""
        import urllib3
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        body = encode_spans(spans).SerializeToString()
        headers = {**self.settings.headers, "Content-Type": "application/x-protobuf"}
        started = time.monotonic()
        pool = urllib3.PoolManager(ca_certs=self.settings.ca_cert_file, retries=False,
                                   timeout=urllib3.Timeout(total=self.settings.timeout))
        try:
            answer = pool.request("POST", self.settings.endpoint, body=body, headers=headers,
                                  preload_content=False, redirect=False)
            try:
                answer.read(ANSWER_LIMIT)
            finally:
                answer.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            return f"{_reason(exc)}, after {time.monotonic() - started:.2f} s"
        finally:
            pool.clear()
        if 200 <= answer.status < 300:
            return None
        return f"HTTP {answer.status}"

    def _down_file(self) -> str | None:
        if self.cache is None:
            return None
        return os.path.join(self.cache, "collector-down.json")

    def _down(self, collector: str) -> str | None:
        """Why the collector counts as down still, or None."""
        path = self._down_file()
        if path is None:
            return None
        from cpi.private import open_state_file

        try:
            with os.fdopen(open_state_file(path), "rb") as handle:
                state = json.loads(handle.read(4096) or b"{}")
        except (OSError, ValueError):
            return None
        until = state.get("until") if isinstance(state, dict) else None
        if state.get("collector") != collector or not isinstance(until, (int, float)):
            return None
        left = until - time.time()
        if left <= 0 or left > DOWN_FOR:
            return None
        return f"failed an export {DOWN_FOR - left:.0f} s ago ({state.get('why')}); next try in {left:.0f} s"

    def _mark_down(self, collector: str, why: str) -> None:
        path = self._down_file()
        if path is None:
            return
        from cpi.private import replace_file

        try:
            replace_file(path, json.dumps({"collector": collector, "until": time.time() + DOWN_FOR,
                                           "why": why[:300]}).encode())
        except OSError as exc:
            logging.getLogger("cpi.tracing").debug("cannot note the collector down: %s", exc)


def _reason(exc: BaseException) -> str:
    """Why a request failed, in a few words: urllib3 wraps the socket's error."""
    import urllib3

    from cpi.connecting import failure

    found = failure(exc)
    if found is not None:
        return found.reason
    if isinstance(exc, urllib3.exceptions.TimeoutError):
        return "no answer in time"
    return type(exc).__name__  # (its text would quote the URL, and a query may hold a key)


def preload() -> None:
    """What an export imports (the protobuf encoder, urllib3), for the warm helper to load
    once before it forks its workers."""
    import urllib3  # noqa: F401
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: F401
