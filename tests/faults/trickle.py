"""Stand-ins on 127.0.0.1 for a peer that answers, but never enough: one that trickles its
answer a byte a second (a status line, then a slow body that would take an hour), and one
whose answer is huge (streamed, never allocated: a 300 MiB body costs this test nothing).
Either speaks HTTP or, with `tls`, HTTPS (proxy.py's certificate for the run), and reads
each request's head before it answers, as a server does."""

from __future__ import annotations

import socket
import ssl
import threading
import time
import zlib
from collections.abc import Iterator

from tests.faults.proxy import _tls_context
from tests.operator.test_cli_timeout import Hung

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: {type}\r\nContent-Length: {length}\r\n\r\n"


def trickle() -> Iterator[bytes]:
    """A status line, then a body of 3600 bytes, one a second."""
    yield HEAD.replace(b"{type}", b"application/json").replace(b"{length}", b"3600")
    for _ in range(3600):
        time.sleep(1)
        yield b" "


def huge(size: int = 300 << 20) -> Iterator[bytes]:
    """A `size`-byte answer, sent as fast as the client reads it, 1 MiB at a time."""
    chunk = b" " * (1 << 20)
    yield HEAD.replace(b"{type}", b"text/xml").replace(b"{length}", str(size).encode())
    for _ in range(size // len(chunk)):
        yield chunk


def bomb(size: int = 1 << 30) -> Iterator[bytes]:
    """`size` bytes of zeros, gzipped as they are sent (about a thousandth of it on the
    wire), until the connection closes: what urllib3 decodes for requests."""
    yield (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
           b"Connection: close\r\n\r\n")
    gzip, zeros = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(1 << 20)
    for _ in range(size >> 20):
        yield gzip.compress(zeros)
    yield gzip.flush()


class Peer(Hung):
    """A server on 127.0.0.1 (`address`, `url`) answering every request with `answer()`'s
    pieces, each connection in a thread of its own."""

    def __init__(self, answer, tls: bool = False):
        self.answer = answer
        self.context: ssl.SSLContext | None = _tls_context() if tls else None
        self.requests = 0
        super().__init__()
        self.address = f"127.0.0.1:{self.port}"
        self.url = f"{'https' if tls else 'http'}://{self.address}"

    def take(self, connection: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            if self.context is not None:
                connection = self.context.wrap_socket(connection, server_side=True)
            head = b""
            while b"\r\n\r\n" not in head:
                read = connection.recv(65536)
                if not read:
                    return
                head += read
            self.requests += 1
            for piece in self.answer():
                connection.sendall(piece)
        except OSError:  # the client gave up: what the test wants
            return
        finally:
            connection.close()
