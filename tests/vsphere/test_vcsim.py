"""The vSphere simulator the vSphere cloud is tested against, through pyvmomi as the CPI
will use it: a real client against the real simulator (tests/support/vcsim.py), no mocks.

Beyond its default inventory, these pin down what vSphere does and the CPI will rely on,
six of them only through the fixture's patches (tests/vsphere/vcsim/patch.py; against the
unpatched 0.24 the last five tests fail): a clone gets devices of its own,
ExtendVirtualDisk_Task grows a disk and refuses to shrink it, a VirtualDiskManager task has
no entity, reading an unset property gives None instead of dropping the connection,
datastores move into and out of a datastore cluster, which Destroy_Task removes, and a
clone spec's edit turns a SCSI controller into one of another class.
That destroying a VM deletes its attached disks' files 0.24 does as it is."""

from __future__ import annotations

import ssl

import pytest
from pyVim.connect import SmartConnect
from pyVim.task import WaitForTask
from pyVmomi import vim, vmodl

GIB_KB = 1024 * 1024
DISKS = "[LocalDS_0] cpi-test-disks"


def _find(si, path: str):
    found = si.content.searchIndex.FindByInventoryPath(path)
    assert found is not None, f"{path} is not in the inventory"
    return found


def _files(datastore, folder: str) -> dict[str, int | None]:
    """Name and size of each file in a datastore folder, as the datastore browser lists them
    (None for an empty file). The simulator records a disk's capacity as the size of its
    -flat.vmdk (tests/vsphere/vcsim/simulator/cpi_fixes.go)."""
    spec = vim.host.DatastoreBrowser.SearchSpec(
        matchPattern=["*"], details=vim.host.DatastoreBrowser.FileInfo.Details(fileSize=True))
    task = datastore.browser.SearchDatastore_Task(datastorePath=folder, searchSpec=spec)
    WaitForTask(task)
    return {f.path: f.fileSize for f in task.info.result.file}


def _disk_spec(capacity_kb: int):
    return vim.VirtualDiskManager.FileBackedVirtualDiskSpec(diskType="thin", adapterType="lsiLogic",
                                                            capacityKb=capacity_kb)


def _disk_files(vm) -> list[str]:
    return [d.backing.fileName for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)]


def test_it_serves_a_vcenter_with_the_default_inventory_to_its_user_only(vcsim, si):
    about = si.content.about
    assert about.apiType == "VirtualCenter", about
    dc = _find(si, "DC0")
    assert isinstance(dc, vim.Datacenter)
    cluster = _find(si, "DC0/host/DC0_C0")
    assert isinstance(cluster, vim.ClusterComputeResource)
    assert len(cluster.host) == 3
    assert {ds.name for ds in dc.datastore} == {"LocalDS_0", "LocalDS_1"}
    networks = {net.name: net for net in dc.network}
    assert "VM Network" in networks
    assert isinstance(networks["DC0_DVPG0"], vim.dvs.DistributedVirtualPortgroup)
    assert {vm.name for vm in dc.vmFolder.childEntity} >= {"DC0_H0_VM0", "DC0_C0_RP0_VM0"}
    with pytest.raises(vim.fault.InvalidLogin):
        SmartConnect(host=vcsim.host, port=vcsim.port, user=vcsim.username, pwd=vcsim.password + "x",
                     disableSslCertValidation=True)


