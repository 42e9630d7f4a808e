"""The file work behind the local cloud's disks, snapshots and stemcells.

Apart from the resource logic so that each rule is kept in one place: every file the
cloud makes is private (0600 whatever the umask) and opened without following a planted
link; a file system that is full or cannot hold a size is the IaaS failing (a CloudError
the director shows), not a bug; and big files are copied and grown without writing their
holes, so a mostly empty 10 GiB disk costs what it holds.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from cpi.errors import CloudError
from cpi.failpoints import reached
from cpi.files import read_json
from cpi.private import open_nofollow

MIB = 1024 * 1024


def new_file(path: Path) -> BinaryIO:
    """A new private file: 0600 whatever the umask, never through a planted link."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)
    reached(f"created {path.name}")
    return os.fdopen(fd, "wb")


def create(path: Path) -> Path:
    new_file(path).close()
    return path


def load_json(path: Path) -> dict | None:
    """The JSON document at `path`, or None when there is no file: a VM made before its
    settings were written has none, and that is not an error."""
    try:
        return read_json(path)
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def no_space_is_a_cloud_error(what: str) -> Iterator[None]:
    """A full or too small file system is the IaaS failing, not a bug: say so (the create
    that called removes what it made)."""
    try:
        yield
    except OverflowError:
        raise CloudError(f"{what}: more than the file system can hold in one file") from None
    except OSError as exc:
        if exc.errno in (errno.EFBIG, errno.ENOSPC, errno.EDQUOT):
            raise CloudError(f"{what}: {exc.strerror}") from None
        raise


def allocate(path: Path, size: int, preallocate: bool) -> None:
    """Give the file `size` bytes, keeping what it holds: sparse (a hole), or with its
    blocks reserved."""
    with no_space_is_a_cloud_error(f"cannot allocate {size} bytes for {path.name}"):
        fd = open_nofollow(path, os.O_RDWR)
        try:
            if size > os.fstat(fd).st_size:
                os.ftruncate(fd, size)
            if preallocate:
                try:
                    os.posix_fallocate(fd, 0, size)
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                        raise
                    # the file system cannot reserve blocks (some network file systems): sparse
            reached("disk allocated")
        finally:
            os.close(fd)


def open_image(image_path: str) -> BinaryIO:
    """Open the stemcell image the director handed us; only a regular file will do (a FIFO
    or a device would hang or never end)."""
    try:
        fd = os.open(image_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        raise CloudError(f"stemcell image '{image_path}' does not exist or is not a file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CloudError(f"stemcell image '{image_path}' does not exist or is not a file")
    return os.fdopen(fd, "rb")


def copy_with_sha1(src: BinaryIO, target: Path | None) -> tuple[str, int]:
    """Copy to a new 0600 file: the image may be secret, whatever its source's mode. With
    no target (a plan), only the digest and size."""
    digest, size = hashlib.sha1(usedforsecurity=False), 0  # the stemcell sha1 BOSH records, not a secret
    with no_space_is_a_cloud_error("cannot copy the stemcell image"), \
            (new_file(target) if target is not None else contextlib.nullcontext()) as dst:
        while chunk := src.read(MIB):
            digest.update(chunk)
            if dst is not None:
                dst.write(chunk)
            size += len(chunk)
    reached("image copied")
    return digest.hexdigest(), size


def sparse_copy(source: Path, target: Path) -> None:
    """Copy only the data regions, keeping holes: a snapshot of a mostly empty 10 GiB disk
    costs what the disk holds, not 10 GiB."""
    with no_space_is_a_cloud_error("cannot copy the disk"), \
            os.fdopen(open_nofollow(source, os.O_RDONLY), "rb") as src, new_file(target) as dst:
        fd = src.fileno()
        size = os.fstat(fd).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole remains
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            src.seek(start)
            dst.seek(start)
            remaining = end - start
            while remaining:
                chunk = src.read(min(remaining, 4 * MIB))
                dst.write(chunk)
                remaining -= len(chunk)
            offset = end
        dst.truncate(size)
    reached("snapshot copied")
