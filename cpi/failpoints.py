"""Deterministic kill points, so tests can prove that a CPI killed at any step leaves
nothing a later call cannot find and remove.

Random sleeps and timed SIGKILLs miss the narrow windows (between a spawn and the save of
its pid, between a rename and the next write) where leaks hide. Instead every
state-changing step calls `reached(name)`, and a test chooses where the process dies:

    CPI_KILL_AT=<name>    die at the first point of that name (e.g. "vm spawned")
    CPI_KILL_AT=<n>       die at the n-th point this process reaches (1, 2, 3, ...)
    CPI_KILL_AT=a,b       either (the first one reached)
    CPI_KILL_AT=locked*   a trailing * matches every point whose name starts so
    CPI_KILL_SIGNAL=STOP  stop (SIGSTOP) instead of dying, so a test can hold the process
                          at that point, start a competing call, then SIGCONT it

Running a call with CPI_KILL_AT=1, 2, 3, ... until it completes walks every point. Each
point reached while CPI_KILL_AT is set is written to stderr (`failpoint N: name`), so a
test can tell which step it killed. With the variable unset (production), `reached` is
a global load or two and a return: the environment is read once, at the first point (not at
import: a warm helper's worker imports nothing, and takes its client's environment).
"""

from __future__ import annotations

import os
import signal

_targets: frozenset[str] | None = None  # read at the first point
_signal = signal.SIGKILL
_prefixes: tuple[str, ...] = ()
_count = 0


def _read_environment() -> None:
    global _targets, _signal, _prefixes
    _targets = frozenset(t.strip() for t in os.environ.get("CPI_KILL_AT", "").split(",") if t.strip())
    if os.environ.get("CPI_KILL_SIGNAL", "").upper().removeprefix("SIG") == "STOP":
        _signal = signal.SIGSTOP
    _prefixes = tuple(t[:-1] for t in _targets if t.endswith("*"))


def reached(name: str) -> None:
    """Mark one state-changing step; kills (or stops) this process there when asked to."""
    if _targets is None:
        _read_environment()
    if not _targets:
        return
    global _count
    _count += 1
    try:
        os.write(2, f"failpoint {_count}: {name}\n".encode(errors="replace"))
    except OSError:
        pass  # no stderr: the point still counts
    if name in _targets or str(_count) in _targets or (_prefixes and name.startswith(_prefixes)):
        os.kill(os.getpid(), _signal)
