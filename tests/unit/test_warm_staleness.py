"""The warm helper's two ways to notice that a file it loaded changed (cpi.warm.server):
inotify's watches, and the stamps it falls back on where inotify is not to be had. Each
must see a file rewritten in place with its size and mtime set back (`touch -r`). The
whole path, through bin/cpi and a helper, is tests/conformance/test_warm.py's."""

from __future__ import annotations

import os
import time

from cpi.warm import server
from cpi.warm.watch import Watch


def _rewrite_keeping_size_and_mtime(path) -> None:
    before = path.stat()
    with path.open("r+b") as file:
        file.write(b"B")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_both_ways_see_a_rewrite_in_place_that_keeps_size_and_mtime(tmp_path):
    module = tmp_path / "dependency.py"
    module.write_bytes(b"A = 1\n")
    os.utime(module, ns=(time.time_ns() - 10**10, time.time_ns() - 10**10))
    watch = Watch([str(module), str(tmp_path)])
    stamps = server._own_files(time.time_ns() + 10**9, [str(module), str(tmp_path)])
    assert stamps is not None and server._unchanged(stamps) and not watch.changed()
    time.sleep(0.01)  # a coarse ctime clock: the rewrite's ctime must differ
    _rewrite_keeping_size_and_mtime(module)
    assert watch.changed(), "inotify missed the rewrite"
    assert not server._unchanged(stamps), "the stamps missed the rewrite"
    os.close(watch.fd)
