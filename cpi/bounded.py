"""What one answer of a peer may cost: its time and its size.

A socket's timeout bounds each read, not a request: a server that sends one byte a second
never lets a read time out, and held a call (and `cpi list vms --timeout 5`) for ever. And
http.client (and urllib3 under botocore and requests) reads an answer whole, however large:
a 300 MiB answer took 650 MiB of memory from a vCenter, 1.8 GiB from an EC2 endpoint. So
every request of the vsphere cloud's connections (its session.py's `_Connection`) has

- a deadline: connecting, sending and reading the complete answer end within
  `read_timeout` of the request's start (`connect_timeout` bounds the connecting within
  it). An upload of a stemcell's disk is long by right: its connection has no deadline
  while it sends, only a bound on stalls (each 1 MiB chunk sent within `read_timeout`,
  a minimum rate), and its answer then gets its own deadline;
- a cap on what is read of one answer: ANSWER_CAP bytes, status line and headers
  included.

AWS's and OpenStack's requests go through urllib3, whose connections (`urllib3_answers`)
read each answer through the same reader: complete within the read timeout urllib3 set
(their `read_timeout`) from the moment the request is sent (connecting is bounded by
`connect_timeout`, sending by the socket's timeout, before it), and up to ANSWER_CAP.

Passing either is not a busy server that a retry would find better: the request fails at
once (no retry: cpi.retry knows these errors in any wrapping), as a CloudError that names
the peer and the bound, not ok_to_retry."""

from __future__ import annotations

import http.client
import io
import math
import socket
import time
from typing import Any

from cpi.connecting import causes

#: Bytes read of one answer at most. The largest answers this CPI asks for are the
#: property collector's (collector.py): `cpi list vms` over 10,000 VMs was one answer of
#: 24.4 MiB from vcsim, which does not page (about 2.5 KiB a VM, its extraConfig with the
#: agent's settings; a vCenter pages by its own page size). 64 MiB holds about 26,000.
ANSWER_CAP = 64 << 20


class Overdue(Exception):
    """The request (connect, send, answer) did not end within its deadline."""

    def __init__(self, seconds: float, received: int):
        self.seconds = seconds
        self.received = received
        super().__init__(f"the answer was not complete within {seconds:g}s ({received} bytes of it by then)")


class TooLarge(Exception):
    """The answer is larger than ANSWER_CAP."""

    def __init__(self, cap: int):
        self.cap = cap
        super().__init__(f"the answer is too large: more than the {cap >> 20} MiB this CPI reads of one answer")


class Budget:
    """The deadline and the count of bytes read of one request."""

    def __init__(self, seconds: float, cap: int = ANSWER_CAP):
        self.seconds = seconds
        self.cap = cap
        self.deadline = time.monotonic() + seconds
        self.received = 0

    def remaining(self) -> float:
        """Seconds left; when none are, Overdue once the peer sent something (a trickle),
        and a TimeoutError, as a socket's, when it sent nothing."""
        left = self.deadline - time.monotonic()
        if left <= 0 and not self.received:
            raise TimeoutError("timed out")  # a silent peer: a read timeout, retried as ever where safe
        if left <= 0:
            raise Overdue(self.seconds, self.received)
        return left

    def restart(self) -> None:
        """A new deadline from now (an upload's answer, once its body is sent)."""
        self.deadline = time.monotonic() + self.seconds

    def count(self, read: int) -> None:
        self.received += read
        if self.received > self.cap:
            raise TooLarge(self.cap)


class _Reader(io.RawIOBase):
    """The socket's reader (http.client's `sock.makefile("rb")`), each read waiting no
    longer than the request's deadline allows and counted against the cap."""

    def __init__(self, raw: Any, sock: socket.socket, budget: Budget, read_timeout: float | None):
        super().__init__()
        self._raw, self._sock, self._budget, self._read_timeout = raw, sock, budget, read_timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        wait = min(self._read_timeout or math.inf, self._budget.remaining())
        self._sock.settimeout(None if wait == math.inf else wait)  # urllib3 without a read timeout: none
        try:
            read = self._raw.readinto(buffer)
        except TimeoutError:
            self._budget.remaining()  # the deadline's, when it was the deadline that ran out
            raise
        self._budget.count(read or 0)
        return read

    def close(self) -> None:
        self._raw.close()
        super().close()


class Response(http.client.HTTPResponse):
    """http.client's response, read through `_Reader`."""

    def __init__(self, sock: socket.socket, *args: Any, budget: Budget, read_timeout: float | None, **kwargs: Any):
        super().__init__(sock, *args, **kwargs)
        raw = self.fp.detach()  # the SocketIO, which keeps the socket open until the answer is read
        self.fp = io.BufferedReader(_Reader(raw, sock, budget, read_timeout))


def exceeded(exc: BaseException) -> Overdue | TooLarge | None:
    """The bound `exc` says was passed, in whatever an SDK wrapped it (botocore's
    HTTPClientError, keystoneauth's): None for another failure."""
    return next((e for e in causes(exc) if isinstance(e, (Overdue, TooLarge))), None)


def message(bound: Overdue | TooLarge, peer: str) -> str:
    """What went wrong with `peer` ("the vCenter at vc:443", an endpoint's URL), for an error."""
    if isinstance(bound, TooLarge):
        return f"the answer of {peer} is too large: more than the {bound.cap >> 20} MiB this CPI reads of one answer"
    return (f"{peer} did not complete its answer within read_timeout ({bound.seconds:g}s), which bounds each whole "
            f"request ({bound.received} bytes of the answer by then)")


def _urllib3_response(sock: socket.socket, *args: Any, **kwargs: Any) -> http.client.HTTPResponse:
    """urllib3's connection has set the socket's timeout to the request's read timeout just
    before it reads the answer: that is the answer's deadline."""
    timeout = sock.gettimeout()
    budget = Budget(timeout if timeout else math.inf)
    return Response(sock, *args, budget=budget, read_timeout=timeout, **kwargs)


def urllib3_answers() -> None:
    """Every urllib3 connection of this process (botocore's, requests') reads its answers
    bounded as above. Before its first connection: botocore's keeps the class it found.

    An answer urllib3 decompresses (requests asks for gzip) is capped as it is decoded too:
    a 1 MiB gzip of zeros that a Keystone sent became 1 GiB (2.1 GiB of memory)."""
    from urllib3 import connection, response

    connection.HTTPConnection.response_class = staticmethod(_urllib3_response)  # type: ignore[assignment]
    if not getattr(response.HTTPResponse._decode, "bounded", False):
        response.HTTPResponse._decode = _decoded(response.HTTPResponse._decode)  # type: ignore[method-assign]


def _decoded(decode: Any) -> Any:
    """urllib3's `_decode`, counting what it gives of one answer against ANSWER_CAP."""

    def bounded_decode(self: Any, *args: Any, **kwargs: Any) -> bytes:
        data = decode(self, *args, **kwargs)
        self.cpi_decoded = getattr(self, "cpi_decoded", 0) + len(data)
        if self.cpi_decoded > ANSWER_CAP:
            raise TooLarge(ANSWER_CAP)
        return data

    bounded_decode.bounded = True  # type: ignore[attr-defined]
    return bounded_decode
