"""`cpi certify` (#11 part 6) against the OpenStack services, through the real `cpi`
executable: the whole scenario passes, each call's request count is in the report, and the
server, volume, snapshot and port it made are gone afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.runner import ROOT


def test_certify_passes_on_openstack_and_leaves_nothing(cloud):
    image_path, stemcell_properties = cloud.stemcell_args()
    proc = subprocess.run(
        [sys.executable, "-m", "cpi.cli", "certify", "--config", str(cloud.config_path), "--stemcell", image_path,
         "--stemcell-properties", json.dumps(stemcell_properties),
         "--vm-type", json.dumps(cloud.vm_cloud_properties()), "--network", json.dumps(cloud.dynamic_network()),
         "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, (proc.stderr, [s for s in report["steps"] if s["status"] == "failed"],
                                  report["cleanup"], report["leftovers"])
    assert report["ok"] is True and report["clean"] is True and report["cloud"] == "openstack"
    steps = {s["name"]: s for s in report["steps"]}
    for name in ("create_vm", "create_disk", "snapshot_disk"):
        assert steps[name]["created"], steps[name]
    for name in ("create_vm", "attach_disk", "resize_disk", "delete_vm"):
        assert steps[name]["requests"] and steps[name]["requests"] >= 1, steps[name]
    # what this run made is gone (compared by cid, not with a before/after inventory: another
    # test session on the same services may create things meanwhile)
    after = cloud.client.inventory()
    made = {"servers": steps["create_vm"]["created"], "volumes": steps["create_disk"]["created"],
            "snapshots": steps["snapshot_disk"]["created"]}
    assert {kind: cid for kind, cid in made.items() if cid in after[kind]} == {}
    assert cloud.client.ports(device_id=made["servers"]) == []
