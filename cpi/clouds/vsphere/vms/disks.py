"""Persistent disks: independent vmdk files in `disk_path` on a datastore, attached to a
VM as independent-persistent disks on its SCSI controller.

A disk's cid is its file's name (`disk-<uuid>`, or the disk_type's `name`), followed, when
the disk_type named its datastores, by `.` and the base64 of `{"target_datastore_pattern":
...}`: the official CPI's DirectorDiskCID, so the disks it made are found here and these
there. A disk is found by asking each datastore of the datacenter for the file's UUID (one
request each, no task), those matching `persistent_datastore_pattern` first.

attach_disk moves a disk the VM's host cannot reach (or that is not where its pattern wants
it) to a datastore that host reaches and that has room for it, checked first; the move is a
copy and then the deletion of the source, so a failure (or a kill) part way leaves the
source whole and at worst a partial copy, which the next attach replaces. The hint is the
SCSI unit number, or `{"id": uuid}` when the VM has `disk.enableUUID`, as the agent expects.

snapshot_disk and delete_snapshot, which the official CPI leaves out, copy the vmdk into
`disk_path/snapshots`; vSphere cannot copy a disk a running VM holds, and says so
(NotImplemented, which the director skips). Disk metadata is kept nowhere, as by the official
CPI: a vmdk has no place for it, and a file beside it would outlive the official CPI's
delete_disk.

attach_disk and detach_disk keep the official CPI's record of the disk in the VM's vApp
properties (records.py), so that after a switch either CPI detaches what the other attached.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpi.cids import DiskCid, SnapshotCid, VmCid
from cpi.errors import CloudError, DiskNotAttached, DiskNotFound, NotSupported
from cpi.errors import NotImplemented as CpiNotImplemented
from cpi.validation import parse

from .. import errors
from ..names import SNAPSHOTS
from ..patterns import compile_pattern
from ..placement.datastores import Datastore, describe, pick
from ..placement.place import Place
from ..props import DiskCloudProperties
from ..vcenter import tasks
from . import devices, records

if TYPE_CHECKING:
    from cpi.models import CallContext

    from ..vcenter.session import Session
    from .existing import ExistingVms

log = logging.getLogger("cpi.clouds.vsphere")

@dataclass(frozen=True)
class ParsedDiskCid:
    """A director's disk cid (cpi.cids.DiskCid) read apart: the file's name, and the
    datastore pattern the official CPI encodes after a dot."""

    #: the file's name: the disk's cid as the vCenter and the VMs' records know it
    value: DiskCid
    target_pattern: str | None

    @classmethod
    def parse(cls, raw: str) -> ParsedDiskCid:
        value, _, encoded = raw.partition(".")
        pattern = None
        if encoded:
            try:
                pattern = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))).get(
                    "target_datastore_pattern")
            except (binascii.Error, ValueError, AttributeError):
                log.warning("disk cid %s: its suffix is not the official CPI's metadata; ignored", raw)
        return cls(DiskCid(value), pattern if isinstance(pattern, str) else None)

    @staticmethod
    def encode(value: str, pattern: str) -> str:
        return f"{value}." + base64.urlsafe_b64encode(json.dumps({"target_datastore_pattern": pattern})
                                                      .encode()).decode()


@dataclass(frozen=True)
class Found:
    """Where a disk's file is."""

    datastore: Datastore
    path: str  # `[ds] BOSH_Disks/disk-x.vmdk`


