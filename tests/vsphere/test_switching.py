"""Switching between this CPI and the official vSphere CPI, both ways, on the simulator (#32).

bin/cpi runs on the cpi.json the official job renders (tests/vsphere/official_cpi.py); the
official CPI's disk and VM calls are tests/vsphere/official_cpi.py's, read from its source.
What either leaves is checked in the vCenter itself:

- a disk this CPI attached carries the official CPI's record ("BOSH Persistent Disks"), so
  the official detach_disk leaves it where it is (without the record it moves the disk onto
  its own path and fails with FileAlreadyExists, as the official CPI did); its delete_disk
  and delete_vm leave nothing of this CPI's (no `<cid>.json` beside the disk);
- a disk the official CPI attached is found, detached (its record removed with it) and
  kept through delete_vm by this CPI, including one vSphere moved since (Storage vMotion).
"""

from __future__ import annotations

import json

import pytest

from tests.support.runner import Cpi
from tests.vsphere import official_cpi
from tests.vsphere import target as vsphere_target
from tests.vsphere.test_switch_from_official import strip_origin
from tests.vsphere.test_vsphere_cloud import VM_TYPE, network, vm_of


@pytest.fixture
def both(cloud, vcsim, si, tmp_path):
    """(this CPI on the official cpi.json, the official CPI), the stemcell made."""
    cloud.cpi()  # makes cloud.stemcell, deleted (and everything checked gone) by the fixture
    path = tmp_path / "official-cpi.json"
    path.write_text(json.dumps(official_cpi.cpi_json(vcsim)))
    return Cpi(path), official_cpi.OfficialVsphereCpi(si)


def records(vm) -> dict[int, tuple[str, str, str]]:
    """The VM's "BOSH Persistent Disks" records: key → (id, label, value)."""
    return {key: (p.id, p.label, p.value) for key, p in official_cpi.OfficialVsphereCpi.properties(vm).items()}


def device(vm, disk_cid: str):
    return next(d for d in official_cpi.OfficialVsphereCpi.disks(vm)
                if d.backing.fileName.endswith(f"/{disk_cid}.vmdk"))


def remove_directory(si, official, path: str) -> None:
    """The VM's directory Storage vMotion made on the disk's datastore (gone already when the
    VM's home is on that datastore: delete_vm removed it)."""
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    try:
        WaitForTask(si.content.fileManager.DeleteDatastoreFile_Task(name=path, datacenter=official.datacenter))
    except vim.fault.FileNotFound:
        return


def disk_files(si) -> list[str]:
    """The files of disk_path on every datastore (its snapshots folder aside)."""
    vcenter = vsphere_target.Vcenter(None, si)
    return sorted(name for ds in vcenter.datastores() for name in vcenter.files(ds, vsphere_target.DISK_PATH)
                  if name != "snapshots")


def clean_up(cpi, official, vm_cid: str, disk_cids: list[str]) -> None:
    """After a failure: what is left goes, so that the next tests start clean."""
    if cpi("has_vm", vm_cid):
        cpi("delete_vm", vm_cid)
    for disk_cid in disk_cids:
        if official.disk_path_of(disk_cid) is not None:
            cpi("delete_disk", disk_cid)


def test_what_this_cpi_attached_the_official_cpi_detaches_and_deletes(cloud, both, si):
    cpi, official = both
    vm_cid = cpi("create_vm", "agent-switch-back", cloud.stemcell, VM_TYPE, network("10.0.0.91"), [], {})[0]
    disk_cid = cpi("create_disk", 1024, {}, vm_cid)
    try:
        switch_back(cpi, official, si, vm_cid, disk_cid)
    finally:
        clean_up(cpi, official, vm_cid, [disk_cid])
    assert disk_files(si) == []  # the fixture then checks that nothing else is left


