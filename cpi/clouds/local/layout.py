"""The version of the state dir's layout: the `format` file in its root.

A later release may change the layout (where records live, what they hold). Without a
version, a CPI would take whatever it finds for its own layout and mis-read it: an older
CPI put back after an upgrade, say. So the root holds `format`, one number and a newline
(0600), and every call reads it when it opens the state dir:

- no file: a new state dir, or one made before there was a version, whose layout is
  format 1's: the MIGRATIONS bring it to FORMAT and the file is written;
- a format this code knows: it is brought to FORMAT the same way (nothing to do when it
  is FORMAT, as on every call but the first);
- a later format: every call is refused, saying to upgrade the CPI, before it makes
  anything in the state dir;
- anything else (not a number, a link, not a file): refused the same way, naming the file.

Many CPI processes start at once on one state dir, so the steps and the writes are made
under the `format` lock by whoever finds the format old; a process that waited for the
lock reads the file again and finds the work done. Each step is followed by the write of
its number (temp file, fsync, rename: a reader sees the old number or the new one), so a
call killed half way leaves a state dir the next call takes up where it stopped (and
removes the temp file it may have left). A call that finds the format current reads one
small file and takes no lock.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from cpi.errors import CloudError
from cpi.files import atomic_write_bytes
from cpi.locks import locked
from cpi.logs import shown
from cpi.private import open_nofollow

log = logging.getLogger(__name__)

FILE = "format"
#: The layout this code reads and writes.
FORMAT = 1
#: What `read` answers for a state dir with no format file.
UNVERSIONED = 0
#: Longer than any number this code would write: a bigger file is not one of ours.
_MOST = 32


def _unversioned_to_1(root: Path) -> None:
    """Every release before the format file wrote format 1's layout: nothing changes but
    the file, written after this step as after every other."""


#: How to bring a state dir of format N to N + 1: a change of layout adds its step here and
#: raises FORMAT. A step runs under the `format` lock and must be safe to run again (a call
#: killed during it leaves the old number). A plan (cpi.plan) runs no step: a step that
#: changes what a call reads must also say how a plan reads the old layout.
MIGRATIONS: dict[int, Callable[[Path], None]] = {
    UNVERSIONED: _unversioned_to_1,
}


def read(root: Path) -> int:
    """The state dir's format (UNVERSIONED when it has no format file); a later format than
    this code knows, or a file that holds no format, is refused with a CloudError."""
    path = root / FILE
    try:
        fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO planted there must not hang the call
    except FileNotFoundError:
        return UNVERSIONED
    except OSError as exc:
        raise CloudError(f"state dir {root}: cannot read its format file {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CloudError(f"state dir {root}: its format file {path} is not a regular file")
        data = os.read(fd, _MOST + 1)
    finally:
        os.close(fd)
    text = data.strip()
    if len(data) > _MOST or not text.isdigit() or int(text) < 1:
        raise CloudError(f"state dir {root}: its format file {path} holds "
                         f"{shown(text.decode(errors='replace'), 40)}, not a format number "
                         f"(this CPI writes {FORMAT})")
    found = int(text)
    if found > FORMAT:
        raise CloudError(f"state dir {root} has format {found}; this CPI knows up to {FORMAT}: upgrade the CPI")
    return found


def upgrade(root: Path, lock_dir: Path) -> None:
    """Bring the state dir to FORMAT (writing its format file), or refuse it (see `read`).
    For a state dir `read` found older: takes the lock, so it is not on every call's path."""
    with locked(lock_dir, "format"):
        found = read(root)  # again: another call may have done it while this one waited
        if found == FORMAT:
            return
        _remove_temps(root)
        while found < FORMAT:
            MIGRATIONS[found](root)
            found += 1
            atomic_write_bytes(root / FILE, f"{found}\n".encode(), mode=0o600)
        log.info("state dir %s: format %d recorded", root, found)


def _remove_temps(root: Path) -> None:
    """The temp files of format writes killed before their rename (only while holding the
    lock every writer holds, so none of them is another writer's)."""
    for entry in os.listdir(root):
        if entry.startswith(f".{FILE}.") and entry.endswith(".tmp"):
            (root / entry).unlink(missing_ok=True)
