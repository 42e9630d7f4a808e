"""Deterministic tar(.gz) archives: the same members give the same bytes, every time.

`tar -czf` records mtimes, owners, the directory order of the file system and a gzip
timestamp, so two `bosh create-release` runs over the same files give different sha1s.
Here every one of those is fixed: members sorted, mtime a constant (SOURCE_DATE_EPOCH
when set), owner root:root, modes normalised to 0644/0755 as bosh-cli does, GNU format,
gzip header without name or time. Rebuilding a release therefore reproduces its digests,
and the director's "same fingerprint, different sha1" check never fires on a rebuild.

File contents are hashed while they are copied, so a file that changed between
fingerprinting and archiving is caught instead of silently shipped.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from cpi.release.checksums import CHUNK, sha256_file
from cpi.release.errors import ReleaseError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# 1980-01-01: after the epoch (some tools read 0 as "unset") and valid for zip too.
DEFAULT_MTIME = 315532800
GZIP_LEVEL = 6  # gzip's and tar's default


def archive_mtime() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None:
        return DEFAULT_MTIME
    try:
        return int(value)
    except ValueError:
        raise ReleaseError(f"SOURCE_DATE_EPOCH must be an integer (seconds), not {value!r}") from None


@dataclass(frozen=True)
class Member:
    """One archive member: a file from disk, bytes, a directory or a symlink."""

    name: str
    kind: str  # "file" | "bytes" | "dir" | "symlink"
    path: Path | None = None
    data: bytes = b""
    executable: bool = False
    link_target: str = ""
    expected_digest: str | None = None  # "sha256:<hex>" the copied bytes must have


class _HashingReader(io.RawIOBase):
    def __init__(self, handle: BinaryIO):
        self._handle = handle
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")  # the bytes io hands in, whatever the buffer's type
        data = self._handle.read(min(len(view), CHUNK))
        self.digest.update(data)
        view[: len(data)] = data
        return len(data)


def _info(member: Member, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(member.name)
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if member.kind == "dir":
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    elif member.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = member.link_target
        info.mode = 0o777
    else:
        info.type = tarfile.REGTYPE
        info.mode = 0o755 if member.executable else 0o644
    return info


def with_parent_dirs(members: list[Member], prefix: str = "") -> list[Member]:
    """`members` plus an entry for each directory they live in, all sorted by name, as
    `tar -C staging .` would list them (minus its nondeterministic order)."""
    names = {member.name for member in members}
    directories = set()
    for member in members:
        parent = member.name.rstrip("/").rpartition("/")[0]
        while parent and parent != prefix.rstrip("/") and parent + "/" not in names:
            directories.add(parent + "/")
            parent = parent.rpartition("/")[0]
    result = members + [Member(name, "dir") for name in directories]
    return sorted(result, key=lambda member: member.name.encode())


def write_archive(path: Path, members: list[Member], *, compress: bool, mtime: int | None = None) -> str:
    """Write `members` in the given order to `path`; return the archive's "sha256:<hex>"."""
    mtime = archive_mtime() if mtime is None else mtime
    with open(path, "wb") as raw:
        stream = (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=GZIP_LEVEL) if compress else raw
        )
        try:
            with tarfile.open(fileobj=stream, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for member in members:
                    _add(tar, member, mtime)
        finally:
            if compress:
                stream.close()
    return "sha256:" + sha256_file(path)


def _add(tar: tarfile.TarFile, member: Member, mtime: int) -> None:
    info = _info(member, mtime)
    if member.kind == "bytes":
        info.size = len(member.data)
        tar.addfile(info, io.BytesIO(member.data))
        return
    if member.kind != "file":
        tar.addfile(info)
        return
    assert member.path is not None
    with open(member.path, "rb") as handle:
        info.size = os.fstat(handle.fileno()).st_size
        reader = _HashingReader(handle)
        tar.addfile(info, io.BufferedReader(reader, CHUNK))
    if member.expected_digest and "sha256:" + reader.digest.hexdigest() != member.expected_digest:
        raise ReleaseError(
            f"{member.path} changed while the release was being built (its digest no longer matches "
            f"the one fingerprinted): build again"
        )
