"""How long a cloud's transitions took lately, so the next wait looks when it is about to end.

A fixed schedule that starts at a quarter of a second and grows by half each time (cpi.waits)
looks at 0.25, 0.63, 1.19, 2.03, 3.3 s: a server Nova makes ACTIVE after 1.3 s is seen at
2.0 s, and 0.7 s of every create_vm is the wait's own slack. Clouds offer clients no event
for the end of a transition (Nova's notifications are the operator's), but the same kind of
transition on the same cloud takes about as long each time. So each finished wait records
how long it took, and the next one of its kind sleeps through most of that time, then looks
every tenth of it until a while past it, then backs off as the fixed schedule would: the
call returns within a tenth of the usual transition time after it ends, with a handful of
looks.

The records are one small file per kind of transition in the CPI user's cache
(~/.cache/bosh-cpi/transitions/, private to the user, named by a digest of the kind so no
URL or name shows in a file name), rewritten atomically; two processes writing at once lose
a sample, never the file. A file that cannot be read or written costs only the learning:
the wait falls back to the fixed schedule.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cpi import private
from cpi.errors import CpiError

log = logging.getLogger(__name__)

#: How many recent durations a kind keeps.
KEEP = 16
#: The first look comes after this share of the usual duration (the shortest recent one
#: lower still), then one every STEP of it until SPAN of it has passed.
EARLY, STEP, SPAN = 0.8, 0.1, 1.6
#: Bounds of that step, in seconds: no storm of looks at a fast cloud, no long blind spell
#: at a slow one.
STEP_MIN, STEP_MAX = 0.05, 5.0
SETTING = "the CPI user's ~/.cache/bosh-cpi/transitions"


@dataclass(frozen=True)
class Learned:
    """Pauses around `usual` seconds: most of it first, then close looks, then `fallback`'s
    growth (a transition that takes far longer than usual is looked at ever less often)."""

    usual: float
    shortest: float
    fallback_factor: float
    fallback_cap: float

    def delays(self) -> Iterator[float]:
        first = min(EARLY * self.usual, 0.9 * self.shortest)
        step = min(STEP_MAX, max(STEP_MIN, STEP * self.usual))
        yield first
        elapsed = first
        while elapsed < SPAN * self.usual:
            yield step
            elapsed += step
        delay = step
        while True:
            delay = min(self.fallback_cap, max(delay * self.fallback_factor, step))
            yield delay


class History:
    """The recent durations of one kind of transition (`kind`: what and where, e.g.
    "openstack https://keystone:5000/v3 RegionOne server ACTIVE m1.small")."""

    def __init__(self, kind: str, directory: Path | None = None):
        self.kind = kind
        self._directory = directory
        self._durations: list[float] | None = None

    def _path(self) -> Path:
        """The kind's file, its directory made or checked private (CpiError if it is not)."""
        directory = self._directory or private.private_dir(private.cache_dir("transitions", SETTING), SETTING)
        return directory / (hashlib.sha256(self.kind.encode()).hexdigest()[:24] + ".json")

    def durations(self) -> list[float]:
        if self._durations is None:
            self._durations = []
            try:
                fd = private.open_nofollow(self._path(), os.O_RDONLY)
                with open(fd, "rb") as handle:
                    found = json.loads(handle.read(64 * 1024))
                self._durations = [float(d) for d in found if isinstance(d, (int, float)) and 0 < d < 86400][-KEEP:]
            except FileNotFoundError:
                pass
            except (OSError, ValueError, TypeError, CpiError) as exc:
                log.warning("transition history of %s unusable (%s): waiting on the fixed schedule", self.kind, exc)
        return self._durations

    def schedule(self, factor: float, cap: float) -> Learned | None:
        """The schedule the recent durations suggest; None before the first one."""
        recent = self.durations()
        if not recent:
            return None
        ordered = sorted(recent)
        middle = len(ordered) // 2
        usual = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        return Learned(usual=usual, shortest=ordered[0], fallback_factor=factor, fallback_cap=cap)

    def record(self, duration: float) -> None:
        recent = [*self.durations(), round(duration, 3)][-KEEP:]
        self._durations = recent
        try:
            private.replace_file(self._path(), json.dumps(recent).encode())
        except (OSError, CpiError) as exc:
            log.warning("transition history of %s not kept (%s)", self.kind, exc)
