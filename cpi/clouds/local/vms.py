"""VMs: create_vm, delete_vm, has_vm, reboot_vm, set_vm_metadata, get_disks,
calculate_vm_cloud_properties, current_vm_id.

A local VM is a directory, `<state_dir>/vms/<vm_cid>/`, used as the agent's base dir (never
reused: the agent caches its settings there), and a detached process started in it
(process.py): the built-in agent or a real bosh-agent (docs: local-cloud-agent.md). The
agent reads its settings from a file written before it starts; the disks attached later
are recorded there too, for its next boot. A manual network's IP is reserved for one VM at
a time, in the state dir's `ips/`, so two VMs never get the same address.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cpi import agent_env
from cpi.cids import AgentId, DiskCid, StemcellCid, VmCid
from cpi.errors import CloudError, CpiError, VMCreationFailed, VMNotFound
from cpi.files import atomic_write_json
from cpi.models import Network, VMResources
from cpi.validation import parse

from . import cleanup, fileops, mounts, process
from .props import VMCloudProperties
from .session import Session, then_collect_stale_locks
from .store import DiskRecord, StemcellRecord, VMRecord, canonical_ip

SETTINGS_FILE = "cpi-agent-env.json"
EPHEMERAL_DISK = "/dev/sdb"


class Vms:
    def __init__(self, session: Session):
        self.session = session
        self.store = session.store
        self.log = session.log

    # ------------------------------------------------------------ lookups

    def exists(self, vm_cid: VmCid) -> bool:
        return self.store.load(VMRecord, vm_cid) is not None

    def require(self, vm_cid: VmCid) -> VMRecord:
        record = self.store.load(VMRecord, vm_cid)
        if record is None:
            raise VMNotFound(f"VM '{vm_cid}' not found")
        return record

    def disks(self, vm_cid: VmCid) -> list[DiskCid]:
        return list(self.require(vm_cid).disks)

    # ------------------------------------------------------------ create, delete, reboot

    def create(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict, networks: dict[str, Network],
               disk_cids: Sequence[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        session = self.session
        props = parse(VMCloudProperties, cloud_properties, "vm_type cloud_properties", strict=session.context.strict)
        if self.store.load(StemcellRecord, stemcell_cid) is None:
            raise VMCreationFailed(f"stemcell '{stemcell_cid}' not found", ok_to_retry=False)
        wanted_ips = _wanted_ips(networks)
        vm_cid = VmCid(self.store.new_cid(VMRecord))
        record = VMRecord(
            vm_cid=vm_cid,
            agent_id=agent_id,
            stemcell_cid=stemcell_cid,
            cloud_properties=cloud_properties,
            networks={name: net.wire() for name, net in networks.items()},
            director_uuid=session.context.director_uuid,
        )
        with cleanup.creating(session, vm_cid):
            base = self.store.make_dir(VMRecord, vm_cid)
            self.store.save(record)  # from here on, delete_vm knows the VM
            record.ips = self._reserve_ips(vm_cid, wanted_ips)
            self.store.save(record)
            ephemeral = None
            if props.ephemeral_disk and props.ephemeral_disk.size > 0:
                if session.effect(f"allocate a {props.ephemeral_disk.size} MiB ephemeral disk"):
                    fileops.allocate(fileops.create(base / "ephemeral.img"), props.ephemeral_disk.size * fileops.MIB,
                                     preallocate=False)
                ephemeral = EPHEMERAL_DISK
            settings = agent_env.settings(
                agent_id=agent_id,
                vm_name=vm_cid,
                agent=session.agent,
                networks=networks,
                env=env,
                ephemeral_disk=ephemeral,
            )
            if session.effect("write the agent's settings"):
                _write_agent_files(base, settings)
            if disk_cids:
                self.log.info("disk locality hint %s: all local disks are reachable", disk_cids)
            if session.effect("start the VM's process"):
                self._boot(record, base)
        session.audit("create", "vm", vm_cid, new={"agent_id": agent_id, "stemcell_cid": stemcell_cid,
                                                   "ips": record.ips, "pid": record.pid,
                                                   "cloud_properties": cloud_properties})
        return vm_cid, record.networks

    @then_collect_stale_locks
    def delete(self, vm_cid: VmCid) -> None:
        cleanup.delete_vm(self.session, vm_cid)

    def reboot(self, vm_cid: VmCid) -> None:
        with self.session.lock(vm_cid):
            record = self.require(vm_cid)
            old = {"pid": record.pid, "boots": record.boots}
            cleanup.stop_vm(self.session, vm_cid, record)
            if self.session.effect("start the VM's process again"):
                self._boot(record, self.store.dir(VMRecord, vm_cid))
            else:
                record.pid, record.boots = None, record.boots + 1  # what only the new process can tell: open
            self.session.audit("reboot", "vm", vm_cid, old=old, new={"pid": record.pid, "boots": record.boots})

    def _reserve_ips(self, vm_cid: VmCid, wanted: list[tuple[str, str]]) -> list[str]:
        taken: list[str] = []
        if not wanted:
            return taken
        with self.session.lock("ips"):  # a leaf: nothing else is locked while it is held
            for name, ip in wanted:
                owner = self.store.ip_owner(ip)
                if owner and self.store.load(VMRecord, owner) is None:
                    self.log.info("IP %s was held by %s, which no longer exists: releasing it", ip, owner)
                    self.store.release_ip(ip, VmCid(owner))
                    self.session.audit("release", "ip", ip, old={"vm_cid": owner})
                    owner = None
                if owner:
                    for done in taken:
                        self.store.release_ip(done, vm_cid)
                    raise VMCreationFailed(
                        f"IP {ip} of network '{name}' is already in use by VM {owner}", ok_to_retry=False
                    )
                self.store.reserve_ip(ip, vm_cid)
                self.session.audit("reserve", "ip", ip, new={"vm_cid": vm_cid})
                taken.append(ip)
        return taken

    def _boot(self, record: VMRecord, base: Path) -> None:
        properties = self.session.properties
        record.pid, record.pid_start = process.spawn(
            process.agent_command(properties.agent_command),
            base,
            process.mbus_endpoint(self.session.agent.mbus),
            properties.agent_boot_timeout,
        )
        record.state = "running"
        record.boots += 1
        self.store.save(record)
        self.log.info("VM %s running as pid %d", record.vm_cid, record.pid)

    # ------------------------------------------------------------ what a VM is told of its disks

    def sync_mounts(self, vm: VMRecord) -> None:
        """Point the VM's store at the files of the disks attached to it (mounts.py)."""
        disks = [self.store.dir(DiskRecord, disk_cid) for disk_cid in vm.disks
                 if self.store.load(DiskRecord, disk_cid) is not None]
        if self.session.effect(f"point the store of VM {vm.vm_cid} at its disks"):
            try:
                mounts.point(self.store.dir(VMRecord, vm.vm_cid), disks)
            except OSError as exc:
                raise CloudError(f"VM '{vm.vm_cid}': cannot point its store at its disks: {exc}") from None

    def sync_settings(self, vm: VMRecord) -> None:
        """Record the attachments in the settings for the next boot (a running agent never
        re-reads them; the director tells it through add_persistent_disk)."""
        path = self.store.dir(VMRecord, vm.vm_cid) / SETTINGS_FILE
        settings = fileops.load_json(path)
        if settings is not None and settings["disks"].get("persistent") != vm.disks:
            settings["disks"]["persistent"] = dict(vm.disks)
            if self.session.effect(f"record the disks of VM {vm.vm_cid} in its agent settings"):
                atomic_write_json(path, settings)

    # ------------------------------------------------------------ metadata and sizes

    def set_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        with self.session.lock(vm_cid):
            merge_metadata(self.session, "vm", vm_cid, self.require(vm_cid), metadata)

    @staticmethod
    def calculate_cloud_properties(resources: VMResources) -> dict[str, Any]:
        return {"cpu": resources.cpu, "ram": resources.ram, "ephemeral_disk": {"size": resources.ephemeral_disk_size}}

    def current_vm_id(self) -> str:
        if not self.session.properties.current_vm_cid:
            raise CloudError("current_vm_id: this CPI is not running on a local-cloud VM (set local.current_vm_cid)")
        return self.session.properties.current_vm_cid


def _wanted_ips(networks: dict[str, Network]) -> list[tuple[str, str]]:
    wanted = []
    for name, net in networks.items():
        if net.type == "manual" and net.ip:
            try:
                wanted.append((name, canonical_ip(net.ip)))
            except CpiError:
                raise CpiError(f"network '{name}': ip '{net.ip}' is not an IP address") from None
    return wanted


def _write_agent_files(base: Path, settings: dict[str, Any]) -> None:
    atomic_write_json(base / SETTINGS_FILE, settings)
    atomic_write_json(
        base / "agent.json",
        {"Infrastructure": {"Settings": {"Sources": [{"Type": "File", "SettingsPath": str(base / SETTINGS_FILE)}]}}},
    )


def merge_metadata(session: Session, kind: str, cid: VmCid | DiskCid, record: VMRecord | DiskRecord,
                   metadata: dict[str, str]) -> None:
    """set_vm_metadata and set_disk_metadata (the resource's lock held): the tags merged into
    the record's, a key given again replaced, and each change audited."""
    session.audit_tags(kind, cid, record.metadata, metadata)
    record.metadata.update(metadata)
    session.store.save(record)
