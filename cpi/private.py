"""Directories and files that only this user may touch, on a machine shared with others.

The CPI runs as root next to other local users. A state or lock directory at a path
another user can reach first (anything under a shared temp dir, say) would let them plant
a symlink and have a root CPI create or overwrite any file. So every directory the CPI
keeps state in goes through `private_dir`: created 0700, and refused with a clear error
when it is not owned by this user, is writable by others, or hangs below a directory
someone else could have swapped out. Files inside are opened with O_NOFOLLOW.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cpi.errors import CpiError

#: Owners a directory on the way may have: root and this user (nobody else can swap it).
_TRUSTED = {0}


def _trusted() -> set[int]:
    return _TRUSTED | {os.geteuid()}


class NotPrivate(CpiError):
    """A state or lock directory another user could tamper with."""


def _check_ancestors(path: Path, what: str) -> None:
    """Every directory above `path` must be owned by root or this user and, when others may
    write to it, be sticky (as /tmp is), so nobody else can rename or replace what we make;
    every symlink on the way must have been made by root or this user."""
    trusted = _trusted()
    lexical = Path("/")
    for part in path.parts[1:]:
        lexical = lexical / part
        try:
            info = os.lstat(lexical)
        except FileNotFoundError:
            break
        except OSError as exc:
            raise NotPrivate(f"{what}: cannot inspect {lexical}: {exc.strerror}") from None
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in trusted:
            raise NotPrivate(f"{what}: {lexical} is a symlink owned by uid {info.st_uid}, not by this user or root")
    real = Path(os.path.realpath(path))
    for directory in [real, *real.parents]:
        try:
            info = os.stat(directory)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise NotPrivate(f"{what}: {directory} is not a directory")
        if info.st_uid not in trusted:
            raise NotPrivate(f"{what}: {directory} is owned by uid {info.st_uid}, not by this user or root")
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise NotPrivate(
                f"{what}: {directory} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}) "
                "and not sticky"
            )


def private_dir(path: Path | str, what: str) -> Path:
    """Create `path` (and missing parents) mode 0700, or check the one that is there.

    An existing directory of this user's that others could only read is tightened to 0700;
    one that is a symlink, owned by someone else, or writable by others is refused, naming
    `what` (the setting that chose it) so the operator knows what to change."""
    path = Path(path)
    if not path.is_absolute():
        raise CpiError(f"{what} must be an absolute path, got '{path}'")
    _check_ancestors(path.parent, what)
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # made by a sibling CPI process at the same moment; checked below
        except OSError as exc:
            raise CpiError(f"{what}: cannot create {directory}: {exc.strerror}") from None
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise CpiError(f"{what}: cannot inspect {path}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise NotPrivate(f"{what}: {path} is a symlink; refusing to use it")
    if not stat.S_ISDIR(info.st_mode):
        raise CpiError(f"{what}: {path} exists and is not a directory")
    if info.st_uid != os.geteuid():
        raise NotPrivate(f"{what}: {path} is owned by uid {info.st_uid}, not by this user ({os.geteuid()})")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise NotPrivate(f"{what}: {path} is writable by other users (mode {mode:o}); it must be 0700")
    if mode & 0o077:
        os.chmod(path, 0o700, follow_symlinks=False)
    return path


def open_nofollow(path: Path | str, flags: int, mode: int = 0o600) -> int:
    """os.open that never follows a symlink at the last component (ELOOP instead)."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