def test_a_vm_is_cloned_configured_given_a_grown_disk_and_destroyed_with_it(si):
    dc = _find(si, "DC0")
    cluster = _find(si, "DC0/host/DC0_C0")
    datastore = next(ds for ds in dc.datastore if ds.name == "LocalDS_0")
    source = _find(si, "DC0/vm/DC0_C0_RP0_VM0")
    source_disks = _disk_files(source)
    assert source_disks == ["[LocalDS_0] DC0_C0_RP0_VM0/disk1.vmdk"]

    # clone, as a CPI makes a VM from a stemcell: the clone's disk is its own, the source's untouched
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(pool=cluster.resourcePool, datastore=datastore))
    task = source.CloneVM_Task(folder=dc.vmFolder, name="cpi-test-clone", spec=spec)
    WaitForTask(task)
    clone = task.info.result
    assert isinstance(clone, vim.VirtualMachine) and clone.name == "cpi-test-clone"
    assert task.info.entity == source and task.info.entityName == "DC0_C0_RP0_VM0"
    assert _disk_files(clone) == ["[LocalDS_0] cpi-test-clone/cpi-test-clone.vmdk"]
    assert _disk_files(source) == source_disks

    WaitForTask(clone.ReconfigVM_Task(spec=vim.vm.ConfigSpec(numCPUs=2, memoryMB=2048)))
    assert (clone.config.hardware.numCPU, clone.config.hardware.memoryMB) == (2, 2048)
    WaitForTask(clone.PowerOnVM_Task())
    assert clone.runtime.powerState == vim.VirtualMachine.PowerState.poweredOn

    # a persistent disk, made and grown through the VirtualDiskManager
    vdm = si.content.virtualDiskManager
    disk = f"{DISKS}/disk-1.vmdk"
    si.content.fileManager.MakeDirectory(name=DISKS, datacenter=dc, createParentDirectories=True)
    WaitForTask(vdm.CreateVirtualDisk_Task(name=disk, datacenter=dc, spec=_disk_spec(GIB_KB)))
    files = _files(datastore, DISKS)
    assert files.keys() == {"disk-1.vmdk", "disk-1-flat.vmdk"} and files["disk-1-flat.vmdk"] == GIB_KB * 1024
    WaitForTask(vdm.ExtendVirtualDisk_Task(name=disk, datacenter=dc, newCapacityKb=2 * GIB_KB, eagerZero=False))
    assert _files(datastore, DISKS)["disk-1-flat.vmdk"] == 2 * GIB_KB * 1024
    with pytest.raises(vmodl.fault.InvalidArgument) as refused:
        WaitForTask(vdm.ExtendVirtualDisk_Task(name=disk, datacenter=dc, newCapacityKb=GIB_KB, eagerZero=False))
    assert refused.value.invalidProperty == "newCapacityKb"
    assert _files(datastore, DISKS)["disk-1-flat.vmdk"] == 2 * GIB_KB * 1024

    # attached, then destroyed with the VM: vSphere deletes every attached disk's files (which
    # is why a CPI detaches persistent disks before it deletes a VM)
    controller = next(d for d in clone.config.hardware.device if isinstance(d, vim.vm.device.VirtualSCSIController))
    taken = {d.unitNumber for d in clone.config.hardware.device if d.controllerKey == controller.key}
    attach = vim.vm.device.VirtualDeviceSpec(
        operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
        device=vim.vm.device.VirtualDisk(
            key=-1, controllerKey=controller.key, unitNumber=min(set(range(16)) - taken - {7}),
            capacityInKB=2 * GIB_KB,
            backing=vim.vm.device.VirtualDisk.FlatVer2BackingInfo(fileName=disk, diskMode="independent_persistent")))
    WaitForTask(clone.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[attach])))
    assert disk in _disk_files(clone)
    WaitForTask(clone.PowerOffVM_Task())
    WaitForTask(clone.Destroy_Task())

    assert si.content.searchIndex.FindByInventoryPath("DC0/vm/cpi-test-clone") is None
    assert _files(datastore, DISKS) == {}
    with pytest.raises(vim.fault.FileNotFound):
        _files(datastore, "[LocalDS_0] cpi-test-clone")
    assert _disk_files(source) == source_disks
    assert "disk1.vmdk" in _files(datastore, "[LocalDS_0] DC0_C0_RP0_VM0")


def test_a_virtual_disk_manager_task_has_no_entity_and_can_be_waited_for(si):
    dc = _find(si, "DC0")
    vdm = si.content.virtualDiskManager
    name = "[LocalDS_1] cpi-test-entity.vmdk"
    task = vdm.CreateVirtualDisk_Task(name=name, datacenter=dc, spec=_disk_spec(1024))
    WaitForTask(task)
    assert task.info.state == vim.TaskInfo.State.success
    assert task.info.entity is None
    delete = vdm.DeleteVirtualDisk_Task(name=name, datacenter=dc)
    WaitForTask(delete)
    assert delete.info.entity is None


