"""The selected cloud, opened in this process for the operator commands that read the IaaS
directly instead of going through bin/cpi (`cpi list`, `show`, `avail`, `orphans`,
`certify`), opened as the wire opens it (cpi.opening)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cpi import opening
from cpi.errors import CpiError
from cpi.logs import redactor_for
from cpi.raw_config import read_file


def add_cloud_options(p: argparse.ArgumentParser) -> None:
    """--config, --json/--yaml, --tty, --column and --timeout, as the commands that print
    what a cloud holds (`cpi list`, `show`, `avail`, `orphans`) take them."""
    from . import options

    options.add(p, options.CONFIG, options.OUTPUT, options.COLUMNS, options.TIMEOUT)


def read_config(config_path: str | None) -> dict:
    """cpi.json as read ({} without one: the local cloud's defaults); a relative path is
    the operator's, and an error names the file by its absolute path."""
    return read_file(str(Path(config_path).resolve()) if config_path else None)


class Opened:
    """A cloud and the redactor that knows its config's secrets: nothing an operator
    command prints may show one."""

    def __init__(self, config_path: str | None, read_only: bool = False, timeout: float | None = None):
        """read_only: the command only reads, so it refuses to open a cloud whose state
        would have to be created first (the cloud class's `missing_state`). timeout: the
        command's --timeout, brought to the cloud as context overrides (cpi.cli.timeout;
        None: the config's own budgets, as the wire has them)."""
        from .timeout import overrides

        raw = read_config(config_path)
        self.redactor = redactor_for(raw)  # before anything reads it: its errors are masked
        self.timeout = timeout
        #: the context keys --timeout set, for the bin/cpi calls of the same command
        self.overrides = overrides(raw, timeout)
        ready = opening.open_cloud(raw, {"request_id": "cpi-cli", **self.overrides})
        self.plugin = ready.config.plugin
        if read_only:
            refuse_missing_state(ready.config)
        self.cloud = ready.cloud

    def clean(self, value: Any) -> Any:
        return self.redactor.masked(value)

    def text(self, value: str) -> str:
        """A line with the config's secrets masked (a spinner's, an error's)."""
        return self.redactor.text(value)


def missing_state(config: Any) -> str | None:
    """What a command that only reads would have to create to open this cloud (the cloud
    class's `missing_state`: the local cloud's state dir), which it must not: None when
    nothing is missing."""
    return config.cloud_class.missing_state(config.properties)


def refuse_missing_state(config: Any) -> None:
    """A mistyped state dir is an error for a command that only reads, not a new empty
    cloud."""
    problem = missing_state(config)
    if problem:
        raise CpiError(problem)
