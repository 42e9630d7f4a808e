"""Fault injection for the local cloud: fail or delay chosen methods, as configured.

"The next N calls" must hold across processes, so the count of faults already delivered
lives in the state dir (faults.json, updated under a lock), keyed by the rule itself: a new
or changed rule starts counting from zero.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

from cpi import errors
from cpi.files import atomic_write_json, read_json
from cpi.locks import locked, try_locked

from .props import Fault

log = logging.getLogger(__name__)


def _key(fault: Fault) -> str:
    return hashlib.sha256(json.dumps(fault.model_dump(), sort_keys=True).encode()).hexdigest()[:16]


def error_class(name: str) -> type[errors.BoshError]:
    wire = name if name.startswith("Bosh::Clouds::") else f"Bosh::Clouds::{name}"
    try:
        return errors.BY_WIRE_TYPE[wire]
    except KeyError:
        raise errors.CpiError(
            f"invalid config: fault error '{name}' is not one of {', '.join(sorted(errors.BY_WIRE_TYPE))}"
        ) from None


def apply(faults: list[Fault], method: str, state_dir: Path, lock_dir: Path) -> None:
    for fault in faults:
        if fault.method != method:
            continue
        if fault.times is not None and not _take(fault, state_dir, lock_dir):
            continue
        if fault.delay:
            log.info("injected fault: delaying %s by %.2fs", method, fault.delay)
            time.sleep(fault.delay)
        if fault.error:
            cls = error_class(fault.error)
            log.info("injected fault: %s fails with %s", method, cls.wire_type)
            raise cls(fault.message, ok_to_retry=fault.ok_to_retry)


def _take(fault: Fault, state_dir: Path, lock_dir: Path) -> bool:
    """Count one delivery of a limited fault; False once it has fired `times` times."""
    path = state_dir / "faults.json"
    key = _key(fault)
    with locked(lock_dir, "faults"):
        counts = read_json(path) if path.exists() else {}
        used = counts.get(key, 0)
        if used >= fault.times:
            return False
        counts[key] = used + 1
        atomic_write_json(path, counts)
        return True


def collect_temp(state_dir: Path, lock_dir: Path) -> None:
    """Remove the temp file of a faults.json write whose process was killed before its
    rename (only while nobody holds the lock every writer holds)."""
    temps = [e for e in os.listdir(state_dir) if e.startswith(".faults.json.") and e.endswith(".tmp")]
    if not temps:
        return
    with try_locked(lock_dir, "faults") as free:
        if free:
            for entry in temps:
                (state_dir / entry).unlink(missing_ok=True)
