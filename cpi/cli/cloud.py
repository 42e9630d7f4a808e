"""The selected cloud, opened in this process for the operator commands that read the IaaS
directly instead of going through bin/cpi (`cpi list`, `show`, `avail`, `orphans`,
`certify`), opened as the wire opens it (cpi.opening)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cpi import opening
from cpi.logs import Redactor
from cpi.operator.masking import masked
from cpi.raw_config import read_file


def add_cloud_options(p: argparse.ArgumentParser) -> None:
    """--config and --json, as `cpi list`, `show` and `avail` take them."""
    p.add_argument("--config", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")


def read_config(config_path: str | None) -> dict:
    """cpi.json as read ({} without one: the local cloud's defaults); a relative path is
    the operator's, and an error names the file by its absolute path."""
    return read_file(str(Path(config_path).resolve()) if config_path else None)


class Opened:
    """A cloud and the redactor that knows its config's secrets: nothing an operator
    command prints may show one."""

    def __init__(self, config_path: str | None):
        raw = read_config(config_path)
        self.redactor = Redactor()
        self.redactor.collect(raw)
        ready = opening.open_cloud(raw, {"request_id": "cpi-cli"})
        self.plugin = ready.config.plugin
        self.cloud = ready.cloud

    def clean(self, value: Any) -> Any:
        return masked(value, self.redactor)
