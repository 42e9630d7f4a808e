"""OpenStack API errors → retry verdicts and cpi.errors, at the openstack cloud's boundary.

Each service words its errors differently (Nova and Cinder `{"itemNotFound": {"message"}}`,
Neutron `{"NeutronError": {"type", "message"}}`, Glance a string code and HTML, Keystone
`{"error": {...}}`, Octavia `{"faultstring"}`); `ApiError` carries the status, the
service's own error type and a one-line message whatever the shape.

Throttling (429, and Nova's legacy 413 `overLimit` with a Retry-After) and 503 are retried by
cpi.retry honouring Retry-After (bosh #597: the Ruby CPI gave up after 10 tries);
auth failures become a CloudError that says which identity Keystone refused, never a secret.

keystoneauth1 is imported inside functions only: `info` imports this module.
"""

from __future__ import annotations

import dataclasses
import email.utils
import html
import json
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpi import retry
from cpi.errors import CloudError

if TYPE_CHECKING:
    from requests import Response

_TAGS = re.compile(r"<[^>]+>")


@dataclasses.dataclass(eq=False, repr=False)  # an exception: compared and shown as one
class ApiError(Exception):
    """An OpenStack API answered with an error status."""

    service: str
    method: str
    path: str
    status: int
    message: str
    error_type: str | None = None
    retry_after: float | None = None
    request_id: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.summary())

    def summary(self) -> str:
        kind = f" {self.error_type}" if self.error_type else ""
        rid = f" [{self.request_id}]" if self.request_id else ""
        return f"{self.service} {self.method} {self.path} → {self.status}{kind}: {self.message}{rid}"

    def mentions(self, *words: str) -> bool:
        text = f"{self.error_type or ''} {self.message}".lower()
        return any(word.lower() in text for word in words)


def from_response(service: str, method: str, path: str, response: Response) -> ApiError:
    """The ApiError for a `requests.Response` with an error status."""
    message, error_type, body_retry = parse_body(response)
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    if retry_after is None:
        retry_after = body_retry
    request_id = response.headers.get("x-openstack-request-id") or response.headers.get("x-compute-request-id")
    return ApiError(service, method, path, response.status_code, message or response.reason or "no message",
                    error_type, retry_after, request_id)


def parse_body(response: Response) -> tuple[str, str | None, float | None]:
    """(message, the service's error type, a body `retryAfter`) from an error response."""
    text = response.text or ""
    try:
        body = json.loads(text) if text.strip() else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        if isinstance(body.get("NeutronError"), dict):  # Neutron
            err = body["NeutronError"]
            return _clean(err.get("message") or err.get("detail") or ""), err.get("type"), None
        if isinstance(body.get("error"), dict):  # Keystone
            err = body["error"]
            return _clean(str(err.get("message") or "")), err.get("title"), None
        if len(body) == 1:  # Nova, Cinder: {"itemNotFound": {"code": 404, "message": ...}}
            (kind, err), = body.items()
            if isinstance(err, dict):
                message = _clean(str(err.get("message") or err.get("explanation") or ""))
                return message, kind, _seconds(err.get("retryAfter"))
        for key in ("message", "faultstring", "description", "detail", "title"):  # Glance, Octavia, others
            if body.get(key):
                return _clean(str(body[key])), body.get("faultcode") or body.get("title"), None
    return _clean(text)[:500], None, None


def _clean(text: str) -> str:
    """One line, no HTML (Glance wraps its messages in markup)."""
    text = html.unescape(_TAGS.sub(" ", text))
    return " ".join(text.split())


def _seconds(value: Any) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either seconds or an HTTP date."""
    if value is None:
        return None
    seconds = _seconds(value.strip())
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def classifier(*, idempotent: bool, also: Callable[[ApiError], bool] | None = None) -> retry.Classifier:
    """How cpi.retry treats one request's failure.

    429, and 413 carrying a Retry-After (legacy Nova `overLimit`): throttled. 503: the
    service did not take the request: transient. Other 5xx, timeouts and dropped
    connections: transient only for requests that are safe to repeat (reads, deletes, PUTs),
    since a POST may have been carried out. A connection that could not be opened at all is
    always safe to retry."""

    def classify(exc: BaseException) -> retry.Verdict:
        if isinstance(exc, ApiError):
            if exc.status == 429:
                return retry.Verdict(retry.Kind.THROTTLED, f"{exc.status} {exc.error_type or 'Too Many Requests'}",
                                     exc.retry_after)
            if exc.status == 413 and exc.retry_after is not None:
                # Nova's rate limiter says when to come back; Cinder's quota errors are 413
                # `overLimit` too, but without a time: those are limits, not throttling
                return retry.Verdict(retry.Kind.THROTTLED, f"413 {exc.error_type or 'overLimit'}", exc.retry_after)
            if exc.status == 503:
                return retry.Verdict(retry.Kind.TRANSIENT, "503 Service Unavailable", exc.retry_after)
            if also is not None and also(exc):
                return retry.Verdict(retry.Kind.TRANSIENT, f"{exc.status} {exc.error_type or ''}".strip(),
                                     exc.retry_after)
            if exc.status in (500, 502, 504) and idempotent:
                return retry.Verdict(retry.Kind.TRANSIENT, f"{exc.status} {exc.error_type or ''}".strip())
            return retry.PERMANENT
        return _connection_verdict(exc, idempotent)

    return classify


def unsure(exc: BaseException) -> bool:
    """Whether a failed request may nevertheless have been carried out (a dropped
    connection, a read timeout, a 500/502/504)."""
    return retry.unsure(classifier, exc)


def unreached(exc: BaseException) -> retry.Verdict | None:
    """The verdict on a request that could not open its connection (nothing was sent):
    retry.unreached's, for what keystoneauth raises when connecting (a refusal, an unknown
    host, a connect timeout, a TLS failure) and the SDK's version discovery wraps."""
    module = type(exc).__module__
    if not module.startswith("keystoneauth1") and type(exc).__name__ != "ServiceDiscoveryException":
        return None
    from keystoneauth1 import exceptions as ksa

    if module.startswith("keystoneauth1") and not isinstance(exc, ksa.ConnectionError):
        return None
    return retry.unreached(exc)


