"""The audit trail's file side: how one line reaches the file with any number of CPI
processes writing at once (cpi.audit builds the line, and reads the files back).

A line is written with one `os.write` to a file opened O_APPEND|O_NOFOLLOW, 0600, under an
flock on that file taken within a timeout (a holder stopped with SIGSTOP must not hang every
call behind it), so no line is torn or interleaved. The line is stamped under the lock, and
the file rotated first when the line would take it past its size or when its last line is
later than now (a clock set back): each file is in time order by construction.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

from cpi import private

log = logging.getLogger("cpi.audit")

#: How every line cpi.audit writes begins, up to its time (UTC, milliseconds, "Z").
TIME_PREFIX = b'{"time": "'
TIME_END = len(TIME_PREFIX) + len("2026-01-01T00:00:00.000Z")
TIME_SHAPE = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def time_of(raw: bytes) -> bytes | None:
    """A line's time as it spells it (which sorts as the times do), or None when the line
    does not begin with one in the writer's shape (not a line of the writer's)."""
    if not raw.startswith(TIME_PREFIX):
        return None
    when = raw[len(TIME_PREFIX):TIME_END]
    return when if TIME_SHAPE.fullmatch(when) else None


def append(path: Path, data: bytes, max_bytes: int, keep: int, *, max_line: int, lock_timeout: float,
           clock: Callable[[], str]) -> None:
    """`data` (one line, its time a placeholder) appended to `path` under the file's lock,
    stamped with the time `clock` tells when it is written, the file rotated first when it would pass
    `max_bytes` (keeping `keep`) or when its last line is later than now."""
    for _ in range(20):
        # O_NONBLOCK: a FIFO planted at the path must not hang the call
        # O_RDWR: the file's last line is read (`_stamped`) under the same lock
        fd = private.open_nofollow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"{path} is not a regular file")
            _lock(fd, path, lock_timeout)
            try:
                current = os.lstat(path)
            except FileNotFoundError:
                continue  # rotated away while we waited for the lock: open the new one
            if (current.st_dev, current.st_ino) != (info.st_dev, info.st_ino):
                continue
            size = os.fstat(fd).st_size
            stamped = _stamped(fd, size, data, max_line, clock)
            if stamped is None or (size and size + len(data) > max_bytes):
                _rotate(path, keep)
                continue
            if stat.S_IMODE(info.st_mode) != 0o600:
                os.fchmod(fd, 0o600)
            view = memoryview(stamped)
            while view:  # one write; a short one (a full disk) is finished under the same lock
                written = os.write(fd, view)
                view = view[written:]
            return
        finally:
            os.close(fd)  # releases the lock
    raise OSError(f"{path} kept being rotated by other processes")


def _stamped(fd: int, size: int, data: bytes, max_line: int, clock: Callable[[], str]) -> bytes | None:
    """The line stamped with the time it is written, under the lock; None when that is
    earlier than the file's last line (the clock was set back), and the file is rotated
    first: each file of the trail is in time order by construction, which `--since` and
    `--before` rely on to seek instead of reading every line (cpi.audit's `_start`), and no line's
    time is changed to keep the order."""
    stamp = clock().encode()
    if size:
        tail = os.pread(fd, min(size, max_line), size - min(size, max_line))
        last = time_of(tail[tail.rfind(b"\n", 0, len(tail) - 1) + 1:])
        if last is not None and last > stamp:
            return None
    return data[:len(TIME_PREFIX)] + stamp + data[TIME_END:]


def _lock(fd: int, path: Path, lock_timeout: float) -> None:
    deadline = time.monotonic() + lock_timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise OSError(f"{path} stayed locked by another process for {lock_timeout:g} s") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def _rotate(path: Path, keep: int) -> None:
    """audit.log -> .1 -> .2 ... -> .keep (the oldest dropped). Called with the lock on
    the current file held; renames never follow a link planted at a rotated name."""
    if keep <= 0:
        os.unlink(path)
        return
    for index in range(keep - 1, 0, -1):
        older = Path(f"{path}.{index}")
        if os.path.lexists(older):
            os.replace(older, f"{path}.{index + 1}")
    os.replace(path, f"{path}.1")
    log.info("audit: rotated %s", path)
