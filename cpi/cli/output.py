"""What the operator commands print through: JSON for scripts, one-line errors, table cells
(the masking of secrets is cpi.operator.masking, which a plan's answer needs too)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpi import errors


def fail(command: str, exc: errors.BoshError) -> int:
    print(f"cpi {command}: error: {exc.message}", file=sys.stderr)
    return 1


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def short(value: Any) -> str:
    """A value as one JSON line of at most 120 characters, for a table cell."""
    if value is None:
        return ""
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """While a cloud's listing is read page after page: "reading vms: 1,500" on the
    terminal's stderr, updated per page (cpi.clouds.inventory.progress), so a listing of
    thousands is seen to move; nothing when stderr is not a terminal (a script's log)."""
    from cpi.clouds import inventory

    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(f"reading {what}") as status:
        inventory.progress = lambda kind, count: status.update(f"reading {what}: {count:,} {kind}")
        try:
            yield
        finally:
            inventory.progress = None