def test_reading_an_unset_property_gives_none_and_keeps_the_connection(si):
    vm = _find(si, "DC0/vm/DC0_H0_VM1")
    assert vm.snapshot is None
    assert vm.name == "DC0_H0_VM1"  # the same connection still answers


def test_datastores_move_into_and_out_of_a_datastore_cluster_which_is_destroyed_without_them(si):
    dc = _find(si, "DC0")
    folder = dc.datastoreFolder
    datastores = sorted(dc.datastore, key=lambda d: d.name)
    sub = folder.CreateFolder(name="cpi-test-pods")
    pod = sub.CreateStoragePod(name="cpi-test-pod")
    try:
        assert pod.podStorageDrsEntry.storageDrsConfig.podConfig.enabled  # on when made, as in vSphere
        for datastore in datastores:  # one move at a time: each listed once
            WaitForTask(pod.MoveIntoFolder_Task(list=[datastore]))
        assert [d.name for d in pod.childEntity] == ["LocalDS_0", "LocalDS_1"]
        assert all(d.parent == pod for d in datastores)
        assert {d.name for d in dc.datastore} == {"LocalDS_0", "LocalDS_1"}  # still the datacenter's
        WaitForTask(folder.MoveIntoFolder_Task(list=[datastores[0]]))  # out again
        assert datastores[0].parent == folder and [d.name for d in pod.childEntity] == ["LocalDS_1"]
        WaitForTask(pod.Destroy_Task())  # its datastore goes to the pod's folder, not away
        assert datastores[1].parent == sub and list(sub.childEntity) == [datastores[1]]
    finally:
        WaitForTask(folder.MoveIntoFolder_Task(list=datastores))
        WaitForTask(sub.Destroy_Task())
    assert all(d.parent == folder for d in datastores)
    assert {d.name for d in dc.datastore} == {"LocalDS_0", "LocalDS_1"}


def test_a_clone_spec_edit_turns_the_scsi_controller_into_another_class_keeping_its_disks(si):
    """As the official CPI sends it: the new class, the old key, no deviceInfo."""
    dc = _find(si, "DC0")
    source = _find(si, "DC0/vm/DC0_C0_RP0_VM0")
    old = next(d for d in source.config.hardware.device if isinstance(d, vim.vm.device.VirtualSCSIController))
    new = vim.vm.device.VirtualLsiLogicSASController(key=old.key, busNumber=old.busNumber, device=old.device,
                                                     sharedBus=old.sharedBus)
    edit = vim.vm.device.VirtualDeviceSpec(operation=vim.vm.device.VirtualDeviceSpec.Operation.edit, device=new)
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(pool=_find(si, "DC0/host/DC0_C0").resourcePool),
                            config=vim.vm.ConfigSpec(deviceChange=[edit]))
    task = source.CloneVM_Task(folder=dc.vmFolder, name="cpi-test-sas", spec=spec)
    WaitForTask(task)
    clone = task.info.result
    try:
        controllers = [d for d in clone.config.hardware.device if isinstance(d, vim.vm.device.VirtualSCSIController)]
        assert [(type(c), c.key) for c in controllers] == [(vim.vm.device.VirtualLsiLogicSASController, old.key)]
        assert controllers[0].deviceInfo.label  # labelled again
        assert [d.controllerKey for d in clone.config.hardware.device
                if isinstance(d, vim.vm.device.VirtualDisk)] == [old.key]
        # the source is untouched, and the connection alive (0.24 panicked and dropped it)
        assert [type(d) for d in source.config.hardware.device if isinstance(
            d, vim.vm.device.VirtualSCSIController)] == [type(old)]
    finally:
        WaitForTask(clone.Destroy_Task())


