"""`cloud.properties.validation.strict` is carried by the call to the cloud that reads the
cloud_properties (CallContext.strict), not set in a module global: through real bin/cpi
processes, each cloud refuses a key no model knows under it, before any request, and
without it leaves the key out with a warning and goes on to its IaaS. The IaaS here is a
closed port, so the lenient call ends on that (fast: retry_budget_seconds is 2), which
shows it got past the cloud_properties. The local cloud's case is
tests/local/test_local_cloud.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults.test_unreachable import BUDGET, SLACK, aws, closed, openstack, vsphere  # noqa: F401 - closed: a fixture
from tests.support.runner import Cpi

#: the nsxt section of a vSphere config whose manager is at `at`
NSXT = {"username": "admin", "password": "nsx-pw-not-used-here"}

#: cloud -> (cpi.json writer(path, closed), the request, where its unknown key is)
CASES = {
    "aws": (lambda p, at: aws(p, f"http://{at}", retry_budget_seconds=BUDGET),
            ("create_disk", 1024, {"type": "gp3", "typo_key": 1}, None), "disk_type cloud_properties.typo_key"),
    "openstack": (lambda p, at: openstack(p, f"http://{at}/v3"),
                  ("create_disk", 1024, {"typo_key": 1}, None), "disk_type cloud_properties.typo_key"),
    "vsphere": (lambda p, at: vsphere(p, at, nsxt={"host": at, **NSXT}),
                ("create_network", {"type": "manual", "range": "192.168.5.0/24", "gateway": "192.168.5.1",
                                    "cloud_properties": {"t0_router_id": "t0-1", "transport_zone_id": "tz-1",
                                                         "typo_key": 1}}),
                "network cloud_properties.typo_key"),
}


def _strict(path: Path) -> Path:
    doc = json.loads(path.read_text())
    doc["cloud"]["properties"]["validation"] = {"strict": True}
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("cloud", CASES)
def test_the_call_carries_validation_strict_to_the_cloud_properties(cloud, closed, tmp_path):  # noqa: F811
    write, request, where = CASES[cloud]
    lenient = Cpi(write(tmp_path / "cpi.json", closed)).call(*request, timeout=BUDGET + SLACK + 30)
    assert f"{where}: unknown property ignored" in lenient.log, lenient.log
    assert lenient.error is not None and lenient.error["type"] == "Bosh::Clouds::CloudError", lenient.error
    assert "cannot open a connection" in lenient.error["message"]  # it went on to the IaaS

    refused = Cpi(_strict(write(tmp_path / "strict.json", closed))).call(*request, timeout=30)
    assert refused.error is not None and refused.error["type"] == "Bosh::Clouds::CpiError", refused.error
    assert "typo_key: unknown property" in refused.error["message"], refused.error
    assert "cannot open a connection" not in refused.log  # refused before any request
