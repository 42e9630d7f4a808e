"""What bosh-vsphere-cpi does, for the tests of a switch between it and this CPI
(tests/vsphere/test_official_cpi_json.py, tests/vsphere/test_switching.py): the cpi.json its
job renders, and its disk and VM calls on what this CPI made, made here with pyVmomi.

Read from cloudfoundry/bosh-vsphere-cpi-release at 2cd48755 (facts, not its code):

- jobs/vsphere_cpi/templates/cpi.json.erb renders `cloud.properties` as `vcenters` (a list
  of one vCenter: host, user, password, datacenters and every `vcenter.*` setting the spec
  gives a default), `agent` (`ntp`, `mbus`) and `plugins`; src/vsphere_cpi/bin/vsphere_cpi
  merges the request's whole context into `vcenters[0]` before the cloud is made.
- attach_disk (lib/cloud/vsphere/cloud.rb, resources/vm.rb `attach_disk`,
  vcenter_client.rb `add_persistent_disk_property_to_vm`): one ReconfigVM adds the disk,
  independent-persistent, on the system disk's controller; a second adds a vApp property of
  category "BOSH Persistent Disks" whose key is the new device's key, id and label the
  disk's cid, value its `[ds] path`, unless a property of that key is there already.
- detach_disk (cloud.rb, resources/vm.rb `detach_disks`): finds the disk by its file name
  (`.../<cid>.vmdk`, else by the label of such a property); removes the device; a disk
  without the property is then moved to `[its datastore] <disk_path>/<its file name>`
  (MoveVirtualDisk_Task, no force): for a disk in disk_path already that is its own path,
  which vSphere refuses with FileAlreadyExists; a disk whose property names another path,
  which is not there, is moved back to it; last, the property is removed.
- delete_vm (cloud.rb): powers off; detaches, as above but moving none without a property,
  every disk independent-persistent or named by such a property; deletes `env.json` and
  `env.iso` beside the CD-ROM's ISO; destroys the VM.
- delete_disk (cloud.rb, vcenter_client.rb `delete_disk`): DeleteVirtualDisk_Task on the
  disk's path, nothing else. set_disk_metadata does nothing ("not implemented").
"""

from __future__ import annotations

import re
from typing import Any

from tests.vsphere import target as vsphere_target

CATEGORY = "BOSH Persistent Disks"
DESCRIPTION = "Used by BOSH to track persistent disks. Change at your own risk."


def cpi_json(server: Any, mbus: str = "nats://nats:nats-secret-pw@127.0.0.1:4222", **vcenter: Any) -> dict:
    """The cpi.json the official job renders for the simulator with the spec's defaults
    (`vcenter` changes keys of its one vCenter)."""
    datacenter = {"name": vsphere_target.DATACENTER, "vm_folder": vsphere_target.VM_FOLDER,
                  "template_folder": vsphere_target.TEMPLATE_FOLDER, "disk_path": vsphere_target.DISK_PATH,
                  "allow_mixed_datastores": True, "clusters": ["DC0_C0"], "datastore_pattern": "^LocalDS_",
                  "persistent_datastore_pattern": "^LocalDS_"}
    one = {"host": f"{server.host}:{server.port}", "user": server.username, "password": server.password,
           "datacenters": [datacenter], "default_disk_type": "preallocated",
           "default_scsi_controller_type": "paravirtual", "enable_auto_anti_affinity_drs_rules": False,
           "cpu_reserve_full_mhz": False, "memory_reservation_locked_to_max": False, "upgrade_hw_version": False,
           "default_hw_version": 17, "enable_human_readable_name": False, "http_logging": False,
           "ensure_no_ip_conflicts": True, "connection_options": {"ca_cert": None}, "vmx_options": {}, **vcenter}
    return {"cloud": {"plugin": "vsphere", "properties": {
        "vcenters": [one], "agent": {"ntp": ["0.pool.ntp.org", "1.pool.ntp.org"], "mbus": mbus}, "plugins": {}}}}


