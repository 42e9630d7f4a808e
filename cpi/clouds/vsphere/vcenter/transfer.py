"""Files to and from the vCenter over HTTPS: the agent's env ISO and a persistent disk's
metadata on a datastore (`/folder/<path>?dcPath=&dsName=`), and a stemcell's disks into an
NFC lease.

Every request goes through the session's connection class (bounded connect and reads, TCP
keepalive) with its cookie, and is retried by cpi.retry like a SOAP request: a whole-file
PUT, a GET and a DELETE are safe to repeat. An upload streams from its file in chunks, and
calls `progress` between them, which an NFC lease needs to stay alive.

Like the SOAP stub (session.py), this is where a change over HTTP is written to the audit
trail and, under `cpi plan`, withheld (planned.py): a datastore file written or deleted, a
tag attached, a stemcell disk uploaded.
"""

from __future__ import annotations

import http.client
import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from cpi import retry
from cpi.channel import Request

from .. import errors
from . import audited

if TYPE_CHECKING:
    from cpi.plan import Plan

    from .session import Session

log = logging.getLogger("cpi.clouds.vsphere")

CHUNK = 1 << 20
#: an NFC lease expires after about five minutes without progress
PROGRESS_EVERY = 30.0


def datastore_path(datacenter: str, datastore: str, path: str) -> str:
    """The vCenter's URL path of file `path` on `datastore` of `datacenter`."""
    query = urllib.parse.urlencode({"dcPath": datacenter, "dsName": datastore})
    return f"/folder/{urllib.parse.quote(path.lstrip('/'))}?{query}"


def request(session: Session, method: str, path: str, *, body: bytes | None = None, ok: tuple[int, ...] = (200, 201),
            content_type: str = "application/octet-stream", headers: dict[str, str] | None = None,
            changes: bool | None = None) -> tuple[int, bytes]:
    """(status, body) of one request to the vCenter, with the session's cookie (or, given,
    `headers` instead: the REST API's own session); a status outside `ok` (and not 404, which
    callers read as "not there") fails as a CloudError naming the request.

    `changes`: whether the request changes anything; by default every method but GET, HEAD
    and OPTIONS does (a REST call that only reads with POST says so). A change is written to
    the audit trail, and withheld under `cpi plan`."""
    what = f"{method} {path.split('?', 1)[0]}"
    if changes is None:
        changes = method not in audited.HTTP_READS

    def send() -> tuple[int, bytes]:
        session.requests += 1
        connection = session.open_connection()
        try:
            sent = dict(headers) if headers is not None else {"Cookie": session.cookie}
            if body is not None:
                sent["Content-Type"] = content_type
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        if response.status == 503 or (response.status >= 500 and method in ("GET", "PUT", "DELETE", "HEAD")):
            raise http.client.HTTPException(f"{response.status} {response.reason}")
        return response.status, data

    def retrying(sending: Callable[[], tuple[int, bytes]]) -> tuple[int, bytes]:
        try:
            status, data = retry.call(sending, classify=errors.classifier(idempotent=True), what=what,
                                      budget=session.budget, service="datastore")
        except Exception as exc:  # noqa: BLE001 - the wire's failures leave as a CloudError, scrubbed
            raise session.translate(exc, what) from None
        if status not in ok and status != 404:
            raise session.translate(http.client.HTTPException(f"{status} {data[:200]!r}"), what)
        return status, data

    def withhold(plan: Plan) -> tuple[int, bytes]:
        from . import planned

        return planned.http(plan, method, path, body)

    def audit(answer: tuple[int, bytes]) -> None:
        if answer[0] != 404:
            audited.http_after(method, path, body, plan=None)

    return session.channel.send(Request(what, changes, path), send, retrying=retrying, withhold=withhold, audit=audit)


def upload(session: Session, url: str, source: BinaryIO, size: int, *, method: str = "PUT",
           progress: Callable[[int], None] | None = None, what: str) -> None:
    """Stream `size` bytes of `source` to `url` (an NFC lease's device URL, `*` for the
    vCenter itself), calling `progress(bytes sent)` at most every PROGRESS_EVERY seconds.
    One attempt: a lease's upload cannot be resumed, and a failed one aborts the import.
    Under `cpi plan` nothing is sent: the plan lists the upload."""

    def stream() -> None:
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname if parsed.hostname and parsed.hostname != "*" else None
        connection = session.open_connection(host, parsed.port if host else None, streaming=True)
        started = time.monotonic()
        try:
            target = parsed.path + (f"?{parsed.query}" if parsed.query else "")
            connection.putrequest(method, target)
            connection.putheader("Cookie", session.cookie)
            connection.putheader("Content-Type", "application/x-vnd.vmware-streamVmdk")
            connection.putheader("Content-Length", str(size))
            connection.endheaders()
            sent = 0
            last = time.monotonic()
            while sent < size:
                chunk = source.read(min(CHUNK, size - sent))
                if not chunk:
                    raise OSError(f"the file ended after {sent} of {size} bytes")
                connection.send(chunk)
                sent += len(chunk)
                if progress is not None and time.monotonic() - last >= PROGRESS_EVERY:
                    progress(sent)
                    last = time.monotonic()
            response = connection.getresponse()
            response.read()
        except Exception as exc:  # noqa: BLE001 - the wire's failures leave as a CloudError, scrubbed
            raise session.translate(exc, what) from None
        finally:
            connection.close()
        if response.status not in (200, 201):
            raise session.translate(http.client.HTTPException(f"{response.status} {response.reason}"), what)
        elapsed = time.monotonic() - started
        log.info("%s: %d MiB in %.1fs", what, size >> 20, elapsed)

    def withhold(plan: Plan) -> None:
        from . import planned

        planned.upload(plan, url, size, what)

    # one attempt, as said: the channel sends it once (`retrying` calls it), or a plan lists it
    session.channel.send(Request(what, True), stream, retrying=lambda sending: sending(), withhold=withhold,
                         audit=lambda _: audited.upload_after(url, size, plan=None))