def switch_back(cpi, official, si, vm_cid: str, disk_cid: str) -> None:
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    cpi("attach_disk", vm_cid, disk_cid)
    cpi("set_disk_metadata", disk_cid, {"director": "bosh-1", "deployment": "cf", "instance_index": "0"})
    vm = vm_of(si, vm_cid)
    path = device(vm, disk_cid).backing.fileName
    # recorded as the official attach_disk records it
    assert records(vm) == {device(vm, disk_cid).key: (disk_cid, disk_cid, path)}
    assert disk_files(si) == sorted([f"{disk_cid}.vmdk", f"{disk_cid}-flat.vmdk"])  # no metadata file beside it

    # the model is true to the official CPI: without the record its detach moves the disk
    # onto its own path, which vSphere refuses (what the official CPI did to this CPI's disks)
    WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(vAppConfig=vim.vApp.VmConfigSpec(property=[
        vim.vApp.PropertySpec(operation="remove", removeKey=device(vm, disk_cid).key)]))))
    with pytest.raises(vim.fault.FileAlreadyExists):
        official.detach_disk(vm_cid, disk_cid)
    assert official.moves == [(path, path)]
    assert cpi("get_disks", vm_cid) == []  # detached before the move failed, as there

    cpi("attach_disk", vm_cid, disk_cid)
    official.moves.clear()
    official.detach_disk(vm_cid, disk_cid)
    assert official.moves == [] and records(vm_of(si, vm_cid)) == {}
    assert official.disk_path_of(disk_cid) == path  # where it was
    official.attach_disk(vm_cid, disk_cid)  # and back, to be deleted with the VM: detached first
    official.delete_vm(vm_cid)
    assert vm_of(si, vm_cid) is None and official.moves == []
    official.delete_disk(disk_cid)


def test_what_the_official_cpi_attached_this_cpi_detaches_and_keeps(cloud, both, si):
    from pyVim.task import WaitForTask
    from pyVmomi import vim

    cpi, official = both
    vm_cid = cpi("create_vm", "agent-official", cloud.stemcell, VM_TYPE, network("10.0.0.92"), [], {})[0]
    strip_origin(vm_of(si, vm_cid))  # now a VM as the official CPI makes it
    disk_cid = cpi("create_disk", 1024, {}, vm_cid)
    moved_cid = cpi("create_disk", 1024, {}, vm_cid)
    recorded_path = official.disk_path_of(moved_cid)
    datastore = recorded_path.split("]")[0] + "]"
    try:
        official.attach_disk(vm_cid, disk_cid)
        assert cpi("get_disks", vm_cid) == [disk_cid]
        cpi("detach_disk", vm_cid, disk_cid)
        assert cpi("get_disks", vm_cid) == [] and records(vm_of(si, vm_cid)) == {}

        # a disk vSphere moved into the VM's folder since the official CPI recorded it
        # (Storage vMotion): this CPI knows it by the record, and keeps it through delete_vm,
        # moving it back where it was recorded, as the official CPI does
        official.attach_disk(vm_cid, moved_cid)
        official.attach_disk(vm_cid, disk_cid)
        vm = vm_of(si, vm_cid)
        moved = device(vm, moved_cid)
        elsewhere = f"{datastore} {vm_cid}/{moved_cid}.vmdk"
        official.detach_disk(vm_cid, moved_cid)
        try:  # where Storage vMotion puts it: the VM's directory on that datastore
            si.content.fileManager.MakeDirectory(name=f"{datastore} {vm_cid}", datacenter=official.datacenter)
        except vim.fault.FileAlreadyExists:
            assert vm.config.files.vmPathName.startswith(datastore)  # the VM's home: there already
        WaitForTask(si.content.virtualDiskManager.MoveVirtualDisk_Task(
            sourceName=recorded_path, sourceDatacenter=official.datacenter, destName=elsewhere,
            destDatacenter=official.datacenter, force=False))
        backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(fileName=elsewhere, diskMode="independent_persistent")
        again = vim.vm.device.VirtualDisk(key=-1, controllerKey=moved.controllerKey, unitNumber=moved.unitNumber,
                                          backing=backing)
        WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[
            vim.vm.device.VirtualDeviceSpec(operation="add", device=again)])))
        key = next(d.key for d in official.disks(vm_of(si, vm_cid)) if d.backing.fileName == elsewhere)
        WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(vAppConfig=vim.vApp.VmConfigSpec(property=[
            vim.vApp.PropertySpec(operation="add", info=vim.vApp.PropertyInfo(
                key=key, id=moved_cid, label=moved_cid, category=official_cpi.CATEGORY, type="string",
                value=recorded_path, description=official_cpi.DESCRIPTION, userConfigurable=True))]))))
        assert cpi("has_disk", moved_cid) is False  # not in disk_path: found only through the record
        assert cpi("get_disks", vm_cid) == sorted([disk_cid, moved_cid])
        cpi("delete_vm", vm_cid)
        assert vm_of(si, vm_cid) is None
        assert official.disk_path_of(moved_cid) == recorded_path  # moved back, and kept
        for cid in (disk_cid, moved_cid):
            assert cpi("has_disk", cid) is True
            cpi("delete_disk", cid)
    finally:
        clean_up(cpi, official, vm_cid, [disk_cid, moved_cid])
        remove_directory(si, official, f"{datastore} {vm_cid}")
    assert disk_files(si) == []
