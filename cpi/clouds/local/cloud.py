"""The embedded local cloud: real files for disks and stemcells, real processes for VMs.

Modelled on the director's dummy CPI and the Warden CPI. Every change to a VM or disk
happens under that resource's file lock (attach/detach take both, in sorted order), and
every record is replaced atomically, so any number of CPI processes can work at once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import string
from pathlib import Path
from typing import Any

from cpi import agent_env
from cpi.clouds.base import Cloud, DiskHint
from cpi.errors import CloudError, DiskNotAttached, DiskNotFound, NotSupported, VMCreationFailed, VMNotFound
from cpi.files import atomic_write_json
from cpi.locks import locked
from cpi.models import Network, VMResources
from cpi.validation import parse

from . import faults, process
from .props import DiskCloudProperties, LocalProperties, VMCloudProperties
from .store import DiskRecord, SnapshotRecord, StemcellRecord, Store, VMRecord

MIB = 1024 * 1024
SETTINGS_FILE = "cpi-agent-env.json"
#: Persistent disks get /dev/sdc onwards (sda: system, sdb: ephemeral), as on OpenStack.
DEVICE_LETTERS = string.ascii_lowercase[2:]


class LocalCloud(Cloud):
    name = "local"
    stemcell_formats = ["dummy", "local-raw", "local-light"]
    Properties = LocalProperties
    cloud_property_models = {"vm_type": VMCloudProperties, "disk_type": DiskCloudProperties}

    properties: LocalProperties

    def __init__(self, properties, agent, context):
        super().__init__(properties, agent, context)
        self.store = Store(properties.state_dir)

    def _lock(self, *names: str):
        return locked(self.store.lock_dir, *names, timeout=self.properties.lock_timeout)

    def before_call(self, method: str) -> None:
        if self.properties.faults:
            faults.apply(self.properties.faults, method, self.store.root, self.store.lock_dir)

    # ------------------------------------------------------------ stemcells

    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> str:
        stemcell_cid = self.store.new_cid(StemcellRecord)
        directory = self.store.dir(StemcellRecord, stemcell_cid)
        directory.mkdir(parents=True)
        record = StemcellRecord(stemcell_cid=stemcell_cid, cloud_properties=cloud_properties, tags=tags)
        if image_path:
            source = Path(image_path)
            if not source.is_file():
                shutil.rmtree(directory)
                raise CloudError(f"stemcell image '{image_path}' does not exist or is not a file")
            record.image = "image"
            record.sha1, record.size = _copy_with_sha1(source, directory / "image")
            self.log.info("copied stemcell image %s (%d bytes, sha1 %s)", image_path, record.size, record.sha1)
        else:
            self.log.info("light stemcell: no image to copy")
        self.store.save(record)
        return stemcell_cid

    def delete_stemcell(self, stemcell_cid: str) -> None:
        with self._lock(stemcell_cid):
            if not self.store.remove(StemcellRecord, stemcell_cid):
                self.log.info("stemcell %s not found: nothing to delete", stemcell_cid)

    # ------------------------------------------------------------ VMs

    def create_vm(self, agent_id, stemcell_cid, cloud_properties, networks, disk_cids, env):
        props = parse(VMCloudProperties, cloud_properties, "vm_type cloud_properties")
        if self.store.load(StemcellRecord, stemcell_cid) is None:
            raise VMCreationFailed(f"stemcell '{stemcell_cid}' not found", ok_to_retry=False)
        vm_cid = self.store.new_cid(VMRecord)
        base = self.store.dir(VMRecord, vm_cid)
        base.mkdir(parents=True)
        record = VMRecord(
            vm_cid=vm_cid,
            agent_id=agent_id,
            stemcell_cid=stemcell_cid,
            cloud_properties=cloud_properties,
            networks={name: net.wire() for name, net in networks.items()},
        )
        with self._lock(vm_cid):
            self.store.save(record)  # from here on, delete_vm can clean up whatever follows
            try:
                record.ips = self._reserve_ips(vm_cid, networks)
                self.store.save(record)
                ephemeral = None
                if props.ephemeral_disk and props.ephemeral_disk.size > 0:
                    os.truncate(_create(base / "ephemeral.img"), props.ephemeral_disk.size * MIB)
                    ephemeral = "/dev/sdb"
                settings = agent_env.settings(
                    agent_id=agent_id,
                    vm_name=vm_cid,
                    agent=self.agent,
                    networks=networks,
                    env=env,
                    ephemeral_disk=ephemeral,
                )
                self._write_agent_files(base, settings)
                if disk_cids:
                    self.log.info("disk locality hint %s: all local disks are reachable", disk_cids)
                self._boot(record, base)
            except BaseException:
                self.log.info("create_vm of %s failed; removing what it made", vm_cid)
                self._destroy(record)
                raise
        return vm_cid, record.networks

    def _reserve_ips(self, vm_cid: str, networks: dict[str, Network]) -> list[str]:
        wanted = [(name, net.ip) for name, net in networks.items() if net.type == "manual" and net.ip]
        taken: list[str] = []
        if not wanted:
            return taken
        with self._lock("ips"):
            for name, ip in wanted:
                owner = self.store.ip_owner(ip)
                if owner and self.store.load(VMRecord, owner) is None:
                    self.log.info("IP %s was held by %s, which no longer exists: releasing it", ip, owner)
                    self.store.release_ip(ip, owner)
                    owner = None
                if owner:
                    for done in taken:
                        self.store.release_ip(done, vm_cid)
                    raise VMCreationFailed(
                        f"IP {ip} of network '{name}' is already in use by VM {owner}", ok_to_retry=False
                    )
                self.store.reserve_ip(ip, vm_cid)
                taken.append(ip)
        return taken

    def _write_agent_files(self, base: Path, settings: dict[str, Any]) -> None:
        atomic_write_json(base / SETTINGS_FILE, settings)
        atomic_write_json(
            base / "agent.json",
            {"Infrastructure": {"Settings": {"Sources": [{"Type": "File", "SettingsPath": str(base / SETTINGS_FILE)}]}}},
        )

    def _boot(self, record: VMRecord, base: Path) -> None:
        record.pid, record.pid_start = process.spawn(
            process.agent_command(self.properties.agent_command),
            base,
            process.mbus_endpoint(self.agent.mbus),
            self.properties.agent_boot_timeout,
        )
        record.state = "running"
        record.boots += 1
        self.store.save(record)
        self.log.info("VM %s running as pid %d", record.vm_cid, record.pid)

    def _destroy(self, record: VMRecord) -> None:
        """Stop the process, release disks and IPs, remove the VM: each step safe to repeat."""
        record.state = "deleting"
        if self.store.load(VMRecord, record.vm_cid) is not None:
            self.store.save(record)
        process.stop(record.pid, record.pid_start)
        for disk_cid in list(record.disks):
            with self._lock(disk_cid):
                disk = self.store.load(DiskRecord, disk_cid)
                if disk and disk.vm_cid == record.vm_cid:
                    disk.vm_cid = None
                    self.store.save(disk)
                    self.log.info("released disk %s", disk_cid)
        for ip in record.ips:
            self.store.release_ip(ip, record.vm_cid)
        self.store.remove(VMRecord, record.vm_cid)

    def delete_vm(self, vm_cid: str) -> None:
        with self._lock(vm_cid):
            record = self.store.load(VMRecord, vm_cid)
            if record is None:
                self.log.info("VM %s not found: nothing to delete", vm_cid)
                return
            self._destroy(record)

    def has_vm(self, vm_cid: str) -> bool:
        return self.store.load(VMRecord, vm_cid) is not None

    def _vm(self, vm_cid: str) -> VMRecord:
        record = self.store.load(VMRecord, vm_cid)
        if record is None:
            raise VMNotFound(f"VM '{vm_cid}' not found")
        return record

    def reboot_vm(self, vm_cid: str) -> None:
        with self._lock(vm_cid):
            record = self._vm(vm_cid)
            process.stop(record.pid, record.pid_start)
            self._boot(record, self.store.dir(VMRecord, vm_cid))

    def set_vm_metadata(self, vm_cid: str, metadata: dict[str, str]) -> None:
        with self._lock(vm_cid):
            record = self._vm(vm_cid)
            record.metadata.update(metadata)
            self.store.save(record)

    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        return {"cpu": resources.cpu, "ram": resources.ram, "ephemeral_disk": {"size": resources.ephemeral_disk_size}}

    def current_vm_id(self) -> str:
        if not self.properties.current_vm_cid:
            raise CloudError("current_vm_id: this CPI is not running on a local-cloud VM (set local.current_vm_cid)")
        return self.properties.current_vm_cid

    # ------------------------------------------------------------ disks

    def create_disk(self, size: int, cloud_properties: dict, vm_cid: str | None) -> str:
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties")
        if vm_cid is not None:
            self._vm(vm_cid)  # locality: the VM must exist, as on a real IaaS
        disk_cid = self.store.new_cid(DiskRecord)
        directory = self.store.dir(DiskRecord, disk_cid)
        directory.mkdir(parents=True)
        image = _create(directory / "disk.img")
        if props.type == "preallocated":
            _preallocate(image, size * MIB)
        else:
            os.truncate(image, size * MIB)
        self.store.save(DiskRecord(disk_cid=disk_cid, size=size, cloud_properties=cloud_properties))
        return disk_cid

    def _disk(self, disk_cid: str) -> DiskRecord:
        record = self.store.load(DiskRecord, disk_cid)
        if record is None:
            raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)
        return record

    def delete_disk(self, disk_cid: str) -> None:
        with self._lock(disk_cid):
            record = self.store.load(DiskRecord, disk_cid)
            if record is None:
                self.log.info("disk %s not found: nothing to delete", disk_cid)
                return
            if record.vm_cid and self.store.load(VMRecord, record.vm_cid) is not None:
                raise CloudError(f"disk '{disk_cid}' is attached to VM {record.vm_cid}; detach it first")
            self.store.remove(DiskRecord, disk_cid)

    def has_disk(self, disk_cid: str) -> bool:
        return self.store.load(DiskRecord, disk_cid) is not None

    def resize_disk(self, disk_cid: str, new_size: int) -> None:
        with self._lock(disk_cid):
            self._resize(self._disk(disk_cid), new_size)

    def _resize(self, record: DiskRecord, new_size: int) -> None:
        if new_size == record.size:
            self.log.info("disk %s is already %d MiB", record.disk_cid, new_size)
            return
        if new_size < record.size:
            raise NotSupported(f"disk '{record.disk_cid}' cannot shrink from {record.size} MiB to {new_size} MiB")
        os.truncate(self.store.dir(DiskRecord, record.disk_cid) / "disk.img", new_size * MIB)
        self.log.info("grew disk %s from %d to %d MiB", record.disk_cid, record.size, new_size)
        record.size = new_size
        self.store.save(record)

    def update_disk(self, disk_cid: str, new_size: int, cloud_properties: dict) -> str | None:
        """In place: grow the file and record the new properties (sparse ↔ preallocated
        changes nothing a reader can see, so no copy is needed)."""
        parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties")
        with self._lock(disk_cid):
            record = self._disk(disk_cid)
            self._resize(record, new_size)
            record.cloud_properties = cloud_properties
            self.store.save(record)
        return None

    def attach_disk(self, vm_cid: str, disk_cid: str) -> DiskHint:
        with self._lock(vm_cid, disk_cid):
            vm = self._vm(vm_cid)
            disk = self._disk(disk_cid)
            if disk.vm_cid and disk.vm_cid != vm_cid and self.store.load(VMRecord, disk.vm_cid) is not None:
                raise CloudError(f"disk '{disk_cid}' is attached to another VM ({disk.vm_cid})")
            hint = vm.disks.get(disk_cid) or {"path": f"/dev/sd{self._free_letter(vm)}"}
            # disk record, then VM record, then settings: a retry after a crash finishes the job
            if disk.vm_cid != vm_cid:
                disk.vm_cid = vm_cid
                self.store.save(disk)
            if vm.disks.get(disk_cid) != hint:
                vm.disks[disk_cid] = hint
                self.store.save(vm)
            self._sync_settings(vm)
            return hint

    def _free_letter(self, vm: VMRecord) -> str:
        used = {hint["path"][-1] for hint in vm.disks.values() if isinstance(hint, dict) and "path" in hint}
        for letter in DEVICE_LETTERS:
            if letter not in used:
                return letter
        raise CloudError(f"VM '{vm.vm_cid}' has no free device letter for another disk")

    def _sync_settings(self, vm: VMRecord) -> None:
        """Record the attachments in the settings for the next boot (a running agent never
        re-reads them; the director tells it through add_persistent_disk)."""
        path = self.store.dir(VMRecord, vm.vm_cid) / SETTINGS_FILE
        settings = _read(path)
        if settings is not None and settings["disks"].get("persistent") != vm.disks:
            settings["disks"]["persistent"] = dict(vm.disks)
            atomic_write_json(path, settings)

    def detach_disk(self, vm_cid: str, disk_cid: str) -> None:
        with self._lock(vm_cid, disk_cid):
            vm = self._vm(vm_cid)
            disk = self.store.load(DiskRecord, disk_cid)
            if disk is None:
                self.log.info("disk %s not found: nothing to detach", disk_cid)
            elif disk.vm_cid != vm_cid and disk_cid not in vm.disks:
                raise DiskNotAttached(f"disk '{disk_cid}' is not attached to VM '{vm_cid}'")
            # VM record and settings first, disk record last (the reverse of attach_disk)
            if vm.disks.pop(disk_cid, None) is not None:
                self.store.save(vm)
            self._sync_settings(vm)
            if disk is not None and disk.vm_cid == vm_cid:
                disk.vm_cid = None
                self.store.save(disk)

    def get_disks(self, vm_cid: str) -> list[str]:
        return list(self._vm(vm_cid).disks)

    def set_disk_metadata(self, disk_cid: str, metadata: dict[str, str]) -> None:
        with self._lock(disk_cid):
            record = self._disk(disk_cid)
            record.metadata.update(metadata)
            self.store.save(record)

    # ------------------------------------------------------------ snapshots

    def snapshot_disk(self, disk_cid: str, metadata: dict[str, Any]) -> str:
        with self._lock(disk_cid):
            disk = self._disk(disk_cid)
            snapshot_cid = self.store.new_cid(SnapshotRecord)
            directory = self.store.dir(SnapshotRecord, snapshot_cid)
            directory.mkdir(parents=True)
            _sparse_copy(self.store.dir(DiskRecord, disk_cid) / "disk.img", directory / "disk.img")
            self.store.save(SnapshotRecord(snapshot_cid=snapshot_cid, disk_cid=disk_cid, size=disk.size, metadata=metadata))
            return snapshot_cid

    def delete_snapshot(self, snapshot_cid: str) -> None:
        with self._lock(snapshot_cid):
            if not self.store.remove(SnapshotRecord, snapshot_cid):
                self.log.info("snapshot %s not found: nothing to delete", snapshot_cid)


# ---------------------------------------------------------------- file helpers


def _create(path: Path) -> Path:
    with open(path, "xb"):
        pass
    return path


def _read(path: Path) -> dict | None:
    from cpi.files import read_json

    try:
        return read_json(path)
    except FileNotFoundError:
        return None


def _copy_with_sha1(source: Path, target: Path) -> tuple[str, int]:
    digest, size = hashlib.sha1(), 0
    with open(source, "rb") as src, open(target, "xb") as dst:
        while chunk := src.read(MIB):
            digest.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _preallocate(path: Path, size: int) -> None:
    with open(path, "r+b") as handle:
        try:
            os.posix_fallocate(handle.fileno(), 0, size)
        except OSError:
            os.truncate(path, size)  # the file system cannot reserve blocks: fall back to sparse


def _sparse_copy(source: Path, target: Path) -> None:
    """Copy only the data regions, keeping holes: a snapshot of a mostly empty 10 GiB disk
    costs what the disk holds, not 10 GiB."""
    size = source.stat().st_size
    with open(source, "rb") as src, open(target, "xb") as dst:
        fd = src.fileno()
        offset = 0
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole remains
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            src.seek(start)
            dst.seek(start)
            remaining = end - start
            while remaining:
                chunk = src.read(min(remaining, 4 * MIB))
                dst.write(chunk)
                remaining -= len(chunk)
            offset = end
        dst.truncate(size)