class Disks:
    def __init__(self, session: Session, place: Place, vms: ExistingVms, context: CallContext) -> None:
        self.session = session
        self.context = context
        self.place = place
        self.properties = place.properties
        self.vms = vms
        self.disk_path = place.config.disk_path.strip("/")
        self.director_uuid = place.director_uuid

    # ------------------------------------------------------------ finding

    def _path(self, datastore: str, value: str, sub: str = "") -> str:
        return f"[{datastore}] {self.disk_path}/{sub + '/' if sub else ''}{value}.vmdk"

    def find(self, raw: DiskCid | SnapshotCid, sub: str = "") -> Found | None:
        """The disk `raw` names, on whichever datastore of the datacenter holds it."""
        cid = ParsedDiskCid.parse(raw)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", cid.value):
            return None  # not a name this CPI (or the official one) gives a disk
        everything = self.place.datacenter_datastores()
        pattern = cid.target_pattern or self.place.config.persistent_datastore_pattern
        preferred = self.place.matching(everything, pattern)
        order = preferred + [d for d in everything if d not in preferred]
        for datastore in order:
            path = self._path(datastore.name, cid.value, sub)
            if self._exists(path):
                return Found(datastore, path)
        return None

    def _exists(self, path: str) -> bool:
        from pyVmomi import vim

        try:
            self.session.content.virtualDiskManager.QueryVirtualDiskUuid(name=path, datacenter=self.place.datacenter)
            return True
        except (vim.fault.FileNotFound, vim.fault.CannotAccessFile, vim.fault.InvalidDatastore):
            return False

    def require(self, raw: DiskCid) -> Found:
        found = self.find(raw)
        if found is None:
            raise DiskNotFound(f"disk '{raw}' not found in {self.disk_path} on any datastore of datacenter "
                               f"'{self.place.config.name}'")
        return found

    def exists(self, raw: DiskCid) -> bool:
        return self.find(raw) is not None

    def size_mib(self, found: Found) -> int:
        """The disk's capacity, as the datastore browser's disk query reports it (one task);
        a datastore that reports none (a simulator's) is asked for the files' sizes instead,
        the largest being the extent's."""
        from pyVmomi import vim

        browser = vim.host.DatastoreBrowser
        folder, _, name = found.path.rpartition("/")
        names = [name, name.replace(".vmdk", "-flat.vmdk")]
        for query in ([browser.VmDiskQuery(details=browser.VmDiskQuery.Details(capacityKb=True))], None):
            spec = browser.SearchSpec(matchPattern=names, details=browser.FileInfo.Details(fileSize=True), query=query)
            result = tasks.wait(self.session, found.datastore.ref.browser.SearchDatastore_Task(
                datastorePath=folder, searchSpec=spec), f"size of {found.path}")
            files = result.file if result is not None else []
            capacity = max((getattr(f, "capacityKb", None) or 0 for f in files), default=0) * 1024
            if query is None:
                capacity = max((f.fileSize or 0 for f in files), default=0)
            if capacity:
                return capacity >> 20
        return 0

    # ------------------------------------------------------------ create_disk, delete_disk

    def create(self, size_mib: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        from pyVmomi import vim

        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties", strict=self.context.strict)
        pattern, what = self.place.storage(props.datastores, persistent=True)
        if vm_cid:
            vm = self.vms.require(vm_cid)
            reachable = self.place.datastores(list(vm.runtime.host.datastore))
        else:
            reachable = self.place.datacenter_datastores()
        candidates = self.place.matching(reachable, pattern)
        datastore = pick(candidates, size_mib)
        if datastore is None:
            raise CloudError(f"create_disk: no datastore {'the VM reaches ' if vm_cid else ''}matching {what} has "
                             f"{size_mib} MiB and the headroom free: {describe(candidates)}")
        value = props.name or f"disk-{uuid.uuid4()}"
        path = self._path(datastore.name, value)
        self._make_directory(f"[{datastore.name}] {self.disk_path}")
        disk_type = props.type or self.properties.default_disk_type
        spec = vim.VirtualDiskManager.FileBackedVirtualDiskSpec(diskType=disk_type, adapterType="lsiLogic",
                                                                capacityKb=size_mib * 1024)
        manager = self.session.content.virtualDiskManager
        tasks.run(self.session, lambda: manager.CreateVirtualDisk_Task(name=path, datacenter=self.place.datacenter,
                                                                       spec=spec),
                  f"creating {path}", done=lambda: True if self._exists(path) else None)
        log.info("create_disk: %s (%d MiB, %s) on datastore %s", value, size_mib, disk_type, datastore.name)
        # the official CPI's rule: a disk_type that names its datastores puts their pattern in the cid
        return DiskCid(ParsedDiskCid.encode(value, pattern) if props.datastores else value)

    def _make_directory(self, path: str) -> None:
        from pyVmomi import vim

        try:
            self.session.content.fileManager.MakeDirectory(name=path, datacenter=self.place.datacenter,
                                                           createParentDirectories=True)
        except vim.fault.FileAlreadyExists:
            pass  # made before, by this process or another

    def _delete_vmdk(self, path: str) -> None:
        from pyVmomi import vim

        try:
            tasks.wait(self.session, self.session.content.virtualDiskManager.DeleteVirtualDisk_Task(
                name=path, datacenter=self.place.datacenter), f"deleting {path}")
        except vim.fault.FileNotFound:
            log.info("%s was gone already", path)

    def delete(self, raw: DiskCid) -> None:
        found = self.find(raw)
        if found is None:
            log.info("delete_disk: %s is not there (deleted before?)", raw)
            return
        self._delete_vmdk(found.path)
        # the metadata file earlier builds kept beside a disk, which nothing else would delete
        self.place.delete_file(found.path[: -len(".vmdk")] + ".json")

    # ------------------------------------------------------------ attach, detach

    def attach(self, vm_cid: VmCid, raw: DiskCid) -> Any:
        from pyVmomi import vim

        vm = self.vms.require(vm_cid)
        found = self.require(raw)
        cid = ParsedDiskCid.parse(raw)
        with self.vms.lock(vm_cid):
            present = list(vm.config.hardware.device)
            attached = self.vms.persistent(vm)[0].get(cid.value)
            if attached is None:
                found = self._reachable(vm, vm_cid, found, cid)
                controller = devices.scsi_controller(present)
                if controller is None:
                    raise CloudError(f"attach_disk: VM '{vm_cid}' has no SCSI controller")
                unit = devices.free_unit(present, controller)
                disk = devices.existing_disk(controller, unit, found.path)
                spec = vim.vm.ConfigSpec(deviceChange=[devices.add(disk)])
                tasks.run(self.session, lambda: vm.ReconfigVM_Task(spec=spec), f"attaching {cid.value} to {vm_cid}",
                          done=lambda: devices.persistent(list(vm.config.hardware.device), self.disk_path)
                          .get(cid.value))
                log.info("attach_disk: %s is unit %d of %s's SCSI controller", cid.value, unit, vm_cid)
                present = list(vm.config.hardware.device)
                attached = devices.persistent(present, self.disk_path)[cid.value]
            else:
                log.info("attach_disk: %s is attached to %s already", cid.value, vm_cid)
            self._record(vm, vm_cid, attached, cid.value)
            return self._hint(vm, attached)

    def _record(self, vm: Any, vm_cid: VmCid, disk: Any, value: DiskCid) -> None:
        """Record the attached disk in the VM's vApp properties as the official CPI does
        (records.py), unless it is recorded already: a second request, as there, since the
        device's key is vSphere's to give. A record of that key naming another disk (a key
        given again) is replaced."""
        from pyVmomi import vim

        existing = records.of(vm).get(disk.key)
        if existing is not None and existing.label == value:
            return
        spec = vim.vm.ConfigSpec(vAppConfig=records.record(disk.key, value, devices.file_of(disk),
                                                           replacing=existing is not None))
        tasks.run(self.session, lambda: vm.ReconfigVM_Task(spec=spec), f"recording {value} in {vm_cid}'s vApp "
                  "properties", done=lambda: True if getattr(records.of(vm).get(disk.key), "label", None) == value
                  else None)

    def _hint(self, vm: Any, disk: Any) -> Any:
        if devices.uuid_enabled({o.key: o.value for o in vm.config.extraConfig or []}) and disk.backing.uuid:
            return {"id": disk.backing.uuid.lower()}
        return str(disk.unitNumber)

    def _reachable(self, vm: Any, vm_cid: VmCid, found: Found, cid: ParsedDiskCid) -> Found:
        """`found`, or where it was moved to: a datastore the VM's host reaches that matches
        the disk's pattern, with room for it."""
        reachable = self.place.datastores(list(vm.runtime.host.datastore))
        pattern = cid.target_pattern or self.place.storage(None, persistent=True)[0]
        wanted = self.place.matching(reachable, pattern)
        if any(d.name == found.datastore.name for d in wanted):
            return found
        size = self.size_mib(found)
        target = pick(wanted, size)
        if target is None:
            raise CloudError(f"attach_disk: {cid.value} is on datastore {found.datastore.name}, which VM '{vm_cid}' "
                             f"cannot use, and no datastore it reaches matching the disk's pattern has {size} MiB and "
                             f"the headroom free: {describe(wanted)}; the disk stays where it is")
        destination = self._path(target.name, cid.value)
        log.warning("attach_disk: moving %s (%d MiB) from datastore %s to %s, which VM %s reaches", cid.value, size,
                    found.datastore.name, target.name, vm_cid)
        self._make_directory(f"[{target.name}] {self.disk_path}")
        self._copy(found.path, destination, f"moving {cid.value} to {target.name}")
        self._delete_vmdk(found.path)
        return Found(target, destination)

    def _copy(self, source: str, destination: str, what: str) -> None:
        """Copy a vmdk; a failed copy's partial destination is deleted before the error leaves."""
        manager = self.session.content.virtualDiskManager
        dc = self.place.datacenter
        def start() -> Any:
            return manager.CopyVirtualDisk_Task(sourceName=source, sourceDatacenter=dc, destName=destination,
                                                destDatacenter=dc)

        def again() -> None:  # a copy whose answer was lost: whatever it made goes, and it starts again
            self._delete_vmdk(destination)

        try:
            tasks.run(self.session, start, what, done=again)
        except BaseException:
            try:
                self._delete_vmdk(destination)
            except Exception as exc:  # noqa: BLE001 - the copy's own failure is what the call reports
                log.warning("%s: the partial copy %s could not be deleted (%s)", what, destination,
                            errors.describe(exc))
            raise

    def detach(self, vm_cid: VmCid, raw: DiskCid) -> None:
        vm = self.vms.require(vm_cid)
        cid = ParsedDiskCid.parse(raw)
        with self.vms.lock(vm_cid):
            persistent, recorded = self.vms.persistent(vm)
            attached = persistent.get(cid.value)
            if attached is None:
                if self.find(raw) is None:
                    log.info("detach_disk: %s is not there (deleted before?)", raw)
                    return
                raise DiskNotAttached(f"disk '{raw}' is not attached to VM '{vm_cid}'", ok_to_retry=False)
            self.vms.detach(vm, vm_cid, {cid.value: attached}, recorded)

    # ------------------------------------------------------------ resize, metadata, snapshots

    def resize(self, raw: DiskCid, new_mib: int) -> None:
        found = self.require(raw)
        current = self.size_mib(found)
        if new_mib < current:
            raise NotSupported(f"disk '{raw}' is {current} MiB: vSphere cannot shrink it to {new_mib} MiB")
        if new_mib == current:
            log.info("resize_disk: %s is %d MiB already", raw, current)
            return
        manager = self.session.content.virtualDiskManager
        tasks.run(self.session, lambda: manager.ExtendVirtualDisk_Task(
            name=found.path, datacenter=self.place.datacenter, newCapacityKb=new_mib * 1024, eagerZero=False),
            f"growing {found.path} to {new_mib} MiB", done=lambda: True if self.size_mib(found) >= new_mib else None)

    def update(self, raw: DiskCid, new_mib: int, cloud_properties: dict) -> None:
        """update_disk: grown in place; a change of provisioning is not something vSphere
        does in place (NotSupported: the director then copies the data to a new disk)."""
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties", strict=self.context.strict)
        found = self.require(raw)
        if props.type and props.type != self.properties.default_disk_type:
            raise NotSupported(f"update_disk: vSphere cannot turn disk '{raw}' into a {props.type} disk in place")
        if props.datastores and not compile_pattern(self.place.storage(props.datastores, persistent=True)[0]).search(
                found.datastore.name):
            raise NotSupported(f"update_disk: disk '{raw}' is on datastore {found.datastore.name}, not one the "
                               "disk_type names")
        self.resize(raw, new_mib)

    def set_metadata(self, raw: DiskCid, values: dict[str, str]) -> None:
        """Kept nowhere, as by the official CPI (its set_disk_metadata does nothing): a vmdk
        has no place for it, and a file beside it would outlive the official CPI's
        delete_disk after a switch back."""
        self.require(raw)  # a disk that is not there is DiskNotFound, as on every cloud
        log.info("set_disk_metadata: %s: %d keys not kept (vSphere has no place for a disk's metadata)", raw,
                 len(values))

    def snapshot(self, raw: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        """`metadata` is BOSH's argument, which this cloud does not keep (a snapshot here is a
        copy of the disk's file)."""
        from pyVmomi import vim

        found = self.require(raw)
        snapshot_cid = SnapshotCid(f"snap-{uuid.uuid4()}")
        destination = self._path(found.datastore.name, snapshot_cid, SNAPSHOTS)
        self._make_directory(f"[{found.datastore.name}] {self.disk_path}/{SNAPSHOTS}")
        try:
            self._copy(found.path, destination, f"snapshot of {raw}")
        except vim.fault.FileLocked:
            raise CpiNotImplemented(f"snapshot_disk: vSphere cannot copy disk '{raw}' while a running VM holds it "
                                 "(its file is locked); independent disks are not part of VM snapshots") from None
        log.info("snapshot_disk: %s is a copy of %s", snapshot_cid, raw)
        return snapshot_cid

    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        found = self.find(snapshot_cid, SNAPSHOTS)
        if found is None:
            log.info("delete_snapshot: %s is not there (deleted before?)", snapshot_cid)
            return
        self._delete_vmdk(found.path)
