"""The selected cloud, opened in this process for the operator commands (which read the
IaaS directly instead of going through bin/cpi), and what they print through."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cpi import errors, opening
from cpi.logs import Redactor
from cpi.raw_config import read_file


def read_config(config_path: str | None) -> dict:
    """cpi.json as read ({} without one: the local cloud's defaults); a relative path is
    the operator's, and an error names the file by its absolute path."""
    return read_file(str(Path(config_path).resolve()) if config_path else None)


class Opened:
    """A cloud, opened as the wire opens it (cpi.opening), and the redactor that knows its
    config's secrets: nothing an operator command prints may show one."""

    def __init__(self, config_path: str | None):
        raw = read_config(config_path)
        self.redactor = Redactor()
        self.redactor.collect(raw)
        ready = opening.open_cloud(raw, {"request_id": "cpi-cli"})
        self.plugin = ready.config.plugin
        self.cloud = ready.cloud

    def clean(self, value: Any) -> Any:
        return masked(value, self.redactor)


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
