"""What one answer of a vCenter or NSX manager may cost: its time and its size.

A socket's timeout bounds each read, not a request: a server that sends one byte a second
never lets a read time out, and held a call (and `cpi list vms --timeout 5`) for ever. And
http.client reads an answer whole, however large: a 300 MiB answer took 650 MiB of memory.
So every request of this cloud's connections (session.py's `_Connection`) has

- a deadline: connecting, sending and reading the complete answer end within
  `read_timeout` of the request's start (`connect_timeout` bounds the connecting within
  it). An upload of a stemcell's disk is long by right: its connection has no deadline
  while it sends, only a bound on stalls (each 1 MiB chunk sent within `read_timeout`,
  a minimum rate), and its answer then gets its own deadline;
- a cap on what is read of one answer: ANSWER_CAP bytes, status line and headers
  included.

Passing either is not a busy server that a retry would find better: the request fails at
once (no retry), as a CloudError that names the peer and the bound, not ok_to_retry."""

from __future__ import annotations

import http.client
import io
import socket
import time
from typing import Any

#: Bytes read of one answer at most. The largest answers this CPI asks for are the
#: property collector's (collector.py) and the NSX managers' listings; a generous bound,
#: not yet measured against the largest answer of a big inventory (docs/throttling.md).
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

    def __init__(self, raw: Any, sock: socket.socket, budget: Budget, read_timeout: float):
        super().__init__()
        self._raw, self._sock, self._budget, self._read_timeout = raw, sock, budget, read_timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(min(self._read_timeout, self._budget.remaining()))
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

    def __init__(self, sock: socket.socket, *args: Any, budget: Budget, read_timeout: float, **kwargs: Any):
        super().__init__(sock, *args, **kwargs)
        raw = self.fp.detach()  # the SocketIO, which keeps the socket open until the answer is read
        self.fp = io.BufferedReader(_Reader(raw, sock, budget, read_timeout))
