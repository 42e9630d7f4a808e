"""The lifecycle's real-vCenter mode (CPI_LIFECYCLE_VSPHERE_CONFIG, tests/vsphere/target.py):
the file is read as docs/testing.md documents it, a file that lacks something is refused
naming it, and a target made from such a file — pointed here at the simulator, with folders,
a disk path and a subnet of its own — runs a lifecycle and finds what it made where that
file says, and nothing afterwards."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.vsphere import target as vsphere_target

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def documented() -> dict:
    text = DOCS.read_text()
    block = re.search(r"CPI_LIFECYCLE_VSPHERE_CONFIG=/path/file\.json.*?```json\n(.*?)^```", text, re.S | re.M)
    assert block is not None, "docs/testing.md has no example file for CPI_LIFECYCLE_VSPHERE_CONFIG"
    return json.loads(block.group(1))


def test_the_documented_file_is_read_and_one_that_lacks_something_is_refused_naming_it(tmp_path):
    path = tmp_path / "real.json"
    path.write_text(json.dumps(documented()))
    config, site = vsphere_target.load(path)
    assert "lifecycle" not in config and config["cloud"]["plugin"] == "vsphere"
    assert (site.host, site.port, site.datacenter) == ("vcenter.example", 443, "dc1")
    assert (site.vm_folder, site.template_folder, site.disk_path) == ("cpi-test-vms", "cpi-test-templates",
                                                                      "cpi-test-disks")
    assert (site.ip(0), site.gateway, site.netmask()) == ("10.0.16.50", "10.0.16.1", "255.255.255.0")
    site.first_ip_offset = 60  # 60 + 200 addresses: more than a /24 holds
    with pytest.raises(vsphere_target.LifecycleConfigError, match="smaller offset or a larger subnet"):
        site.ip(0)

    lacking = documented()
    del lacking["lifecycle"]["network"]
    path.write_text(json.dumps(lacking))
    with pytest.raises(vsphere_target.LifecycleConfigError, match=r"lifecycle\.network missing"):
        vsphere_target.load(path)
    path.write_text(json.dumps({"cloud": {"plugin": "aws"}}))
    with pytest.raises(vsphere_target.LifecycleConfigError, match=r'cloud\.plugin must be "vsphere"'):
        vsphere_target.load(path)
    no_password = documented()
    del no_password["cloud"]["properties"]["vsphere"]["password"]
    path.write_text(json.dumps(no_password))
    with pytest.raises(vsphere_target.LifecycleConfigError,
                       match=r"invalid cloud\.properties\.vsphere: .*password") as refused:
        vsphere_target.load(path)
    assert "..." not in str(refused.value)  # no value of the file in the message


def test_a_target_made_from_such_a_file_finds_what_it_made_where_the_file_says(vcsim, tmp_path_factory):
    properties = vsphere_target.cpi_properties(vcsim)
    properties["datacenters"][0].update(vm_folder="lc/vms", template_folder="lc-templates", disk_path="lc-disks")
    path = tmp_path_factory.mktemp("real") / "real.json"
    path.write_text(json.dumps({"cloud": {"plugin": "vsphere", "properties": {
        "vsphere": properties, "agent": {"mbus": "nats://nats:nats-pw@10.0.9.5:4222"}}},
        "lifecycle": {"network": vsphere_target.NETWORK, "subnet_cidr": "10.0.9.0/24", "first_ip_offset": 20}}))
    target = vsphere_target.real(tmp_path_factory, path)
    try:
        assert target.config_path.stat().st_mode & 0o077 == 0  # it holds the password
        stemcell_cid = target.cpi("create_stemcell", *target.stemcell_args())
        vm_cid, networks = target.cpi("create_vm", "agent-real", stemcell_cid, target.vm_cloud_properties(),
                                      target.manual_network(1), [], {})
        disk_cid = target.cpi("create_disk", 2048, {}, vm_cid)
        target.cpi("attach_disk", vm_cid, disk_cid)
        assert target.vm_exists(vm_cid) and target.disk_attached_to(disk_cid) == vm_cid
        assert target.disk_size_mib(disk_cid) == 2048
        assert networks["default"]["ip"] == "10.0.9.21" and target.settings(vm_cid)["networks"]["default"]["ip"] == \
            "10.0.9.21"
        assert set(target.leftovers()) == {"vms", "stemcells", "disks"}  # all of it in the file's places
        assert target.disk_files(disk_cid)  # in the file's disk_path
        target.cpi("detach_disk", vm_cid, disk_cid)
        target.cpi("delete_vm", vm_cid)
        target.cpi("delete_disk", disk_cid)
        target.cpi("delete_stemcell", stemcell_cid)
        assert target.leftovers() == {}
    finally:
        target.cleanup()
    assert vcsim.process.poll() is None  # a real vCenter's target does not stop anything
