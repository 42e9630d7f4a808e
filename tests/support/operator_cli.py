"""The operator's `cpi` command as the tests of the fleet run it (tests/*/test_fleet.py): a
real subprocess on a config, as an operator types it, and the shapes bosh-cli prints that
`cpi orphans --known` reads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.runner import DIRECTOR_ENV, ROOT

CPI = [str(ROOT / ".venv" / "bin" / "python"), "-m", "cpi.cli"]


def cli(config_path: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([*CPI, *args, "--config", str(config_path)], capture_output=True, text=True, timeout=300,
                          env={**DIRECTOR_ENV, "COLUMNS": "250"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def listed(config_path: Path, kind: str) -> dict[str, dict]:
    """`cpi list KIND --json`, by cid."""
    proc = cli(config_path, "list", kind, "--json")
    assert proc.returncode == 0, proc.stderr
    return {r["cid"]: r for r in json.loads(proc.stdout)}


def bosh_vms_json(instance: str, vm_cid: str) -> str:
    """What `bosh vms --json` prints for one instance: a VM cid, no disk."""
    return json.dumps({"Tables": [{"Content": "vms", "Header": {"instance": "Instance", "vm_cid": "VM CID"},
                                   "Rows": [{"instance": instance, "vm_cid": vm_cid}], "Notes": None}],
                       "Blocks": None, "Lines": ["Succeeded"]})
