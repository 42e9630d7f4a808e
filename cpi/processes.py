"""Whether a process the CPI recorded (a local VM, a certify run) still lives, telling it
apart from an unrelated process that got the same pid since (Linux's /proc)."""

from __future__ import annotations

import os
from pathlib import Path


def start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (Linux), to tell our process from a recycled pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int | None, pid_start: str | None) -> bool:
    """`pid` runs (not a zombie) and, when its recorded start time is known, is still the
    process that was recorded. Not a pid at all (read from a file: anything) is not alive,
    and never a process group's number."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    current = start_time(pid)
    if current is not None and pid_start is not None and current != pid_start:
        return False  # the pid now belongs to someone else
    state = proc_state(pid)
    return state not in ("Z", "X")


def proc_state(pid: int) -> str | None:
    """The state letter of `pid` (R, S, Z, ...); None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
