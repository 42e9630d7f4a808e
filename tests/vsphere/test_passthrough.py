"""A vm_type's `vgpus`, `pci_passthroughs` and `device_groups` (#25), through bin/cpi against
the simulator, checked in the vCenter itself.

Where the vCenter or its hosts lack them, create_vm fails with VMCreationFailed (not
retryable) naming the key, the value, the cluster and what its hosts offer, and the vCenter
has no VM more: on the shared simulator (vSphere 6.5's API, no GPU), and on a simulator of
this module's own that plays a vSphere 7 vCenter with one GPU host (main.go's `-gpu-host`:
DC0_C0_H1 has a Tesla T4 ready for passthrough and its vGPU profiles). On that one, a VM
asking for them gets them as the official CPI gives them: a VirtualPCIPassthrough per vGPU
(VmiopBackingInfo) and per PCI device (DynamicBackingInfo allowing its ids), all its memory
reserved and its hardware at the newest version.

Not tested: device groups on a vCenter that has them (vSphere 8.0's
RetrieveVendorDeviceGroupInfo and VirtualDeviceGroups, which govmomi 0.24 does not know).
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support import vcsim as vcsim_server
from tests.support.runner import COLD_ENV, Cpi
from tests.vsphere import stemcell as stemcell_image
from tests.vsphere import target as vsphere_target
from tests.vsphere.test_not_yet import NETWORKS, vm_names

GPU_HOST = "DC0_C0_H1"
VM_TYPE = {"cpu": 1, "ram": 512, "disk": 1024}
T4 = {"vendor_id": 0x10DE, "device_id": 0x1EB8}


@pytest.fixture(scope="module")
def gpu_vcsim(vcsim):
    """A simulator of this module's own: vSphere 7's API, and host DC0_C0_H1 with a GPU."""
    with vcsim_server.running("-gpu-host", GPU_HOST, "-api-version", "7.0.0.0") as server:
        yield server


@pytest.fixture(scope="module")
def gpu_vcenter(gpu_vcsim):
    vcenter = vsphere_target.Vcenter(gpu_vcsim)
    yield vcenter
    vcenter.close()


def cpi_on(server, tmp_path) -> Cpi:
    path = vsphere_target.write_config(tmp_path / f"cpi-{uuid.uuid4().hex[:8]}.json", server)
    return Cpi(path, env={**COLD_ENV, "HOME": str(tmp_path)})


def refused(cpi: Cpi, key: str, value, si) -> dict:
    """The error of a create_vm asking for `key`: `value`, after checking it made nothing."""
    before = vm_names(si)
    response = cpi.call("create_vm", "agent-gpu", "sc-00000000-0000-0000-0000-000000000000",
                        {**VM_TYPE, key: value}, NETWORKS, [], {})
    assert vm_names(si) == before
    assert response.error is not None and response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert response.error["ok_to_retry"] is False
    return response.error


@pytest.mark.parametrize("key, value, message", [
    ("vgpus", ["grid_t4-16q"],
     "vm_type vgpus: no host of cluster DC0_C0 offers vGPU profile 'grid_t4-16q' (its hosts offer none)"),
    ("pci_passthroughs", [T4],
     ("vm_type pci_passthroughs: the vCenter at {address} (API 6.5) lacks Dynamic DirectPath I/O, which needs "
     "vSphere 7.0 or later")),
    ("device_groups", ["Nvidia:2@nvidia_h100l-94c%NVLink"],
     ("vm_type device_groups: the vCenter at {address} (API 6.5) lacks vendor device groups, which need vSphere 8.0 "
     "or later")),
])
def test_a_vcenter_without_gpus_refuses_them_before_making_anything(key, value, message, vcsim, si, tmp_path):
    error = refused(cpi_on(vcsim, tmp_path), key, value, si)
    assert error["message"] == message.format(address=f"{vcsim.host}:{vcsim.port}")


@pytest.mark.parametrize("key, value, message", [
    ("vgpus", ["grid_t4-1q", "grid_a100-40c"],
     ("vm_type vgpus: no host of cluster DC0_C0 offers vGPU profile 'grid_a100-40c' (its hosts offer grid_t4-16q, "
     "grid_t4-1q, grid_t4-2q)")),
    ("pci_passthroughs", [T4, {"vendor_id": 0x10DE, "device_id": 0x20B5}],
     ("vm_type pci_passthroughs: no host of cluster DC0_C0 offers PCI device 0x10de:0x20b5 (vendor:device) ready "
     "for passthrough (its hosts offer 0x10de:0x1eb8)")),
    ("device_groups", ["Nvidia:2@nvidia_h100l-94c%NVLink"],
     ("vm_type device_groups: the vCenter at {address} (API 7.0.0.0) lacks vendor device groups, which need "
     "vSphere 8.0 or later")),
])
def test_a_gpu_host_refuses_what_it_does_not_offer_naming_what_it_does(key, value, message, gpu_vcsim, gpu_vcenter,
                                                                        tmp_path):
    error = refused(cpi_on(gpu_vcsim, tmp_path), key, value, gpu_vcenter.si)
    assert error["message"] == message.format(address=f"{gpu_vcsim.host}:{gpu_vcsim.port}")


def test_vgpus_and_pci_devices_are_given_to_the_vm_as_the_official_cpi_gives_them(gpu_vcsim, gpu_vcenter,
                                                                                   tmp_path):
    from pyVmomi import vim

    cpi = cpi_on(gpu_vcsim, tmp_path)
    stemcell = cpi("create_stemcell", str(stemcell_image.build(tmp_path / "image")), {})
    try:
        vm_type = {**VM_TYPE, "vgpus": ["grid_t4-1q", "grid_t4-1q"], "pci_passthroughs": [T4, T4]}
        response = cpi.call("create_vm", "agent-gpu", stemcell, vm_type, NETWORKS, [], {})
        assert response.error is None, response.error
        vm_cid = response.result[0]
        try:
            vm = gpu_vcenter.vms(vsphere_target.VM_FOLDER)[vm_cid]
            passthrough = vim.vm.device.VirtualPCIPassthrough
            given = [d.backing for d in vm.config.hardware.device if isinstance(d, passthrough)]
            assert sorted(b.vgpu for b in given if isinstance(b, passthrough.VmiopBackingInfo)) == ["grid_t4-1q"] * 2
            allowed = [[(a.vendorId, a.deviceId) for a in b.allowedDevice] for b in given
                       if isinstance(b, passthrough.DynamicBackingInfo)]
            assert allowed == [[(0x10DE, 0x1EB8)]] * 2
            assert len(given) == 4
            assert vm.config.memoryReservationLockedToMax is True  # neither the vm_type nor cpi.json asked
            assert f"hardware upgrade of {vm_cid} to the newest version: done" in response.log
            assert f"PCI device 0x10de:0x1eb8 of {vm_cid}: done" in response.log
            assert str(vm.runtime.powerState) == "poweredOn"
        finally:
            cpi("delete_vm", vm_cid)
        assert vm_cid not in gpu_vcenter.vms(vsphere_target.VM_FOLDER)
    finally:
        cpi("delete_stemcell", stemcell)
    assert json.loads(cpi.config_path.read_text())["cloud"]["properties"]["vsphere"]["password"] not in response.log
