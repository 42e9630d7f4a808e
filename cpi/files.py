"""Crash-safe file writes: a process killed at any point leaves the old file or the new one
(and at worst a hidden temp file beside it, in the directory of the resource it belongs to)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from cpi.failpoints import reached
from cpi.private import open_state_file


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o600) -> None:
    path = Path(path)
    if not path.parent.is_dir():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp creates with O_EXCL (never through a planted link) and mode 0600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        reached(f"write {path.name}")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    reached(f"wrote {path.name}")


def atomic_write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), mode)


def read_json(path: Path) -> Any:
    """Read a record without following a link planted in its place; anything but a regular
    file there is a PlantedEntry naming the path (cpi.private.open_state_file)."""
    with os.fdopen(open_state_file(path), "rb") as handle:
        return json.load(handle)