def _connection_verdict(exc: BaseException, idempotent: bool) -> retry.Verdict:
    connecting = unreached(exc)
    if connecting is not None:
        return connecting
    module = type(exc).__module__
    if module.startswith("openstack") and type(exc).__name__ == "ServiceDiscoveryException":
        # the SDK probing a service's versions (GETs) got a throttled, failed or dropped answer
        return retry.Verdict(retry.Kind.TRANSIENT, "service discovery failed")
    if not module.startswith("keystoneauth1"):
        return retry.PERMANENT
    from keystoneauth1 import exceptions as ksa

    if isinstance(exc, ksa.SSLError):
        return retry.PERMANENT
    if isinstance(exc, ksa.ConnectTimeout):
        # keystoneauth reports read timeouts as ConnectTimeout too: the request may have arrived
        return retry.Verdict(retry.Kind.TRANSIENT, "timeout") if idempotent else retry.PERMANENT
    if isinstance(exc, ksa.ConnectFailure):
        # keystoneauth says ConnectFailure both for "could not connect" (the request never
        # left) and for a connection reset mid-request (it may have been carried out)
        never_sent = any(s in str(exc) for s in ("Failed to establish a new connection", "Connection refused",
                                                  "Name or service not known", "No route to host"))
        if never_sent or idempotent:
            return retry.Verdict(retry.Kind.TRANSIENT, "cannot connect" if never_sent else "connection reset")
        return retry.PERMANENT
    if isinstance(exc, ksa.UnknownConnectionError):
        return retry.Verdict(retry.Kind.TRANSIENT, "connection error") if idempotent else retry.PERMANENT
    status = getattr(exc, "http_status", None)
    if isinstance(exc, ksa.http.HttpError) and status in (413, 429, 503):
        # raised by keystoneauth itself (the token request); a 413 is throttling only when
        # it says when to come back, as for the other services
        retry_after = _retry_after_of(exc)
        if status == 413 and retry_after is None:
            return retry.PERMANENT
        return retry.Verdict(retry.Kind.TRANSIENT if status == 503 else retry.Kind.THROTTLED, f"keystone {status}",
                             retry_after)
    return retry.PERMANENT


def _retry_after_of(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    return parse_retry_after(response.headers.get("Retry-After"))


def summary(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return exc.summary()
    return f"{type(exc).__name__}: {exc}"


def to_cloud_error(exc: BaseException, what: str, identity: str, auth_url: str) -> CloudError:
    """The CloudError for an OpenStack failure no caller expected. Names the request and the
    service's answer; for auth failures, the identity Keystone refused (never a secret, nor
    a `user:password@` written into auth_url)."""
    if "@" in auth_url:
        scheme, _, rest = auth_url.partition("://")
        host, slash, path = rest.partition("/")
        auth_url = f"{scheme}://{host.rpartition('@')[2]}{slash}{path}"
    if isinstance(exc, ApiError):
        if exc.status == 401:
            return CloudError(f"{what}: {exc.service} refused the token ({exc.message}); authenticated as {identity}")
        if exc.status == 403:
            return CloudError(f"{what}: not allowed for {identity}: {exc.summary()}")
        if exc.status in (429, 413, 503):
            return CloudError(
                f"{what}: OpenStack kept refusing ({exc.summary()}) beyond retry_budget_seconds/max_retries; raise "
                "them or run fewer parallel calls",
                ok_to_retry=True,
            )
        return CloudError(f"{what} failed: {exc.summary()}")
    module = type(exc).__module__
    if module.startswith("keystoneauth1"):
        from keystoneauth1 import exceptions as ksa

        if isinstance(exc, ksa.Unauthorized):
            return CloudError(
                f"{what}: Keystone at {auth_url} refused the credentials of {identity} ({_ksa_message(exc)}). Check "
                "username/api_key (or the application credential), the domains and the project."
            )
        if isinstance(exc, ksa.Forbidden):
            return CloudError(f"{what}: Keystone at {auth_url} does not let {identity} do this: {_ksa_message(exc)}")
        if isinstance(exc, ksa.EndpointNotFound):
            return CloudError(f"{what}: {exc}. Check region and endpoint_type, or set endpoint_overrides.")
        if isinstance(exc, ksa.SSLError):
            return CloudError(f"{what}: TLS verification failed ({exc}); set ca_cert to the CA of the OpenStack APIs")
        if isinstance(exc, ksa.ConnectionError):
            return CloudError(f"{what}: cannot reach OpenStack ({exc}); check auth_url and the network",
                              ok_to_retry=True)
        if isinstance(exc, ksa.http.HttpError):
            return CloudError(f"{what}: Keystone at {auth_url}: {exc.http_status} {_ksa_message(exc)}")
        if isinstance(exc, ksa.DiscoveryFailure):
            return CloudError(f"{what}: cannot find the API version at {auth_url}: {exc}")
        return CloudError(f"{what}: {type(exc).__name__}: {exc}")
    return CloudError(f"{what}: unexpected {type(exc).__name__}: {exc}")


def _ksa_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if response is not None:
        message, _, _ = parse_body(response)
        if message:
            return message
    return str(getattr(exc, "message", None) or exc)
