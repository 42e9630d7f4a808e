"""What the operator commands print through: JSON for scripts, one-line errors, table cells,
and masking, so that nothing a command prints shows a secret its config holds."""

from __future__ import annotations

import json
import sys
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpi import errors
    from cpi.logs import Redactor


def masked(value: Any, redactor: Redactor) -> Any:
    """`value` with every known secret masked (for printing only; the IaaS is untouched and
    the wire's results are never altered)."""
    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, dict):
        return {masked(k, redactor): masked(v, redactor) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(v, redactor) for v in value]
    return value


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
