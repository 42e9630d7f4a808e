"""Cross-process locks keyed by resource id, that leave no files behind.

Every CPI call is its own process, so only the file system can serialise them. flock(2)
locks vanish with the process that held them, so a CPI killed mid-call never leaves a
resource locked.

A lock file per name ever locked would pile up forever (one per cid, even for cids that
never existed), so the holder unlinks its file before it lets go. A process that was
waiting on the old file then holds a lock on a file nobody can find any more; so after
flock succeeds, the acquirer checks that the path still names the inode it locked
(fstat against lstat) and otherwise starts again on the new file. Only a process killed
while holding a lock leaves its file; `collect_stale` removes those.

All the locks one operation needs are taken in one `locked()` call, in one global
(sorted) order, so two operations that share resources (delete_vm and attach_disk on one
VM) can never each hold what the other waits for.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from cpi.errors import CloudError
from cpi.failpoints import reached
from cpi.private import open_nofollow

log = logging.getLogger(__name__)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
SUFFIX = ".lock"


def lock_path(lock_dir: Path, name: str) -> Path:
    """One file per name, and two names never share a file (a process locking both would
    wait on itself): names that are not plain, or too long for a file name, get a hash."""
    safe = _SAFE.sub("_", name)
    if safe != name or len(name) > 200 or name.startswith("."):
        safe = f"{safe[:100].lstrip('.')}-{hashlib.sha256(name.encode(errors='surrogatepass')).hexdigest()[:32]}"
    return Path(lock_dir) / f"{safe}{SUFFIX}"


@contextlib.contextmanager
def locked(lock_dir: Path, *names: str, timeout: float = 300.0) -> Iterator[None]:
    """Hold exclusive locks on every name, taken in sorted order (see the module doc)."""
    lock_dir = _ensure(lock_dir)
    deadline = time.monotonic() + timeout
    held: list[tuple[Path, int]] = []
    try:
        for path, name in sorted({lock_path(lock_dir, n): n for n in names}.items()):
            fd = _acquire(path, name, deadline, timeout)
            assert fd is not None, "with a deadline, _acquire waits or raises"
            held.append((path, fd))
        reached("locked " + " ".join(sorted(set(names))))
        yield
    finally:
        for path, fd in reversed(held):
            _release(path, fd)


@contextlib.contextmanager
def try_locked(lock_dir: Path, name: str) -> Iterator[bool]:
    """Take the lock only if nobody holds it; yields whether it did. A free lock on a
    resource that is being created means its creator died."""
    path = lock_path(_ensure(lock_dir), name)
    fd = _acquire(path, name, None, 0)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            _release(path, fd)


def held(lock_dir: Path, name: str) -> bool:
    """Whether someone holds the lock, found without creating or removing anything (a plan,
    cpi.plan, writes nothing): a missing lock file is a free lock, its holder unlinks it."""
    path = lock_path(Path(lock_dir), name)
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def collect_stale(lock_dir: Path) -> None:
    """Remove the lock files of processes killed while they held them."""
    try:
        entries = os.listdir(lock_dir)
    except FileNotFoundError:
        return
    for entry in entries:
        if not entry.endswith(SUFFIX) or entry.startswith("."):
            continue
        path = Path(lock_dir) / entry
        fd = _acquire(path, entry, None, 0, create=False)
        if fd is not None:
            _release(path, fd)


def _ensure(lock_dir: Path) -> Path:
    lock_dir = Path(lock_dir)
    if not lock_dir.is_dir():
        lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return lock_dir


def _acquire(path: Path, name: str, deadline: float | None, timeout: float, create: bool = True) -> int | None:
    """flock `path`, checking it still names the locked file; None when `deadline` is None
    and the lock is busy (or, with create=False, the file is gone)."""
    delay, logged, started = 0.005, False, time.monotonic()
    while True:
        try:
            fd = open_nofollow(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
        except FileNotFoundError:
            if create:
                raise
            return None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is None:
                        os.close(fd)
                        return None
                    now = time.monotonic()
                    if now >= deadline:
                        raise CloudError(
                            f"timed out after {timeout:.0f}s waiting for the lock on '{name}' "
                            "(another CPI call is working on it)",
                            ok_to_retry=True,
                        ) from None
                    if now - started > 1.0 and not logged:
                        log.info("waiting for the lock on '%s' held by another CPI call", name)
                        logged = True
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)
            if _same_file(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # its holder unlinked it while we waited: lock the file that is there now
        if not create:
            return None


def _same_file(fd: int, path: Path) -> bool:
    mine = os.fstat(fd)
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _release(path: Path, fd: int) -> None:
    """Unlink, then unlock: whoever waited on this file sees it is gone and retries."""
    try:
        if _same_file(fd, path):
            os.unlink(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            log.warning("could not remove lock file %s: %s", path, exc.strerror)
    finally:
        os.close(fd)