class OfficialVsphereCpi:
    """The official CPI's disk and VM calls on a pyVmomi ServiceInstance."""

    def __init__(self, si: Any, disk_path: str = vsphere_target.DISK_PATH):
        self.si = si
        self.content = si.content
        self.disk_path = disk_path
        self.datacenter = self.content.searchIndex.FindByInventoryPath(vsphere_target.DATACENTER)
        self.moves: list[tuple[str, str]] = []  # every MoveVirtualDisk_Task it sent: (source, destination)
        self.not_found: list[str] = []  # the files delete_vm did not find

    # -- lookups
    def vm(self, vm_cid: str) -> Any:
        found = self.content.searchIndex.FindByInventoryPath(
            f"{vsphere_target.DATACENTER}/vm/{vsphere_target.VM_FOLDER}/{vm_cid}")
        assert found is not None, f"official CPI: VM {vm_cid} not found"
        return found

    @staticmethod
    def disks(vm: Any) -> list[Any]:
        from pyVmomi import vim

        return [d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)]

    @staticmethod
    def properties(vm: Any) -> dict[int, Any]:
        """The VM's "BOSH Persistent Disks" vApp properties, by key (its device's key)."""
        config = vm.config.vAppConfig
        return {p.key: p for p in (config.property if config is not None else []) if p.category == CATEGORY}

    def disk_by_cid(self, vm: Any, disk_cid: str) -> Any:
        for disk in self.disks(vm):
            if disk.backing.fileName.endswith(f"/{disk_cid}.vmdk"):
                return disk
        recorded = self.properties(vm)
        return next((d for d in self.disks(vm) if d.key in recorded and recorded[d.key].label == disk_cid), None)

    def persistent_disks(self, vm: Any) -> list[Any]:
        recorded = self.properties(vm)
        return [d for d in self.disks(vm) if d.backing.diskMode == "independent_persistent" or d.key in recorded]

    def disk_path_of(self, disk_cid: str) -> str | None:
        """Where the disk is: `[ds] <disk_path>/<cid>.vmdk` on a datastore of the datacenter."""
        from pyVmomi import vim

        for datastore in self.datacenter.datastore:
            path = f"[{datastore.name}] {self.disk_path}/{disk_cid}.vmdk"
            try:
                self.content.virtualDiskManager.QueryVirtualDiskUuid(name=path, datacenter=self.datacenter)
                return path
            except vim.fault.FileNotFound:
                continue
        return None

    # -- the calls
    def _reconfig(self, vm: Any, spec: Any) -> None:
        from pyVim.task import WaitForTask

        WaitForTask(vm.ReconfigVM_Task(spec=spec))

    def attach_disk(self, vm_cid: str, disk_cid: str) -> str:
        from pyVmomi import vim

        vm = self.vm(vm_cid)
        path = self.disk_path_of(disk_cid)
        assert path is not None, f"official CPI: disk {disk_cid} not found"
        system = self.disks(vm)[0]
        used = {d.unitNumber for d in vm.config.hardware.device if d.controllerKey == system.controllerKey}
        unit = next(u for u in range(64) if u != 7 and u not in used)
        backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(fileName=path, diskMode="independent_persistent")
        device = vim.vm.device.VirtualDisk(key=-1, controllerKey=system.controllerKey, unitNumber=unit,
                                           backing=backing)
        self._reconfig(vm, vim.vm.ConfigSpec(deviceChange=[vim.vm.device.VirtualDeviceSpec(
            operation="add", device=device)]))
        attached = self.disk_by_cid(vm, disk_cid)
        if attached.key not in {p.key for p in (vm.config.vAppConfig.property if vm.config.vAppConfig else [])}:
            info = vim.vApp.PropertyInfo(key=attached.key, id=disk_cid, label=disk_cid, category=CATEGORY,
                                         type="string", value=path, description=DESCRIPTION, userConfigurable=True)
            self._reconfig(vm, vim.vm.ConfigSpec(vAppConfig=vim.vApp.VmConfigSpec(property=[
                vim.vApp.PropertySpec(operation="add", info=info)])))
        return str(attached.unitNumber)

    def _detach(self, vm: Any, disks: list[Any], force_disk_path: str | None) -> None:
        from pyVim.task import WaitForTask
        from pyVmomi import vim

        recorded = self.properties(vm)
        moves = []
        for disk in disks:
            found = recorded.get(disk.key)
            current = disk.backing.fileName
            datastore = re.match(r"^\[([^\]]+)\]", current).group(1)  # moves stay on the disk's datastore
            if found is None and force_disk_path is not None:
                moves.append((current, f"[{datastore}] {force_disk_path}/{current.rsplit('/', 1)[-1]}"))
            elif found is not None and _without_datastore(found.value) != _without_datastore(current) \
                    and self._missing(found.value):
                moves.append((current, f"[{datastore}] {found.value.split('] ', 1)[-1]}"))
        self._reconfig(vm, vim.vm.ConfigSpec(deviceChange=[
            vim.vm.device.VirtualDeviceSpec(operation="remove", device=d) for d in disks]))
        for source, destination in moves:
            self.moves.append((source, destination))
            WaitForTask(self.content.virtualDiskManager.MoveVirtualDisk_Task(
                sourceName=source, sourceDatacenter=self.datacenter, destName=destination,
                destDatacenter=self.datacenter, force=False))
        for disk in disks:
            if disk.key in self.properties(vm):
                self._reconfig(vm, vim.vm.ConfigSpec(vAppConfig=vim.vApp.VmConfigSpec(property=[
                    vim.vApp.PropertySpec(operation="remove", removeKey=disk.key)])))

    def _missing(self, path: str) -> bool:
        from pyVmomi import vim

        try:
            self.content.virtualDiskManager.QueryVirtualDiskUuid(name=path, datacenter=self.datacenter)
            return False
        except vim.fault.FileNotFound:
            return True

    def detach_disk(self, vm_cid: str, disk_cid: str) -> None:
        vm = self.vm(vm_cid)
        disk = self.disk_by_cid(vm, disk_cid)
        assert disk is not None, f"official CPI: DiskNotAttached: {disk_cid} is not attached to {vm_cid}"
        self._detach(vm, [disk], self.disk_path)

    def delete_disk(self, disk_cid: str) -> None:
        from pyVim.task import WaitForTask

        path = self.disk_path_of(disk_cid)
        assert path is not None, f"official CPI: DiskNotFound: {disk_cid}"
        WaitForTask(self.content.virtualDiskManager.DeleteVirtualDisk_Task(name=path, datacenter=self.datacenter))

    def delete_vm(self, vm_cid: str) -> None:
        from pyVim.task import WaitForTask
        from pyVmomi import vim

        vm = self.vm(vm_cid)
        if str(vm.runtime.powerState) == "poweredOn":
            WaitForTask(vm.PowerOffVM_Task())
        persistent = self.persistent_disks(vm)
        if persistent:
            self._detach(vm, persistent, None)
        cdrom = next((d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualCdrom)), None)
        iso = getattr(cdrom.backing, "fileName", None) if cdrom is not None else None
        if iso:
            folder = iso.rsplit("/", 1)[0]
            for name in ("env.json", "env.iso"):
                try:
                    WaitForTask(self.content.fileManager.DeleteDatastoreFile_Task(
                        name=f"{folder}/{name}", datacenter=self.datacenter))
                except vim.fault.FileNotFound:  # the official CPI logs "Cannot delete file" and goes on
                    self.not_found.append(f"{folder}/{name}")
        WaitForTask(vm.Destroy_Task())


def _without_datastore(path: str) -> str:
    return path.split("] ", 1)[-1].removesuffix(".vmdk").strip()
