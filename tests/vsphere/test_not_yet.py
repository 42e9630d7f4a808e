"""What the vsphere cloud cannot do for a vm_type it refuses before it makes anything:
create_vm of a vm_type that sets `nsx` (NSX-V) while cpi.json names no NSX-V manager fails
with VMCreationFailed saying so (not retryable), and the vCenter has no VM more (#25). (The
official CPI ignores the key then; a VM made without the security groups and load
balancers its vm_type asks would be reachable where it should not be, or not where it
should.) What NSX-V does with a manager: test_nsxv.py.

`vm_names` and `NETWORKS` serve the other tests that check that nothing was made."""

from __future__ import annotations

import json

from tests.support.runner import COLD_ENV, Cpi
from tests.unit.test_vsphere_props import VM_TYPE

NETWORKS = {"default": {"type": "manual", "ip": "10.0.0.10", "netmask": "255.255.255.0", "gateway": "10.0.0.1",
                        "default": ["dns", "gateway"], "cloud_properties": {"name": "VM Network"}}}


def vm_names(si) -> list[str]:
    from pyVmomi import vim

    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    try:
        return sorted(vm.name for vm in view.view)
    finally:
        view.Destroy()


def test_create_vm_refuses_nsx_without_the_nsx_manager_before_making_anything(vcsim, si, tmp_path):
    vsphere = {"host": f"{vcsim.host}:{vcsim.port}", "user": vcsim.username, "password": vcsim.password,
               "datacenters": [{"name": "DC0", "clusters": ["DC0_C0"], "datastore_pattern": "^LocalDS_",
                                "persistent_datastore_pattern": "^LocalDS_"}]}
    config = {"cloud": {"plugin": "vsphere", "properties": {"vsphere": vsphere,
                                                            "agent": {"mbus": "nats://10.0.0.6:4222"}}}}
    config_path = tmp_path / "cpi.json"
    config_path.write_text(json.dumps(config))
    before = vm_names(si)
    response = Cpi(config_path, env={**COLD_ENV, "HOME": str(tmp_path)}).call(
        "create_vm", "agent-1", "sc-00000000-0000-0000-0000-000000000000",
        {"cpu": 1, "ram": 256, "disk": 1024, "nsx": VM_TYPE["nsx"]}, NETWORKS, [], {})
    assert response.error == {"type": "Bosh::Clouds::VMCreationFailed", "ok_to_retry": False,
                              "message": "vm_type cloud_properties 'nsx' needs the NSX-V manager, which cpi.json does "
                                         "not name (`nsx`, the job's vcenter.nsx.*)"}
    assert vm_names(si) == before
