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


class CliError(Exception):
    """One line on stderr ("cpi COMMAND: error: ...") and this exit status, raised from
    anywhere in a command (cpi.cli.commands.run prints it): 1 when the command could not do
    its job, 2 for a usage error."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.message = message
        self.status = status


def fail(command: str, exc: errors.BoshError) -> int:
    print(f"cpi {command}: error: {exc.message}", file=sys.stderr)
    return 1


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def wants_data(args: Any) -> bool:
    """--json or --yaml: the command prints its data for a script instead of a table."""
    if getattr(args, "json", False) and getattr(args, "yaml", False):
        raise CliError("--json and --yaml: choose one", 2)
    return bool(getattr(args, "json", False) or getattr(args, "yaml", False))


def print_data(value: Any, args: Any) -> None:
    """The command's data as --json or --yaml asked (JSON, keys sorted, when neither)."""
    if getattr(args, "yaml", False):
        import yaml

        sys.stdout.write(yaml.safe_dump(value, default_flow_style=False, sort_keys=True, allow_unicode=True))
    else:
        print_json(value)


def short(value: Any) -> str:
    """A value as one JSON line of at most 120 characters, for a table cell."""
    if value is None:
        return ""
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


def confirm(args: Any, what: str, stdin_taken: bool = False) -> None:
    """Ask as bosh asks, "Continue? [yN]:" on the terminal, before `what` is done; -n (or
    $CPI_NON_INTERACTIVE) answers yes. Raises CliError (exit 1) on any answer but y/yes,
    and when there is no terminal to ask on (or stdin is the command's input): a script
    says -n, it is never taken as a yes."""
    if getattr(args, "non_interactive", False):
        return
    if stdin_taken or not sys.stdin.isatty():
        raise CliError(f"refusing to {what} without -n: there is no terminal to ask on")
    sys.stderr.write("Continue? [yN]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        raise CliError(f"stopped: did not {what}")


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
