"""Notice, for the price of one read, that a file the helper loaded has changed: Linux's
inotify, watching each such file's inode (so a write through any name of it counts) and
each directory of the import path. Stat-ing every file per call (~1,200 with the SDKs
loaded) costs ~3.5 ms of a ~30 ms warm call; this costs microseconds. Where inotify is not
to be had (not Linux, the user's watch limit reached) the helper stats instead."""

from __future__ import annotations

import os

# <sys/inotify.h>: what a write, a `touch -r`, a chmod, a rename onto or from, a delete
# does to a watched file or directory (a link count change included: a file replaced by
# rename loses its last name), and the queue overflowing (events lost: count as a change)
_MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
_NONBLOCK, _CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC


class Watch:
    """Watches on `paths`; raises OSError when one cannot be set (the caller stats then)."""

    def __init__(self, paths: list[str]):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(_NONBLOCK | _CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for path in paths:
            if libc.inotify_add_watch(self.fd, os.fsencode(path), _MASK) < 0 and ctypes.get_errno() != 2:
                error = ctypes.get_errno()  # ENOENT: gone already, the stamps taken after say so
                os.close(self.fd)
                raise OSError(error, f"inotify_add_watch {path}")

    def changed(self) -> bool:
        """Whether anything watched changed since the watches were set (once true, stays:
        the helper exits)."""
        try:
            return bool(os.read(self.fd, 1 << 16))
        except BlockingIOError:
            return False
