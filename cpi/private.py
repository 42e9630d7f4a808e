"""Directories and files that only this user may touch, on a machine shared with others.

The CPI runs as root next to other local users. A state or lock directory at a path
another user can reach first (anything under a shared temp dir, say) would let them plant
a symlink and have a root CPI create or overwrite any file. So every directory the CPI
keeps state in goes through `private_dir`: created 0700, and refused with a clear error
when it is not owned by this user, is writable by others, or hangs below a directory
someone else could have swapped out. Files inside are opened with O_NOFOLLOW.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

from cpi.errors import CloudError, CpiError
from cpi.inputs import kind

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
    `what` (the setting that chose it) so the operator knows what to change.

    The directories above are checked before anything is created (so nothing is made below
    a directory someone else controls) and again afterwards: a parent another user slipped
    in while we created it (a race on a missing parent in a sticky directory) is caught, and
    once every directory on the way is ours or root's and not writable by others, nobody
    else can change it any more."""
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
        # the directory itself through a descriptor: a symlink swapped in is refused, never
        # followed, and what is checked is what gets tightened
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise NotPrivate(f"{what}: {path} is a symlink; refusing to use it") from None
        if exc.errno == errno.ENOTDIR:
            raise CpiError(f"{what}: {path} exists and is not a directory") from None
        raise CpiError(f"{what}: cannot open {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise NotPrivate(f"{what}: {path} is owned by uid {info.st_uid}, not by this user ({os.geteuid()})")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o022:
            raise NotPrivate(f"{what}: {path} is writable by other users (mode {mode:o}); it must be 0700")
        if mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    _check_ancestors(path.parent, what)
    return path


def open_nofollow(path: Path | str, flags: int, mode: int = 0o600) -> int:
    """os.open that never follows a symlink at the last component (ELOOP instead)."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


class PlantedEntry(CloudError):
    """Something other than the regular file the CPI keeps at a state path: a directory, a
    link, a FIFO or a device someone (or something) put there. Named, never followed or
    read, so that only the calls that need that entry fail, and they say what to remove."""

    def __init__(self, path: Path | str, what: str):
        super().__init__(f"state entry {path} is {what}, not the regular file the CPI keeps there: "
                         "nothing was done with it (remove it, or restore the file, to go on)")
        self.path = str(path)


def open_state_file(path: Path | str, flags: int = os.O_RDONLY) -> int:
    """open_nofollow for a state file the CPI reads: never through a link planted in its
    place, never waiting on a FIFO, and only a regular file (PlantedEntry otherwise; a
    missing file stays FileNotFoundError, which each caller means something by)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise PlantedEntry(path, "a symbolic link") from None
        if exc.errno == errno.EISDIR:  # a directory asked for writing
            raise PlantedEntry(path, "a directory") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise PlantedEntry(path, kind(mode))
    os.set_blocking(fd, True)
    return fd


def replace_file(path: Path | str, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` atomically with `data` (a file of mode `mode`): written to a new
    temporary name next to it (O_EXCL, never through a link), then renamed over it, so a
    process killed at any point leaves the old file or the new one, never half of one."""
    path = Path(path)
    # one temporary name per process and thread: one a killed process left behind is reused
    # (removed, then made anew) by the next holder of its pid, so leftovers cannot pile up
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass  # never created or already renamed
        raise


def cache_dir(name: str, what: str) -> Path:
    """The default home of `name`: ~/.cache/bosh-cpi/<name>, in the CPI user's own home
    (from $HOME, or the password database when, as under a director, there is no HOME).
    Never a fixed name in a shared temp dir, where any local user could make it first."""
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        raise CpiError(
            f"{what} is not set and this user (uid {os.geteuid()}) has no home directory to keep it in; set {what}"
        ) from None
    return home / ".cache" / "bosh-cpi" / name
