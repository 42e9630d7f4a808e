"""Persistent disks and their snapshots: create_disk, delete_disk, has_disk, resize_disk,
update_disk, attach_disk, detach_disk, set_disk_metadata, snapshot_disk, delete_snapshot.

A disk is a directory holding `disk.img` (sparse, or with its blocks reserved for
`type: preallocated`) and `store/`, the files a VM keeps on it (mounts.py); a snapshot is a
sparse copy of both. A disk is attached to at most one living VM: the disk record names
the VM and the VM record lists the disk with its device hint (`/dev/sdc` onwards), and the
two are written in an order that lets a retry after a crash finish the job.
"""

from __future__ import annotations

import string
from typing import Any

from cpi.cids import DiskCid, SnapshotCid, VmCid
from cpi.clouds.base import DiskHint
from cpi.errors import CloudError, DiskNotAttached, DiskNotFound, NotSupported
from cpi.validation import parse

from . import cleanup, fileops, mounts
from .props import DiskCloudProperties
from .session import Session, then_collect_stale_locks
from .store import DiskRecord, SnapshotRecord, VMRecord
from .vms import Vms, merge_metadata

#: Persistent disks get /dev/sdc onwards (sda: system, sdb: ephemeral), as on OpenStack.
DEVICE_LETTERS = string.ascii_lowercase[2:]


