"""`cpi certify` (#11 part 6) against moto, through the real `cpi` executable: the whole
scenario passes with a light stemcell, each AWS call's request count is in the report, and
the account holds nothing more afterwards."""

from __future__ import annotations

from tests.aws import moto_env
from tests.aws.conftest import VM_PROPS
from tests.support import certify


def test_certify_passes_on_moto_and_leaves_nothing(account, ec2, config_path):
    before = moto_env.inventory(ec2)
    stemcell = {"name": moto_env.STEMCELL_NAME, "version": "1", "ami": {moto_env.REGION: account.ami_id}}
    network = {"default": {"type": "dynamic", "dns": ["10.0.0.2"], "default": ["dns", "gateway"],
                           "cloud_properties": {"subnet": account.subnet_id}}}
    steps = certify.passed("aws", config_path, stemcell="", stemcell_properties=stemcell, vm_type=VM_PROPS,
                           network=network, disk_type={"type": "gp3"}, secret=moto_env.SECRET_ACCESS_KEY, timeout=300)
    assert steps["create_vm"]["created"].startswith("i-")
    assert steps["create_disk"]["created"].startswith("vol-")
    assert steps["snapshot_disk"]["created"].startswith("snap-")
    after = moto_env.inventory(ec2)
    assert {kind: after[kind] - before[kind] for kind in after} == {kind: set() for kind in after}
