"""The file store of the shared rate (the embedded default): one small JSON file per
endpoint in a private directory of the CPI user's, read and replaced under an flock.

The flock is released by the kernel if its holder dies, and the file is replaced by an
atomic rename, so a process killed at any point leaves a valid state; an unreadable file
is treated as fresh. Files are named by a hash of their key, so nothing from an endpoint
URL (such as a password in it) becomes a file name; the key, stripped of any user info,
is kept inside the file for whoever looks. Links planted in the directory are never
followed (cpi.private).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cpi import private

from . import policy


class FileStore:
    name = "file"

    def __init__(self, key: str, readable_key: str, config: Any, directory: Path,
                 clock: Callable[[], float] = time.time):
        self.key = readable_key
        self.config = config
        self.clock = clock
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        self.path = directory / f"{name}.json"
        self.lock_path = directory / f"{name}.lock"

    def step(self, op: str, retry_after: float | None = None) -> float:
        fd = private.open_nofollow(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            now = self.clock()
            state = policy.current(self._read(), self.config, now)
            result = policy.apply(op, state, self.config, now, retry_after)
            private.replace_file(self.path, json.dumps({"key": self.key, **asdict(state)}).encode())
            return result
        finally:
            os.close(fd)

    def _read(self) -> policy.State | None:
        try:
            fd = private.open_nofollow(self.path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                document = json.loads(handle.read(65536))
            document.pop("key", None)
            return policy.State(**document)  # policy.current() judges the values
        except (OSError, ValueError, TypeError, AttributeError):
            return None
