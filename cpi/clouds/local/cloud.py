"""The embedded local cloud: real files for disks and stemcells, real processes for VMs.

Modelled on the director's dummy CPI and the Warden CPI. Every change to a VM or disk
happens under that resource's file lock; an operation that touches several resources
takes all their locks at once, in one global order (cpi.locks), and every record is
replaced atomically, so any number of CPI processes can work at once.

A create announces itself (orphans.py) before it makes anything, and any delete removes
whatever exists under its cid, record or not: a CPI killed at any step leaves nothing that
a delete of that cid, or the next create's sweep, does not find and remove.
"""

from __future__ import annotations

import contextlib
import functools
import string
from pathlib import Path
from typing import Any

from cpi import agent_env, audit, plan
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import Cloud, DiskHint
from cpi.errors import CloudError, CpiError, DiskNotAttached, DiskNotFound, NotSupported, VMCreationFailed, VMNotFound
from cpi.files import atomic_write_json
from cpi.locks import collect_stale, locked
from cpi.models import Network, VMResources
from cpi.validation import parse

from . import faults, fileops, mounts, orphans, process
from .props import DiskCloudProperties, LocalProperties, VMCloudProperties
from .store import DiskRecord, SnapshotRecord, StemcellRecord, Store, VMRecord, canonical_ip

SETTINGS_FILE = "cpi-agent-env.json"
#: Persistent disks get /dev/sdc onwards (sda: system, sdb: ephemeral), as on OpenStack.
DEVICE_LETTERS = string.ascii_lowercase[2:]


