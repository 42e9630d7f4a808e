"""`cpi certify` through the real `cpi` executable, for the per-cloud certify tests: one run
with the scenario's inputs, and what every cloud's report must show (the run passed and
cleaned up, and each call that reaches the cloud counts its requests). Each test then checks
what only its cloud can: the cids it made, and that nothing is left."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.runner import ROOT

#: the calls that reach the cloud in every scenario: each reports its request count
COUNTED = ("create_vm", "attach_disk", "resize_disk", "delete_vm")


def passed(cloud: str, config: Path, *, stemcell: str, stemcell_properties: dict, vm_type: dict, network: dict,
           disk_type: dict | None = None, secret: str | None = None, timeout: float = 600) -> dict[str, dict[str, Any]]:
    """Run certify; assert it passed whole and left nothing it knows of, that every counted
    call says how many requests it made, and that `secret` (the account's) is nowhere in its
    output. The report's steps, by name."""
    args = [sys.executable, "-m", "cpi.cli", "certify", "--config", str(config), "--stemcell", stemcell,
            "--stemcell-properties", json.dumps(stemcell_properties), "--vm-type", json.dumps(vm_type),
            "--network", json.dumps(network), "--json"]
    if disk_type is not None:
        args += ["--disk-type", json.dumps(disk_type)]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, (proc.stderr, [s for s in report["steps"] if s["status"] == "failed"],
                                  report["cleanup"], report["leftovers"])
    assert report["ok"] is True and report["clean"] is True and report["cloud"] == cloud
    steps = {s["name"]: s for s in report["steps"]}
    for name in COUNTED:
        assert steps[name]["requests"] and steps[name]["requests"] >= 1, steps[name]
    assert secret is None or secret not in proc.stdout + proc.stderr
    return steps
