"""`cpi certify` (#11 part 6) against moto, through the real `cpi` executable: the whole
scenario passes with a light stemcell, each AWS call's request count is in the report, and
the account holds nothing more afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.aws import moto_env
from tests.aws.conftest import VM_PROPS
from tests.support.runner import ROOT


def test_certify_passes_on_moto_and_leaves_nothing(account, ec2, config_path):
    before = moto_env.inventory(ec2)
    stemcell = {"name": moto_env.STEMCELL_NAME, "version": "1", "ami": {moto_env.REGION: account.ami_id}}
    network = {"default": {"type": "dynamic", "dns": ["10.0.0.2"], "default": ["dns", "gateway"],
                           "cloud_properties": {"subnet": account.subnet_id}}}
    proc = subprocess.run(
        [sys.executable, "-m", "cpi.cli", "certify", "--config", str(config_path), "--stemcell", "",
         "--stemcell-properties", json.dumps(stemcell), "--vm-type", json.dumps(VM_PROPS),
         "--disk-type", json.dumps({"type": "gp3"}), "--network", json.dumps(network), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, (proc.stderr, [s for s in report["steps"] if s["status"] == "failed"],
                                  report["cleanup"], report["leftovers"])
    assert report["ok"] is True and report["clean"] is True and report["cloud"] == "aws"
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["create_vm"]["created"].startswith("i-")
    assert steps["create_disk"]["created"].startswith("vol-")
    assert steps["snapshot_disk"]["created"].startswith("snap-")
    # every call that reaches EC2 says how many requests it made
    for name in ("create_vm", "attach_disk", "resize_disk", "delete_vm"):
        assert steps[name]["requests"] and steps[name]["requests"] >= 1, steps[name]
    assert moto_env.SECRET_ACCESS_KEY not in proc.stdout + proc.stderr
    after = moto_env.inventory(ec2)
    assert {kind: after[kind] - before[kind] for kind in after} == {kind: set() for kind in after}