def _then_collect_stale_locks(method):
    """After a delete, remove lock files left by processes killed while holding them (a
    killed snapshot_disk's lock on its disk, say): deletes are what an operator runs after
    a kill, and the locks dir should then be empty."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        if plan.active is None:
            collect_stale(self.store.lock_dir)
        return result

    return wrapper


class LocalCloud(Cloud):
    can_plan = True  # cpi.plan: its session withholds mutations, its waits are noted
    name = "local"
    stemcell_formats = STEMCELL_FORMATS["local"]
    Properties = LocalProperties
    cloud_property_models = {"vm_type": VMCloudProperties, "disk_type": DiskCloudProperties}

    properties: LocalProperties

    def __init__(self, properties, agent, context):
        super().__init__(properties, agent, context)
        if plan.active is not None:
            from .planned import PlannedStore

            self.store: Store = PlannedStore(properties.state_dir, plan.active)
        else:
            self.store = Store(properties.state_dir)

    def _effect(self, what: str) -> bool:
        """Whether to do file or process work now: in plan mode (cpi.plan) it is only logged."""
        if plan.active is None:
            return True
        self.log.info("plan: the call would %s", what)
        return False

    def inventory(self, kind: str):
        from . import inventory  # the operator's side: not on bin/cpi's start-up path

        return inventory.inventory(self.store, kind)

    def available(self, offer: str):
        from . import inventory

        return inventory.available(self.store, offer)

    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    @staticmethod
    def audit_path(properties: LocalProperties) -> Path:
        """The audit trail's default home: the state dir (cpi.audit)."""
        return Path(properties.state_dir).expanduser() / "audit.log"

    def _audit(self, action: str, kind: str, cid: str, old: Any = None, new: Any = None) -> None:
        audit.record(action, cid, {"old": old, "new": new}, resource_type=kind)

    def _audit_tags(self, kind: str, cid: str, current: dict[str, str], wanted: dict[str, str]) -> None:
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            self._audit("tag", kind, cid, old={k: current.get(k) for k in changed}, new=changed)

    def _lock(self, *names: str):
        if plan.active is not None:  # a plan writes nothing, lock files included: it reads what is there
            return contextlib.nullcontext()
        return locked(self.store.lock_dir, *names, timeout=self.properties.lock_timeout)

    def before_call(self, method: str) -> None:
        if self.properties.faults and plan.active is None:  # a plan uses up no injected fault
            faults.apply(self.properties.faults, method, self.store.root, self.store.lock_dir)

    @contextlib.contextmanager
    def _creating(self, cid: str, *also_lock: str):
        """Make a new resource under its lock, announced as pending first: if this process
        dies half way, the next create's sweep finds the entry with its lock free and
        removes what was made; if it fails, it removes what it made before raising."""
        orphans.sweep(self.store, self.delete_orphan)
        with self._lock(cid, *also_lock):
            self.store.add_pending(cid)
            try:
                yield
            except BaseException:
                self.log.info("creating %s failed; removing what it made", cid)
                self._purge(cid, audited=False)
                raise
            self.store.remove_pending(cid)

    def _purge(self, cid: str, kind: type | None = None, audited: bool = True) -> bool:
        """Remove everything under `cid` (its lock held): processes, IPs, files, record,
        pending entry. True if anything was there. `kind` is the one the caller's method
        deletes (delete_disk of a VM's cid must not touch the VM); by default the cid's."""
        kind = kind or self.store.kind_of(cid)
        if kind is not self.store.kind_of(cid):
            return False
        old = _load_quietly(self.store, kind, cid)
        if kind is VMRecord:
            found = self._destroy(cid, old)
        elif kind is not None:
            found = self.store.remove(kind, cid)
        else:
            found = False
        self.store.remove_pending(cid)
        if found and audited:
            self._audit("delete", _KIND_NAMES[kind], cid, old=_summary(old))
        return found

    def delete_orphan(self, cid: str) -> None:
        """Called by the sweep for a create whose process died: remove what it made."""
        if self.store.kind_of(cid) is VMRecord:
            self.delete_vm(cid)  # with the locks of any disk attached meanwhile
        else:
            with self._lock(cid):
                self._purge(cid)

    # ------------------------------------------------------------ stemcells

    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> str:
        stemcell_cid = self.store.new_cid(StemcellRecord)
        record = StemcellRecord(
            stemcell_cid=stemcell_cid, cloud_properties=cloud_properties, tags={k: str(v) for k, v in tags.items()},
            director_uuid=self.context.director_uuid,
        )
        source = fileops.open_image(image_path) if image_path else None
        try:
            with self._creating(stemcell_cid):
                directory = self.store.make_dir(StemcellRecord, stemcell_cid)
                if source is not None:
                    record.image = "image"
                    record.sha1, record.size = fileops.copy_with_sha1(
                        source, directory / "image" if self._effect("copy the stemcell image") else None)
                    self.log.info("copied stemcell image %s (%d bytes, sha1 %s)", image_path, record.size, record.sha1)
                else:
                    self.log.info("light stemcell: no image to copy")
                self.store.save(record)
        finally:
            if source is not None:
                source.close()
        self._audit("create", "stemcell", stemcell_cid,
                    new={"light": source is None, "sha1": record.sha1, "size": record.size, "tags": record.tags})
        return stemcell_cid

    @_then_collect_stale_locks
    def delete_stemcell(self, stemcell_cid: str) -> None:
        with self._lock(stemcell_cid):
            if not self._purge(stemcell_cid, StemcellRecord):
                self.log.info("stemcell %s not found: nothing to delete", stemcell_cid)

    # ------------------------------------------------------------ VMs

    def create_vm(self, agent_id, stemcell_cid, cloud_properties, networks, disk_cids, env):
        props = parse(VMCloudProperties, cloud_properties, "vm_type cloud_properties")
        if self.store.load(StemcellRecord, stemcell_cid) is None:
            raise VMCreationFailed(f"stemcell '{stemcell_cid}' not found", ok_to_retry=False)
        wanted_ips = self._wanted_ips(networks)
        vm_cid = self.store.new_cid(VMRecord)
        record = VMRecord(
            vm_cid=vm_cid,
            agent_id=agent_id,
            stemcell_cid=stemcell_cid,
            cloud_properties=cloud_properties,
            networks={name: net.wire() for name, net in networks.items()},
            director_uuid=self.context.director_uuid,
        )
        with self._creating(vm_cid):
            base = self.store.make_dir(VMRecord, vm_cid)
            self.store.save(record)  # from here on, delete_vm knows the VM
            record.ips = self._reserve_ips(vm_cid, wanted_ips)
            self.store.save(record)
            ephemeral = None
            if props.ephemeral_disk and props.ephemeral_disk.size > 0:
                if self._effect(f"allocate a {props.ephemeral_disk.size} MiB ephemeral disk"):
                    fileops.allocate(fileops.create(base / "ephemeral.img"), props.ephemeral_disk.size * fileops.MIB, preallocate=False)
                ephemeral = "/dev/sdb"
            settings = agent_env.settings(
                agent_id=agent_id,
                vm_name=vm_cid,
                agent=self.agent,
                networks=networks,
                env=env,
                ephemeral_disk=ephemeral,
            )
            if self._effect("write the agent's settings"):
                self._write_agent_files(base, settings)
            if disk_cids:
                self.log.info("disk locality hint %s: all local disks are reachable", disk_cids)
            if self._effect("start the VM's process"):
                self._boot(record, base)
        self._audit("create", "vm", vm_cid, new={"agent_id": agent_id, "stemcell_cid": stemcell_cid, "ips": record.ips,
                                                 "pid": record.pid, "cloud_properties": cloud_properties})
        return vm_cid, record.networks

    @staticmethod
    def _wanted_ips(networks: dict[str, Network]) -> list[tuple[str, str]]:
        wanted = []
        for name, net in networks.items():
            if net.type == "manual" and net.ip:
                try:
                    wanted.append((name, canonical_ip(net.ip)))
                except CpiError:
                    raise CpiError(f"network '{name}': ip '{net.ip}' is not an IP address") from None
        return wanted

    def _reserve_ips(self, vm_cid: str, wanted: list[tuple[str, str]]) -> list[str]:
        taken: list[str] = []
        if not wanted:
            return taken
        with self._lock("ips"):  # a leaf: nothing else is locked while it is held
            for name, ip in wanted:
                owner = self.store.ip_owner(ip)
                if owner and self.store.load(VMRecord, owner) is None:
                    self.log.info("IP %s was held by %s, which no longer exists: releasing it", ip, owner)
                    self.store.release_ip(ip, owner)
                    self._audit("release", "ip", ip, old={"vm_cid": owner})
                    owner = None
                if owner:
                    for done in taken:
                        self.store.release_ip(done, vm_cid)
                    raise VMCreationFailed(
                        f"IP {ip} of network '{name}' is already in use by VM {owner}", ok_to_retry=False
                    )
                self.store.reserve_ip(ip, vm_cid)
                self._audit("reserve", "ip", ip, new={"vm_cid": vm_cid})
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

    def _stop(self, vm_cid: str, record: VMRecord | None) -> None:
        if not self._effect(f"stop the processes of VM {vm_cid}"):
            return
        pid, pid_start = (record.pid, record.pid_start) if record else (None, None)
        process.stop(pid, pid_start, str(self.store.dir(VMRecord, vm_cid)))

    def _destroy(self, vm_cid: str, record: VMRecord | None) -> bool:
        """Stop its processes, release its disks and IPs, remove the VM: from whatever is
        there (record or not), each step safe to repeat. Call with the VM's and its disks'
        locks held. True if anything was there."""
        if not self.store.valid(VMRecord, vm_cid):
            return False
        found = self.store.exists(VMRecord, vm_cid)
        self._stop(vm_cid, record)
        for disk_cid in list(record.disks) if record else []:
            disk = self.store.load(DiskRecord, disk_cid)
            if disk and disk.vm_cid == vm_cid:
                disk.vm_cid = None
                self.store.save(disk)
                self.log.info("released disk %s", disk_cid)
                self._audit("detach", "disk", disk_cid, old={"vm_cid": vm_cid, "device": record.disks.get(disk_cid)})
        for ip in sorted(set(self.store.ips_of(vm_cid)) | set(record.ips if record else [])):
            self.store.release_ip(ip, vm_cid)
            self._audit("release", "ip", ip, old={"vm_cid": vm_cid})
            found = True
        return self.store.remove(VMRecord, vm_cid) or found

    def _locked_with_disks(self, vm_cid: str):
        """Lock the VM and every disk its record lists, all at once (the global order that
        attach and detach follow too); yields the record as it is under those locks."""

        @contextlib.contextmanager
        def hold():
            while True:
                before = self.store.load(VMRecord, vm_cid)
                disks = sorted(before.disks) if before else []
                with self._lock(vm_cid, *disks):
                    record = self.store.load(VMRecord, vm_cid)
                    if sorted(record.disks if record else []) == disks:
                        yield record
                        return
                self.log.info("disks of VM %s changed while locking; locking again", vm_cid)

        return hold()

    @_then_collect_stale_locks
    def delete_vm(self, vm_cid: str) -> None:
        with self._locked_with_disks(vm_cid) as record:
            found = self._destroy(vm_cid, record)
            if self.store.valid(VMRecord, vm_cid):
                self.store.remove_pending(vm_cid)
            if found:
                self._audit("delete", "vm", vm_cid, old=_summary(record))
            if not found:
                self.log.info("VM %s not found: nothing to delete", vm_cid)

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
            old = {"pid": record.pid, "boots": record.boots}
            self._stop(vm_cid, record)
            if self._effect("start the VM's process again"):
                self._boot(record, self.store.dir(VMRecord, vm_cid))
            else:
                record.pid, record.boots = None, record.boots + 1  # what only the new process can tell: open
            self._audit("reboot", "vm", vm_cid, old=old, new={"pid": record.pid, "boots": record.boots})

    def set_vm_metadata(self, vm_cid: str, metadata: dict[str, str]) -> None:
        with self._lock(vm_cid):
            record = self._vm(vm_cid)
            self._audit_tags("vm", vm_cid, record.metadata, metadata)
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
        with self._creating(disk_cid):
            directory = self.store.make_dir(DiskRecord, disk_cid)
            if self._effect(f"allocate a {size} MiB disk file"):
                fileops.allocate(fileops.create(directory / "disk.img"), size * fileops.MIB, preallocate=props.type == "preallocated")
                mounts.make_disk_store(directory)
            self.store.save(DiskRecord(disk_cid=disk_cid, size=size, cloud_properties=cloud_properties,
                                       director_uuid=self.context.director_uuid))
        self._audit("create", "disk", disk_cid, new={"size": size, "type": props.type, "vm_cid": vm_cid})
        return disk_cid

    def _disk(self, disk_cid: str) -> DiskRecord:
        record = self.store.load(DiskRecord, disk_cid)
        if record is None:
            raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)
        return record

    @_then_collect_stale_locks
    def delete_disk(self, disk_cid: str) -> None:
        with self._lock(disk_cid):
            record = self.store.load(DiskRecord, disk_cid)
            if record and record.vm_cid and self.store.load(VMRecord, record.vm_cid) is not None:
                raise CloudError(f"disk '{disk_cid}' is attached to VM {record.vm_cid}; detach it first")
            if not self._purge(disk_cid, DiskRecord):
                self.log.info("disk %s not found: nothing to delete", disk_cid)

    def has_disk(self, disk_cid: str) -> bool:
        return self.store.load(DiskRecord, disk_cid) is not None

    def resize_disk(self, disk_cid: str, new_size: int) -> None:
        with self._lock(disk_cid):
            record = self._disk(disk_cid)
            self._resize(record, new_size, _preallocated(record.cloud_properties))

    def _resize(self, record: DiskRecord, new_size: int, preallocate: bool) -> None:
        if new_size < record.size:
            raise NotSupported(f"disk '{record.disk_cid}' cannot shrink from {record.size} MiB to {new_size} MiB")
        if new_size == record.size and not preallocate:
            self.log.info("disk %s is already %d MiB", record.disk_cid, new_size)
            return
        if self._effect(f"grow the disk file of {record.disk_cid} to {new_size} MiB"):
            fileops.allocate(self.store.dir(DiskRecord, record.disk_cid) / "disk.img", new_size * fileops.MIB, preallocate)
        if new_size != record.size:
            self.log.info("grew disk %s from %d to %d MiB", record.disk_cid, record.size, new_size)
            self._audit("resize", "disk", record.disk_cid, old={"size": record.size}, new={"size": new_size})
        record.size = new_size
        self.store.save(record)

    def update_disk(self, disk_cid: str, new_size: int, cloud_properties: dict) -> str | None:
        """In place: grow the file, reserve its blocks when the new type is preallocated,
        and record the new properties (no copy: a reader sees the same bytes)."""
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties")
        with self._lock(disk_cid):
            record = self._disk(disk_cid)
            self._resize(record, new_size, props.type == "preallocated")
            if record.cloud_properties != cloud_properties:
                self._audit("update", "disk", disk_cid, old={"cloud_properties": record.cloud_properties},
                            new={"cloud_properties": cloud_properties})
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
            changed = disk.vm_cid != vm_cid or vm.disks.get(disk_cid) != hint
            old = {"vm_cid": disk.vm_cid} if disk.vm_cid and disk.vm_cid != vm_cid else None
            # disk record, then VM record, then settings: a retry after a crash finishes the job
            if disk.vm_cid != vm_cid:
                disk.vm_cid = vm_cid
                self.store.save(disk)
            if vm.disks.get(disk_cid) != hint:
                vm.disks[disk_cid] = hint
                self.store.save(vm)
            self._sync_settings(vm)
            self._sync_mounts(vm)
            if changed:
                self._audit("attach", "disk", disk_cid, old=old, new={"vm_cid": vm_cid, "device": hint})
            return hint

    def _free_letter(self, vm: VMRecord) -> str:
        used = {hint["path"][-1] for hint in vm.disks.values() if isinstance(hint, dict) and "path" in hint}
        for letter in DEVICE_LETTERS:
            if letter not in used:
                return letter
        raise CloudError(f"VM '{vm.vm_cid}' has no free device letter for another disk")

    def _sync_mounts(self, vm: VMRecord) -> None:
        """Point the VM's store at the files of the disks attached to it (mounts.py)."""
        disks = [self.store.dir(DiskRecord, disk_cid) for disk_cid in vm.disks
                 if self.store.load(DiskRecord, disk_cid) is not None]
        if self._effect(f"point the store of VM {vm.vm_cid} at its disks"):
            try:
                mounts.point(self.store.dir(VMRecord, vm.vm_cid), disks)
            except OSError as exc:
                raise CloudError(f"VM '{vm.vm_cid}': cannot point its store at its disks: {exc}") from None

    def _sync_settings(self, vm: VMRecord) -> None:
        """Record the attachments in the settings for the next boot (a running agent never
        re-reads them; the director tells it through add_persistent_disk)."""
        path = self.store.dir(VMRecord, vm.vm_cid) / SETTINGS_FILE
        settings = fileops.load_json(path)
        if settings is not None and settings["disks"].get("persistent") != vm.disks:
            settings["disks"]["persistent"] = dict(vm.disks)
            if self._effect(f"record the disks of VM {vm.vm_cid} in its agent settings"):
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
            attached = disk is not None and disk.vm_cid == vm_cid
            hint = vm.disks.pop(disk_cid, None)
            if hint is not None:
                self.store.save(vm)
            self._sync_settings(vm)
            self._sync_mounts(vm)
            if disk is not None and disk.vm_cid == vm_cid:
                disk.vm_cid = None
                self.store.save(disk)
            if attached or hint is not None:
                self._audit("detach", "disk", disk_cid, old={"vm_cid": vm_cid, "device": hint})

    def get_disks(self, vm_cid: str) -> list[str]:
        return list(self._vm(vm_cid).disks)

    def set_disk_metadata(self, disk_cid: str, metadata: dict[str, str]) -> None:
        with self._lock(disk_cid):
            record = self._disk(disk_cid)
            self._audit_tags("disk", disk_cid, record.metadata, metadata)
            record.metadata.update(metadata)
            self.store.save(record)

    # ------------------------------------------------------------ snapshots

    def snapshot_disk(self, disk_cid: str, metadata: dict[str, Any]) -> str:
        snapshot_cid = self.store.new_cid(SnapshotRecord)
        with self._creating(snapshot_cid, disk_cid):
            disk = self._disk(disk_cid)
            directory = self.store.make_dir(SnapshotRecord, snapshot_cid)
            if self._effect(f"copy the data of disk {disk_cid}"):
                fileops.sparse_copy(self.store.dir(DiskRecord, disk_cid) / "disk.img", directory / "disk.img")
                mounts.copy_disk_store(self.store.dir(DiskRecord, disk_cid), directory)
            self.store.save(SnapshotRecord(snapshot_cid=snapshot_cid, disk_cid=disk_cid, size=disk.size, metadata=metadata,
                                           director_uuid=self.context.director_uuid))
        self._audit("create", "snapshot", snapshot_cid, new={"disk_cid": disk_cid})
        return snapshot_cid

    @_then_collect_stale_locks
    def delete_snapshot(self, snapshot_cid: str) -> None:
        with self._lock(snapshot_cid):
            if not self._purge(snapshot_cid, SnapshotRecord):
                self.log.info("snapshot %s not found: nothing to delete", snapshot_cid)


# ---------------------------------------------------------------- audit helpers

_KIND_NAMES = {StemcellRecord: "stemcell", VMRecord: "vm", DiskRecord: "disk", SnapshotRecord: "snapshot"}
#: What a delete's audit line shows of the resource it removed (not its tags: a tag value
#: a director once sent as a secret is not known as one to a later call's redactor).
_SUMMARY = {
    StemcellRecord: {"sha1", "size"},
    VMRecord: {"agent_id", "stemcell_cid", "ips", "disks"},
    DiskRecord: {"size", "vm_cid"},
    SnapshotRecord: {"disk_cid", "size"},
}


def _load_quietly(store: Store, kind: type | None, cid: str):
    """The record, or None when there is none or it cannot be read (a delete goes on)."""
    if kind is None:
        return None
    try:
        return store.load(kind, cid)
    except (OSError, ValueError):
        return None


def _summary(record) -> dict[str, Any] | None:
    return None if record is None else record.model_dump(include=_SUMMARY[type(record)])


# ---------------------------------------------------------------- disk types


def _preallocated(cloud_properties: dict) -> bool:
    return isinstance(cloud_properties, dict) and cloud_properties.get("type") == "preallocated"
