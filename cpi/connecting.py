"""Whether a request's connection could not be opened, and why, whatever an SDK wrapped the
socket's error in: botocore, requests and urllib3, keystoneauth and redis-py each put it in
a cause, a context, an argument, a `kwargs["error"]` or a `reason`.

Why on its own: cpi.retry classifies with it (a connection never opened is not throttling,
and gets a short budget) and the Redis store of cpi.backoff says with it why a Redis was
skipped; the retry policy imports the backoff, so this cannot live in either.

Callers pass only what their SDK raises when connecting: an ssl.SSLError met elsewhere (a
pooled connection dropped mid-request) is not a failed handshake.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    #: why, in a few words: "connection refused", "the host name does not resolve (...)"
    reason: str
    #: the TLS handshake failed (an untrusted certificate, a server that speaks no TLS):
    #: asking again will not help
    tls: bool = False


def failure(exc: BaseException) -> Failure | None:
    """Why `exc`'s connection could not be opened; None when `exc` says nothing of the kind
    (a read timeout or a reset: the request may have arrived)."""
    import errno
    import socket
    import ssl

    chain = list(causes(exc))
    if any(isinstance(e, TimeoutError) and "handshake" in str(e) for e in chain):
        # urllib3 calls it a read timeout, but nothing was sent: the server took the
        # connection and never answered the TLS hello
        return Failure("the server accepted the connection but answered no TLS handshake within connect_timeout")
    if any("ReadTimeout" in type(e).__name__ for e in chain):
        return None  # keystoneauth says ConnectTimeout for read timeouts too
    for e in chain:
        if isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return Failure("the server closed the connection during the TLS handshake")
        # (verify_message and reason are set by OpenSSL, not by a constructor)
        if isinstance(e, ssl.SSLCertVerificationError):
            why = getattr(e, "verify_message", None) or getattr(e, "reason", None) or e
            return Failure(f"TLS: certificate not trusted ({why})", tls=True)
        if isinstance(e, ssl.SSLError):
            return Failure(f"TLS handshake failed ({getattr(e, 'reason', None) or e})", tls=True)
    for e in chain:
        if isinstance(e, socket.gaierror):
            return Failure(f"the host name does not resolve ({e.strerror or e})")
        if isinstance(e, ConnectionRefusedError):
            return Failure("connection refused")
        if isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL):
            return Failure(f"no route to the host ({e.strerror})")
        if isinstance(e, TimeoutError) or _connect_timeout(e):
            return Failure("no connection within connect_timeout")
    return None


def _connect_timeout(exc: BaseException) -> bool:
    """requests', urllib3's or botocore's connect timeout (keystoneauth's ConnectTimeout is
    no evidence: it says so of read timeouts too, and only what it wraps tells them apart)."""
    return (type(exc).__name__ in ("ConnectTimeout", "ConnectTimeoutError")
            and type(exc).__module__.split(".", 1)[0] in ("requests", "urllib3", "botocore"))


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception it carries, nearest first."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo and len(seen) < 32:
        e = todo.pop(0)
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        kwargs = getattr(e, "kwargs", None)
        todo += [e.__cause__, None if e.__suppress_context__ else e.__context__, getattr(e, "reason", None),
                 kwargs.get("error") if isinstance(kwargs, dict) else None, *e.args]
