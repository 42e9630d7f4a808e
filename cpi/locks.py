"""Cross-process locks keyed by resource id.

Every CPI call is its own process, so only the file system can serialise them. flock(2)
locks vanish with the process that held them, so a CPI killed mid-call never leaves a
resource locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import time
from pathlib import Path
from typing import Iterator

from cpi.errors import CloudError

log = logging.getLogger(__name__)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@contextlib.contextmanager
def locked(lock_dir: Path, *names: str, timeout: float = 300.0) -> Iterator[None]:
    """Hold exclusive locks on every name, taken in sorted order so that two processes
    locking the same pair (a VM and a disk) can never deadlock."""
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        for name in sorted(set(names)):
            stack.enter_context(_one(lock_dir / f"{_SAFE.sub('_', name)}.lock", name, timeout))
        yield


@contextlib.contextmanager
def _one(path: Path, name: str, timeout: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        start = time.monotonic()
        delay, logged = 0.005, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - start
                if waited >= timeout:
                    raise CloudError(
                        f"timed out after {timeout:.0f}s waiting for the lock on '{name}' "
                        "(another CPI call is working on it)",
                        ok_to_retry=True,
                    ) from None
                if waited > 1.0 and not logged:
                    log.info("waiting for the lock on '%s' held by another CPI call", name)
                    logged = True
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        yield
    finally:
        os.close(fd)  # closing releases the flock