class Disks:
    def __init__(self, session: Session, vms: Vms):
        self.session = session
        self.store = session.store
        self.log = session.log
        self.vms = vms

    # ------------------------------------------------------------ lookups

    def exists(self, disk_cid: DiskCid) -> bool:
        return self.store.load(DiskRecord, disk_cid) is not None

    def require(self, disk_cid: DiskCid) -> DiskRecord:
        record = self.store.load(DiskRecord, disk_cid)
        if record is None:
            raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)
        return record

    # ------------------------------------------------------------ create, delete, sizes

    def create(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> str:
        session = self.session
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties",
                      strict=session.context.strict)
        if vm_cid is not None:
            self.vms.require(vm_cid)  # locality: the VM must exist, as on a real IaaS
        disk_cid = DiskCid(self.store.new_cid(DiskRecord))
        with cleanup.creating(session, disk_cid):
            directory = self.store.make_dir(DiskRecord, disk_cid)
            if session.effect(f"allocate a {size} MiB disk file"):
                fileops.allocate(fileops.create(directory / "disk.img"), size * fileops.MIB,
                                 preallocate=props.type == "preallocated")
                mounts.make_disk_store(directory)
            self.store.save(DiskRecord(disk_cid=disk_cid, size=size, cloud_properties=cloud_properties,
                                       director_uuid=session.context.director_uuid))
        session.audit("create", "disk", disk_cid, new={"size": size, "type": props.type, "vm_cid": vm_cid})
        return disk_cid

    @then_collect_stale_locks
    def delete(self, disk_cid: DiskCid) -> None:
        with self.session.lock(disk_cid):
            record = self.store.load(DiskRecord, disk_cid)
            if record and record.vm_cid and self.store.load(VMRecord, record.vm_cid) is not None:
                raise CloudError(f"disk '{disk_cid}' is attached to VM {record.vm_cid}; detach it first")
            if not cleanup.purge(self.session, disk_cid, DiskRecord):
                self.log.info("disk %s not found: nothing to delete", disk_cid)

    def resize(self, disk_cid: DiskCid, new_size: int) -> None:
        with self.session.lock(disk_cid):
            record = self.require(disk_cid)
            self._resize(record, new_size, _preallocated(record.cloud_properties))

    def update(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> str | None:
        """In place: grow the file, reserve its blocks when the new type is preallocated,
        and record the new properties (no copy: a reader sees the same bytes)."""
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties",
                      strict=self.session.context.strict)
        with self.session.lock(disk_cid):
            record = self.require(disk_cid)
            self._resize(record, new_size, props.type == "preallocated")
            if record.cloud_properties != cloud_properties:
                self.session.audit("update", "disk", disk_cid, old={"cloud_properties": record.cloud_properties},
                                   new={"cloud_properties": cloud_properties})
            record.cloud_properties = cloud_properties
            self.store.save(record)
        return None

    def _resize(self, record: DiskRecord, new_size: int, preallocate: bool) -> None:
        if new_size < record.size:
            raise NotSupported(f"disk '{record.disk_cid}' cannot shrink from {record.size} MiB to {new_size} MiB")
        if new_size == record.size and not preallocate:
            self.log.info("disk %s is already %d MiB", record.disk_cid, new_size)
            return
        if self.session.effect(f"grow the disk file of {record.disk_cid} to {new_size} MiB"):
            fileops.allocate(self.store.dir(DiskRecord, record.disk_cid) / "disk.img", new_size * fileops.MIB,
                             preallocate)
        if new_size != record.size:
            self.log.info("grew disk %s from %d to %d MiB", record.disk_cid, record.size, new_size)
            self.session.audit("resize", "disk", record.disk_cid, old={"size": record.size}, new={"size": new_size})
        record.size = new_size
        self.store.save(record)

    # ------------------------------------------------------------ attachments

    def attach(self, vm_cid: VmCid, disk_cid: DiskCid) -> DiskHint:
        with self.session.lock(vm_cid, disk_cid):
            vm = self.vms.require(vm_cid)
            disk = self.require(disk_cid)
            if disk.vm_cid and disk.vm_cid != vm_cid and self.store.load(VMRecord, disk.vm_cid) is not None:
                raise CloudError(f"disk '{disk_cid}' is attached to another VM ({disk.vm_cid})")
            hint = vm.disks.get(disk_cid) or {"path": f"/dev/sd{_free_letter(vm)}"}
            changed = disk.vm_cid != vm_cid or vm.disks.get(disk_cid) != hint
            old = {"vm_cid": disk.vm_cid} if disk.vm_cid and disk.vm_cid != vm_cid else None
            # disk record, then VM record, then settings: a retry after a crash finishes the job
            if disk.vm_cid != vm_cid:
                disk.vm_cid = vm_cid
                self.store.save(disk)
            if vm.disks.get(disk_cid) != hint:
                vm.disks[disk_cid] = hint
                self.store.save(vm)
            self.vms.sync_settings(vm)
            self.vms.sync_mounts(vm)
            if changed:
                self.session.audit("attach", "disk", disk_cid, old=old, new={"vm_cid": vm_cid, "device": hint})
            return hint

    def detach(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        with self.session.lock(vm_cid, disk_cid):
            vm = self.vms.require(vm_cid)
            disk = self.store.load(DiskRecord, disk_cid)
            if disk is None:
                self.log.info("disk %s not found: nothing to detach", disk_cid)
            elif disk.vm_cid != vm_cid and disk_cid not in vm.disks:
                raise DiskNotAttached(f"disk '{disk_cid}' is not attached to VM '{vm_cid}'")
            # VM record and settings first, disk record last (the reverse of attach_disk)
            attached = disk is not None and disk.vm_cid == vm_cid
            hint = vm.disks.pop(disk_cid, None)
            if hint is not None:
                self.store.save(vm)
            self.vms.sync_settings(vm)
            self.vms.sync_mounts(vm)
            if disk is not None and disk.vm_cid == vm_cid:
                disk.vm_cid = None
                self.store.save(disk)
            if attached or hint is not None:
                self.session.audit("detach", "disk", disk_cid, old={"vm_cid": vm_cid, "device": hint})

    def set_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        with self.session.lock(disk_cid):
            merge_metadata(self.session, "disk", disk_cid, self.require(disk_cid), metadata)

    # ------------------------------------------------------------ snapshots

    def snapshot(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> str:
        session = self.session
        snapshot_cid = SnapshotCid(self.store.new_cid(SnapshotRecord))
        with cleanup.creating(session, snapshot_cid, disk_cid):
            disk = self.require(disk_cid)
            directory = self.store.make_dir(SnapshotRecord, snapshot_cid)
            if session.effect(f"copy the data of disk {disk_cid}"):
                fileops.sparse_copy(self.store.dir(DiskRecord, disk_cid) / "disk.img", directory / "disk.img")
                mounts.copy_disk_store(self.store.dir(DiskRecord, disk_cid), directory)
            self.store.save(SnapshotRecord(snapshot_cid=snapshot_cid, disk_cid=disk_cid, size=disk.size,
                                           metadata=metadata, director_uuid=session.context.director_uuid))
        session.audit("create", "snapshot", snapshot_cid, new={"disk_cid": disk_cid})
        return snapshot_cid

    @then_collect_stale_locks
    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        cleanup.delete_alone(self.session, snapshot_cid, SnapshotRecord, "snapshot")


def _free_letter(vm: VMRecord) -> str:
    used = {hint["path"][-1] for hint in vm.disks.values() if isinstance(hint, dict) and "path" in hint}
    for letter in DEVICE_LETTERS:
        if letter not in used:
            return letter
    raise CloudError(f"VM '{vm.vm_cid}' has no free device letter for another disk")


def _preallocated(cloud_properties: Any) -> bool:
    return isinstance(cloud_properties, dict) and cloud_properties.get("type") == "preallocated"
