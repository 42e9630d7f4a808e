"""Opt-in OpenTelemetry traces: one span per CPI call, a child for each IaaS request and
each wait, sent by OTLP/HTTP to the operator's collector at the end of the call.

Off (the default) this module is all that is imported: `span()` costs one global
lookup and hands back a shared do-nothing span, so `info` and warm calls keep their
figures (bench/calls.py). On, `cpi.tracing.otel` holds the SDK; it is imported only when
`begin` finds settings (cpi.json's `tracing`, or the standard `OTEL_EXPORTER_OTLP_*`
variables of a checkout). The traced call is this module's one variable: each call is its
own process (or warm worker), and a span begun in a thread the call started is still a
child of the call's (cpi.tracing.otel), not a trace of its own. No `contextvars` here: this
module is imported by every call, traced or not.
"""

from __future__ import annotations

import os

from cpi.tracing.span import NOTHING, Span

TYPE_CHECKING = False  # not `typing`: this module is on every call's path

if TYPE_CHECKING:
    from cpi.logs import CallLog
    from cpi.tracing.otel import CallTrace

#: The call being traced, None when tracing is off.
_current: CallTrace | None = None




def span(name: str, **attributes: object) -> Span:
    """A child of the current span, as a context manager (`with tracing.span(...) as s:`)."""
    return NOTHING if _current is None else _current.child(name, attributes)


def record(name: str, started_ns: int, **attributes: object) -> None:
    """A span that began at `started_ns` (time.time_ns()) and ends now, under the current
    one: for a wait known to have been one only once it is over (the shared rate's)."""
    if _current is not None:
        _current.record(name, started_ns, attributes)


def active() -> CallTrace | None:
    """The call's trace, if this call is traced."""
    return _current


def activate(trace: CallTrace | None) -> None:
    """Make `trace` the current call's (cpi.tracing.otel.start does, for the call it opens)."""
    global _current
    _current = trace


def _wanted(raw_config: dict) -> bool:
    """Whether tracing may be on: cpi.json has a `tracing` section or an OTEL_ variable is
    set. Checked before settings are read, so that a call without either imports nothing."""
    cloud = raw_config.get("cloud")
    properties = cloud.get("properties") if type(cloud) is dict else None
    if type(properties) is dict and "tracing" in properties:
        return True
    return any(name.startswith("OTEL_") for name in os.environ)


def begin(raw_config: dict, method: str, api_version: int, context: dict, started_ns: int,
          call_log: CallLog) -> None:
    """Trace this call if the settings say so (cpi.tracing.settings), from `started_ns`.
    A trace that cannot start leaves the call untraced and says why in its log: tracing
    never changes a call's outcome."""
    if not _wanted(raw_config):
        return
    from cpi.tracing import settings

    found = settings.read(raw_config)
    if found is None:
        return
    for value in found.headers.values():
        call_log.redactor.add(value)  # a collector's API key rides in a header
    call_log.redactor.collect(found.endpoint)  # or in the URL
    call_log.attach()  # the SDK's own warnings go through the call's log, masked
    from cpi import private, site_packages

    site_packages.enable()
    try:
        cache: str | None = str(private.private_dir(private.cache_dir("tracing", "HOME"), "the tracing cache"))
    except Exception as exc:  # noqa: BLE001 - without it only the collector-down note is lost
        call_log.emit(30, "cpi.tracing", f"no cache for the collector's state: {exc}")
        cache = None
    try:
        from cpi.tracing.otel import CallTrace

        activate(CallTrace(found, method, api_version, context, started_ns, cache))
    except Exception as exc:  # noqa: BLE001 - an SDK that cannot load must not fail the call
        call_log.emit(30, "cpi.tracing", f"tracing is on but cannot start: {type(exc).__name__}: {exc}")


def finish(result: object, error: object, call_log: CallLog) -> None:
    """End the call's span with its outcome and send the trace (bounded; see cpi.tracing.otel)."""
    trace = _current
    if trace is None:
        return
    activate(None)
    try:
        trace.end(result, error)
        trace.export(call_log)
    except Exception as exc:  # noqa: BLE001 - whatever tracing does, the call gets its response
        call_log.emit(30, "cpi.tracing", f"the trace was not sent: {type(exc).__name__}: {exc}")
