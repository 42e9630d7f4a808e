"""What the vsphere cloud does not drive yet it refuses, before it makes anything: create_vm
of a vm_type that sets one of the keys docs/vsphere.md names fails with VMCreationFailed
naming the key (not retryable), and the vCenter has no VM more (#25)."""

from __future__ import annotations

import json
import re

import pytest

from cpi.clouds.vsphere import props, vms
from tests.support.runner import COLD_ENV, Cpi
from tests.unit.test_vsphere_props import VM_TYPE

NETWORKS = {"default": {"type": "manual", "ip": "10.0.0.10", "netmask": "255.255.255.0", "gateway": "10.0.0.1",
                        "default": ["dns", "gateway"], "cloud_properties": {"name": "VM Network"}}}


def test_the_reference_names_every_key_create_vm_refuses():
    """docs/vsphere.md, generated from VMCloudProperties' docstring, lists what vms.py refuses."""
    doc = " ".join((props.VMCloudProperties.__doc__ or "").split())
    refused = doc.partition("Not driven yet:")[2]
    assert set(re.findall(r"`(\w+)`", refused)) == set(vms._NOT_YET)


def vm_names(si) -> list[str]:
    from pyVmomi import vim

    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    try:
        return sorted(vm.name for vm in view.view)
    finally:
        view.Destroy()


#: a manager of each kind, as the job renders it (nothing answers there: none is asked)
MANAGERS = {"nsx": {"address": "nsx.example", "user": "admin", "password": "nsx-secret"}}


@pytest.mark.parametrize("configured", [False, True], ids=["no-manager", "manager"])
@pytest.mark.parametrize("key", vms._NOT_YET)
def test_create_vm_refuses_what_it_does_not_drive_yet_before_making_anything(key, configured, vcsim, si, tmp_path):
    """Without the manager the vm_type needs, the refusal says cpi.json lacks it; with one,
    that this CPI does not drive it yet. Either way, before anything is made."""
    vsphere = {"host": f"{vcsim.host}:{vcsim.port}", "user": vcsim.username, "password": vcsim.password,
               "datacenters": [{"name": "DC0", "clusters": ["DC0_C0"], "datastore_pattern": "^LocalDS_",
                                "persistent_datastore_pattern": "^LocalDS_"}]}
    if configured:
        vsphere[key] = MANAGERS[key]
    config = {"cloud": {"plugin": "vsphere", "properties": {"vsphere": vsphere,
                                                            "agent": {"mbus": "nats://10.0.0.6:4222"}}}}
    config_path = tmp_path / "cpi.json"
    config_path.write_text(json.dumps(config))
    before = vm_names(si)
    response = Cpi(config_path, env={**COLD_ENV, "HOME": str(tmp_path)}).call(
        "create_vm", "agent-1", "sc-00000000-0000-0000-0000-000000000000",
        {"cpu": 1, "ram": 256, "disk": 1024, key: VM_TYPE[key]}, NETWORKS, [], {})
    manager = vms._MANAGERS[key]
    message = (f"vm_type cloud_properties '{key}': this CPI does not drive the {manager} manager yet; keep the "
               "official CPI for these VMs (docs/vsphere.md)" if configured else
               f"vm_type cloud_properties '{key}' needs the {manager} manager, which cpi.json does not name "
               f"(`{key}`, the job's vcenter.{key}.*)")
    assert response.error == {"type": "Bosh::Clouds::VMCreationFailed", "ok_to_retry": False, "message": message}
    assert vm_names(si) == before
