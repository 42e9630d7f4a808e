"""`default_scsi_controller_type`, through bin/cpi against the simulator: a VM's SCSI
controller is of the class asked for (the stemcell's LSI Logic one replaced when another
is asked, paravirtual by default, as in the official CPI), and its system, ephemeral and
persistent disks are on it (#25)."""

from __future__ import annotations

import pytest

from tests.vsphere import target as vsphere_target
from tests.vsphere.test_vsphere_cloud import VM_TYPE, network, vm_of

#: the stemcell image and the cloud that cleans up after itself, as the other vsphere tests have them
CLASSES = {None: "ParaVirtualSCSIController", "paravirtual": "ParaVirtualSCSIController",
           "lsi_logic": "VirtualLsiLogicController", "lsi_logic_sas": "VirtualLsiLogicSASController"}


def test_the_stemcell_has_an_lsi_logic_controller(cloud, si):
    """What the other cases change: the stemcell's own controller, read in the vCenter."""
    from pyVmomi import vim

    cloud.cpi()
    template = si.content.searchIndex.FindByInventoryPath(
        f"DC0/vm/{vsphere_target.TEMPLATE_FOLDER}/{cloud.stemcell}")
    controllers = [d for d in template.config.hardware.device if isinstance(d, vim.vm.device.VirtualSCSIController)]
    assert [type(c).__name__ for c in controllers] == ["vim.vm.device.VirtualLsiLogicController"]


@pytest.mark.parametrize("kind", list(CLASSES), ids=lambda kind: kind or "default")
def test_the_vm_has_the_controller_asked_for_with_its_disks_on_it(kind, cloud, si):
    from pyVmomi import vim

    cpi = cloud.cpi(**({"default_scsi_controller_type": kind} if kind else {}))
    vm_cid = cpi("create_vm", f"agent-scsi-{kind}", cloud.stemcell, VM_TYPE, network("10.0.0.110"), [], {})[0]
    disk_cid = None
    try:
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        hint = cpi("attach_disk", vm_cid, disk_cid)
        present = vm_of(si, vm_cid).config.hardware.device
        controllers = [d for d in present if isinstance(d, vim.vm.device.VirtualSCSIController)]
        assert [type(c).__name__ for c in controllers] == [f"vim.vm.device.{CLASSES[kind]}"]
        disks = {d.backing.fileName.rsplit("/", 1)[-1]: d for d in present if isinstance(d, vim.vm.device.VirtualDisk)}
        assert len(disks) == 3 and {d.controllerKey for d in disks.values()} == {controllers[0].key}, disks
        assert "ephemeral_disk.vmdk" in disks and f"{disk_cid}.vmdk" in disks
        assert hint == str(disks[f"{disk_cid}.vmdk"].unitNumber)
        cpi("detach_disk", vm_cid, disk_cid)
    finally:
        cpi("delete_vm", vm_cid)
        if disk_cid:
            cpi("delete_disk", disk_cid)
