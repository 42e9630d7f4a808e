"""Files the operator names (cpi.json, a cloud-config, `orphans --known`), read whole but
bounded.

A path is whatever the operator (or `$CPI_CONFIG`) gives, so it may name a FIFO (an open
that waits for a writer for ever), `/dev/zero` or `/dev/urandom` (a read that never ends
until memory does), or a file far larger than any input of its kind. Each is refused in one
line before anything is parsed: the open never waits (O_NONBLOCK), only a regular file is
read (fstat of what was opened, so nothing can be swapped in between), and never more than
the input's cap. Links are followed: operators link their configs into place, and the
target is held to the same rules. `-` (stdin) is read under the same cap.

Start-up is on every call's path (issue #12): this module imports only `os` and `stat`.
"""

from __future__ import annotations

import os
import stat

from cpi.errors import CpiError

MiB = 1024 * 1024
#: cpi.json: a few KiB in practice, certificates included; a generous bound all the same.
CONFIG_LIMIT = 4 * MiB
#: a cloud-config: a big director's is a few hundred KiB.
CLOUD_CONFIG_LIMIT = 16 * MiB
#: `orphans --known`: `bosh instances --details --json` of 10,000 VMs is ~8.2 MiB (16 columns,
#: indented as bosh-cli prints it); room for the four lists of a director several times that.
KNOWN_LIMIT = 64 * MiB

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


class InputError(CpiError):
    """"cannot read <what>: <reason>"; `reason` alone for callers that say the rest."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"cannot read {what}: {reason}")
        self.reason = reason


def kind(mode: int) -> str:
    """What a file of this st_mode is, as an error names it."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit} bytes"


def _read_capped(fd: int, what: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 * MiB, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise InputError(what, f"larger than {_size(limit)}, the most it may hold")


def read_bytes(path: str, what: str, limit: int) -> bytes:
    """The whole content of the regular file at `path` (`-`: stdin), at most `limit` bytes;
    InputError in one line otherwise."""
    if path == "-":
        return _read_capped(0, what, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(what, exc.strerror or str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(what, f"{kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return _read_capped(fd, what, limit)
    except OSError as exc:
        raise InputError(what, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
