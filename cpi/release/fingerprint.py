"""bosh-cli's fingerprint of a job, package or license, bit for bit.

The director and `bosh create-env` key compiled packages and uploaded jobs by fingerprint,
so a fingerprint that differs from bosh-cli's for the same files would make every tool
treat this release as new, and one that matches bosh-cli's lets a release built here and
one built by `bosh create-release` share compiled packages.

The algorithm (bosh-cli release/resource/fingerprint.go):

    s = "v2" + Σ over entries sorted by relpath: relpath + digest + mode
    s += ",".join(sorted(dependency names))      # packages with dependencies only
    fingerprint = sha256(s).hexdigest()

where digest is "sha256:<hex>" of the file (of the link target string for a symlink that
is not followed) and mode is "100755" if any exec bit is set, "100644" otherwise,
"symlink" for an unfollowed symlink, and "" for entries fingerprinted without their mode
(`packaging`, `pre_packaging`, license files).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cpi.release.checksums import sha256_file
from cpi.release.errors import ReleaseError


@dataclass(frozen=True)
class Entry:
    """One file of a job, package or license: what the fingerprint covers and what the
    archive holds."""

    relpath: str  # path inside the archive (without "./"); the sort key
    path: Path  # where it is on disk
    digest: str  # "sha256:<hex>"
    mode: str  # "100644", "100755", "symlink", or "" when the mode is not fingerprinted
    link_target: str | None = None  # set for a symlink packed as a symlink
    executable: bool = False  # archive mode 0755 rather than 0644
    data: bytes | None = None  # the contents, for an entry made in memory (then `path` is where it came from)

    @property
    def chunk(self) -> str:
        return self.relpath + self.digest + self.mode


def file_entry(path: Path, relpath: str, *, with_mode: bool, follow_symlinks: bool) -> Entry:
    """The entry for the file at `path`, stored as `relpath`. Jobs follow symlinks (the
    target's contents are packed); packages keep them as symlinks."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ReleaseError(f"{path}: no such file") from None
    if stat.S_ISLNK(info.st_mode) and not follow_symlinks:
        target = os.readlink(path)
        digest = "sha256:" + hashlib.sha256(target.encode()).hexdigest()
        return Entry(relpath, path, digest, "symlink" if with_mode else "", link_target=target)
    # bosh-cli takes the mode from lstat even when it follows the link: a followed symlink
    # (mode 0777) always counts, and is archived, as executable.
    mode_bits = info.st_mode
    if stat.S_ISLNK(info.st_mode):
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise ReleaseError(f"{path}: a symlink to {os.readlink(path)!r}, which does not exist") from None
    if stat.S_ISDIR(info.st_mode):
        raise ReleaseError(f"{path}: a directory where a file is expected")
    mode = ("100755" if mode_bits & 0o111 else "100644") if with_mode else ""
    return Entry(
        relpath,
        path,
        "sha256:" + sha256_file(path),
        mode,
        executable=bool(mode_bits & stat.S_IXUSR),
    )


def bytes_entry(data: bytes, relpath: str, source: Path) -> Entry:
    """An entry of non-executable contents made in memory (a derived job.MF), fingerprinted
    as bosh-cli would fingerprint a file holding them."""
    return Entry(relpath, source, "sha256:" + hashlib.sha256(data).hexdigest(), "100644", data=data)


def fingerprint(entries: Iterable[Entry], dependencies: Iterable[str] = ()) -> str:
    """bosh-cli's fingerprint of `entries` (any order) and a package's dependency names."""
    return fingerprint_chunks([entry.chunk for entry in sorted(entries, key=_sort_key)], dependencies)


def fingerprint_chunks(sorted_chunks: Iterable[str], dependencies: Iterable[str] = ()) -> str:
    """The hashing step on its own, for known-answer tests built from published digests."""
    text = "v2" + "".join(sorted_chunks)
    names = sorted(dependencies, key=lambda name: name.encode())
    if names:
        text += ",".join(names)
    return hashlib.sha256(text.encode()).hexdigest()


def _sort_key(entry: Entry) -> bytes:
    # Go sorts strings bytewise; UTF-8 bytes give the same order for any text.
    return entry.relpath.encode()