def test_a_reconfiguration_adds_edits_and_removes_vapp_properties_by_key(si):
    """As the official CPI records a persistent disk: all of a spec's changes, or none."""
    vm = _find(si, "DC0/vm/DC0_H0_VM0")

    def change(*properties) -> None:
        WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(vAppConfig=vim.vApp.VmConfigSpec(
            property=list(properties)))))

    def info(key: int, label: str):
        return vim.vApp.PropertyInfo(key=key, id=label, label=label, category="BOSH Persistent Disks",
                                     type="string", value=f"[LocalDS_0] d/{label}.vmdk")

    def held() -> dict[int, str]:
        config = vm.config.vAppConfig
        return {p.key: p.label for p in (config.property if config is not None else None) or []}

    change(vim.vApp.PropertySpec(operation="add", info=info(2001, "disk-a")),
           vim.vApp.PropertySpec(operation="add", info=info(2002, "disk-b")))
    assert held() == {2001: "disk-a", 2002: "disk-b"}
    change(vim.vApp.PropertySpec(operation="edit", info=info(2002, "disk-c")))
    with pytest.raises(vmodl.fault.InvalidArgument):  # a key it has: the whole spec is refused
        change(vim.vApp.PropertySpec(operation="remove", removeKey=2001),
               vim.vApp.PropertySpec(operation="add", info=info(2002, "disk-d")))
    assert held() == {2001: "disk-a", 2002: "disk-c"}
    change(vim.vApp.PropertySpec(operation="remove", removeKey=2001),
           vim.vApp.PropertySpec(operation="remove", removeKey=2002))
    assert held() == {}
    with pytest.raises(vmodl.fault.InvalidArgument):
        change(vim.vApp.PropertySpec(operation="remove", removeKey=2001))


def test_what_the_official_cpi_reads_is_served_as_vsphere_serves_it(vcsim, si):
    """The ServiceInstance's content before login, the policy service at /pbm/sdk, and a
    disk's capacity from a datastore search with a VmDiskQuery: what the official CPI's
    first requests and its disk lookup read (run by hand against this simulator, #32)."""
    from pyVmomi import SoapStubAdapter, pbm

    anonymous = SoapStubAdapter(host=vcsim.host, port=vcsim.port, version="vim.version.version10",
                                sslContext=ssl._create_unverified_context())
    collector = vmodl.query.PropertyCollector
    spec = collector.FilterSpec(objectSet=[collector.ObjectSpec(obj=vim.ServiceInstance("ServiceInstance", anonymous))],
                                propSet=[collector.PropertySpec(type=vim.ServiceInstance, pathSet=["content"])])
    content = vim.ServiceInstance("ServiceInstance", anonymous).RetrieveContent()
    found = content.propertyCollector.RetrieveContents([spec])
    assert found[0].propSet[0].val.sessionManager is not None

    policies = SoapStubAdapter(host=vcsim.host, port=vcsim.port, path="/pbm/sdk", version="pbm.version.version11",
                               sslContext=ssl._create_unverified_context())
    policies.cookie = si._stub.cookie
    assert pbm.ServiceInstance("ServiceInstance", policies).RetrieveContent().profileManager is not None

    dc = _find(si, "DC0")
    datastore = next(d for d in dc.datastore if d.name == "LocalDS_0")
    manager = si.content.virtualDiskManager
    si.content.fileManager.MakeDirectory(name="[LocalDS_0] cpi-test-capacity", datacenter=dc,
                                         createParentDirectories=True)
    WaitForTask(manager.CreateVirtualDisk_Task(name="[LocalDS_0] cpi-test-capacity/d.vmdk", datacenter=dc,
                                               spec=_disk_spec(2048)))
    try:
        browser = vim.host.DatastoreBrowser
        query = browser.VmDiskQuery(details=browser.VmDiskQuery.Details(capacityKb=True))
        task = datastore.browser.SearchDatastore_Task(datastorePath="[LocalDS_0] cpi-test-capacity", searchSpec=(
            browser.SearchSpec(matchPattern=["d.vmdk"], query=[query], details=browser.FileInfo.Details(
                fileType=True))))
        WaitForTask(task)
        assert [(f.path, f.capacityKb) for f in task.info.result.file] == [("d.vmdk", 2048)]
    finally:
        WaitForTask(si.content.fileManager.DeleteDatastoreFile_Task(name="[LocalDS_0] cpi-test-capacity",
                                                                    datacenter=dc))
