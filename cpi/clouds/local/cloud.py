"""The embedded local cloud: real files for disks and stemcells, real processes for VMs.

Modelled on the director's dummy CPI and the Warden CPI. Every change to a VM or disk
happens under that resource's file lock; an operation that touches several resources
takes all their locks at once, in one global order (cpi.locks), and every record is
replaced atomically, so any number of CPI processes can work at once.

A create announces itself (orphans.py) before it makes anything, and any delete removes
whatever exists under its cid, record or not (cleanup.py): a CPI killed at any step leaves
nothing that a delete of that cid, or the next create's sweep, does not find and remove.

This class is the facade the registry loads, shaped as the aws and openstack clouds are:
each BOSH method hands over to vms.py, disks.py or stemcells.py, which work through the
call's session (session.py: the state dir, its locks, plan mode, the audit trail).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from cpi.cids import AgentId, DiskCid, SnapshotCid, StemcellCid, VmCid
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import Cloud, DiskHint
from cpi.models import Network, VMResources

from . import faults
from .disks import Disks
from .props import DiskCloudProperties, LocalProperties, VMCloudProperties
from .session import Session
from .stemcells import Stemcells
from .store import STATE_DIR_SETTING, Store
from .vms import Vms


class LocalCloud(Cloud):
    can_plan = True  # cpi.plan: its session withholds mutations, its waits are noted
    name = "local"
    stemcell_formats = STEMCELL_FORMATS["local"]
    Properties = LocalProperties
    cloud_property_models: ClassVar[dict[str, type[BaseModel]]] = {
        "vm_type": VMCloudProperties, "disk_type": DiskCloudProperties}

    properties: LocalProperties

    def __init__(self, properties, agent, context):
        super().__init__(properties, agent, context)
        self.session = Session(properties, agent, context, self.log)
        self._vms = Vms(self.session)
        self._disks = Disks(self.session, self._vms)
        self._stemcells = Stemcells(self.session)

    @property
    def store(self) -> Store:
        return self.session.store

    def before_call(self, method: str) -> None:
        if self.properties.faults and self.context.plan is None:  # a plan uses up no injected fault
            faults.apply(self.properties.faults, method, self.store.root, self.store.lock_dir)

    @staticmethod
    def audit_path(properties: LocalProperties) -> Path:
        """The audit trail's default home: the state dir (cpi.audit)."""
        return Path(properties.state_dir).expanduser() / "audit.log"

    @staticmethod
    def audit_account(properties: LocalProperties) -> str:
        """The account its audit lines name (cpi.audit.account_of): the state dir, absolute,
        since each state dir is a cloud of its own."""
        return os.path.normpath(Path(properties.state_dir).expanduser())

    @staticmethod
    def missing_state(properties: LocalProperties) -> str | None:
        """What a read-only operator command (`cpi list`, `show`, `avail`, `orphans`) would
        have to create to open this cloud, which it must not: a mistyped state_dir is an
        error, not a new empty cloud."""
        state_dir = Path(properties.state_dir).expanduser()
        if state_dir.is_dir():
            return None
        found = "is not a directory" if os.path.lexists(state_dir) else "does not exist"
        return f"{STATE_DIR_SETTING}: {state_dir} {found} (a command that only reads creates nothing)"

    # -- the operator's side (read-only)
    def inventory(self, kind: str):
        from . import inventory  # the operator's side: not on bin/cpi's start-up path

        return inventory.inventory(self.store, kind)

    def available(self, offer: str):
        from . import inventory

        return inventory.available(self.store, offer)

    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    # -- stemcells
    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        return StemcellCid(self._stemcells.create(image_path, cloud_properties, tags))

    def delete_stemcell(self, stemcell_cid: StemcellCid) -> None:
        self._stemcells.delete(stemcell_cid)

    # -- VMs
    def create_vm(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict,
                  networks: dict[str, Network], disk_cids: list[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        vm_cid, vm_networks = self._vms.create(agent_id, stemcell_cid, cloud_properties, networks, disk_cids, env)
        return VmCid(vm_cid), vm_networks

    def delete_vm(self, vm_cid: VmCid) -> None:
        self._vms.delete(vm_cid)

    def has_vm(self, vm_cid: VmCid) -> bool:
        return self._vms.exists(vm_cid)

    def reboot_vm(self, vm_cid: VmCid) -> None:
        self._vms.reboot(vm_cid)

    def set_vm_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        self._vms.set_metadata(vm_cid, metadata)

    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        return self._vms.calculate_cloud_properties(resources)

    def current_vm_id(self) -> VmCid:
        return VmCid(self._vms.current_vm_id())

    # -- disks
    def create_disk(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        return DiskCid(self._disks.create(size, cloud_properties, vm_cid))

    def delete_disk(self, disk_cid: DiskCid) -> None:
        self._disks.delete(disk_cid)

    def has_disk(self, disk_cid: DiskCid) -> bool:
        return self._disks.exists(disk_cid)

    def resize_disk(self, disk_cid: DiskCid, new_size: int) -> None:
        self._disks.resize(disk_cid, new_size)

    def update_disk(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        new_disk_cid = self._disks.update(disk_cid, new_size, cloud_properties)
        return None if new_disk_cid is None else DiskCid(new_disk_cid)

    def attach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> DiskHint:
        return self._disks.attach(vm_cid, disk_cid)

    def detach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        self._disks.detach(vm_cid, disk_cid)

    def get_disks(self, vm_cid: VmCid) -> list[DiskCid]:
        return [DiskCid(disk_cid) for disk_cid in self._vms.disks(vm_cid)]

    def set_disk_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        self._disks.set_metadata(disk_cid, metadata)

    # -- snapshots
    def snapshot_disk(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        return SnapshotCid(self._disks.snapshot(disk_cid, metadata))

    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        self._disks.delete_snapshot(snapshot_cid)
