"""The cloud opened for a command that only reads it (`cpi list`, `show`, `avail`,
`orphans`): one place that says what a config the cloud cannot open becomes."""

from __future__ import annotations

from cpi import errors

from .cloud import Opened
from .output import CliError


def open_to_read(config_path: str | None, seconds: float | None) -> Opened:
    """The cloud cpi.json names, opened read-only with the command's --timeout; a config it
    cannot open (or whose state would have to be created first) is the command's one error
    line and exit status 1, before anything is read."""
    try:
        return Opened(config_path, read_only=True, timeout=seconds)
    except errors.BoshError as exc:
        raise CliError(exc.message) from None
