"""The VMs as they are found: one by its cid, the lock its devices change under, its
persistent disks and their detachment. What both create_vm's neighbours (vms.py) and the
disk calls (disks.py) ask of a VM, so that neither imports the other."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from cpi import locks
from cpi.errors import VMNotFound

from ..vcenter import tasks
from . import devices, records

if TYPE_CHECKING:
    from cpi.cids import DiskCid, VmCid

    from ..placement.place import Place
    from ..vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")


class ExistingVms:
    def __init__(self, session: Session, place: Place) -> None:
        self.session = session
        self.place = place
        self.properties = place.properties

    def require(self, vm_cid: VmCid) -> Any:
        vm = self.place.find_vm(vm_cid)
        if vm is None:
            raise VMNotFound(f"VM '{vm_cid}' not found in the VM folder of datacenter '{self.place.config.name}'")
        return vm

    def exists(self, vm_cid: VmCid) -> bool:
        return self.place.find_vm(vm_cid) is not None

    def lock(self, vm_cid: VmCid) -> AbstractContextManager[None]:
        """The lock every change of a VM's devices is made under (attach, detach, delete)."""
        return locks.locked(self.properties.lock_directory(), f"vsphere-vm {vm_cid}",
                            timeout=self.properties.task_timeout)

    def persistent(self, vm: Any) -> tuple[dict[DiskCid, Any], dict[int, Any]]:
        """The VM's persistent disks by cid, as the official CPI tells them (in disk_path, or
        named by the VM's records: devices.persistent), and those records (records.of)."""
        recorded = records.of(vm)
        found = devices.persistent(list(vm.config.hardware.device), self.place.config.disk_path,
                                   records.labels(recorded))
        return found, recorded

    def detach(self, vm: Any, vm_cid: VmCid, disks: dict[DiskCid, Any], recorded: dict[int, Any]) -> None:
        """Detach `disks` (cid → device) in one reconfiguration that also removes their
        records (records.py), so that no record outlives its disk's attachment to name a
        device key vSphere gives again; then a disk vSphere has moved since it was recorded
        goes back to the recorded path, as the official CPI moves it back."""
        from pyVmomi import vim

        back = {cid: records.moved_from(disk, recorded) for cid, disk in disks.items()}
        keys = {disk.key for disk in disks.values()}
        spec = vim.vm.ConfigSpec(deviceChange=[devices.remove(disk) for disk in disks.values()],
                                 vAppConfig=records.forget(sorted(keys & set(recorded))))
        tasks.run(self.session, lambda: vm.ReconfigVM_Task(spec=spec), f"detaching {', '.join(sorted(disks))} from "
                  f"{vm_cid}", done=lambda: None if keys & {d.key for d in devices.disks(
                      list(vm.config.hardware.device))} else True)
        for cid, destination in back.items():
            if destination is not None:
                self._move_back(cid, devices.file_of(disks[cid]), destination)

    def _move_back(self, cid: DiskCid, source: str, destination: str) -> None:
        from pyVmomi import vim

        manager = self.session.content.virtualDiskManager
        datacenter = self.place.datacenter

        def there() -> bool | None:
            try:
                manager.QueryVirtualDiskUuid(name=destination, datacenter=datacenter)
                return True
            except vim.fault.FileNotFound:
                return None

        if there():
            log.warning("detach: %s is at %s, not at %s where it was recorded, which holds a disk: left where it is",
                        cid, source, destination)
            return
        log.warning("detach: %s is at %s since it was recorded (a storage move): moving it back to %s", cid, source,
                    destination)
        tasks.run(self.session, lambda: manager.MoveVirtualDisk_Task(
            sourceName=source, sourceDatacenter=datacenter, destName=destination, destDatacenter=datacenter,
            force=False), f"moving {cid} back to {destination}", done=there)
