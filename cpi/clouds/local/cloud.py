"""The embedded local cloud: real files for disks and stemcells, real processes for VMs.

Modelled on the director's dummy CPI and the Warden CPI. Every change to a VM or disk
happens under that resource's file lock; an operation that touches several resources
takes all their locks at once, in one global order (cpi.locks), and every record is
replaced atomically, so any number of CPI processes can work at once.

A create announces itself (orphans.py) before it makes anything, and any delete removes
whatever exists under its cid, record or not (cleanup.py): a CPI killed at any step leaves
nothing that a delete of that cid, or the next create's sweep, does not find and remove.

This class is the facade the registry loads, shaped as the other clouds are: its BOSH
methods are cpi.clouds.base.PartsCloud's, made of vms.py, disks.py and stemcells.py, which
work through the call's session (session.py: the state dir, its locks, plan mode, the
audit trail). Its `boundary` hooks are the defaults: its errors are the cpi.errors types
already, and it has no requests to count.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from cpi.cids import DiskCid, VmCid
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import PartsCloud
from cpi.models import AgentConfig, CallContext

from . import faults
from .disks import Disks
from .props import DiskCloudProperties, LocalProperties, VMCloudProperties
from .session import Session
from .stemcells import Stemcells
from .store import STATE_DIR_SETTING, Store
from .vms import Vms

if TYPE_CHECKING:  # the operator's shapes: not on bin/cpi's start-up path
    from cpi.clouds.inventory import Offer, Resource


class LocalCloud(PartsCloud[Session]):
    can_plan = True  # cpi.plan: its session withholds mutations, its waits are noted
    name = "local"
    stemcell_formats = STEMCELL_FORMATS["local"]
    Properties = LocalProperties
    cloud_property_models: ClassVar[dict[str, type[BaseModel]]] = {
        "vm_type": VMCloudProperties, "disk_type": DiskCloudProperties}

    properties: LocalProperties

    def __init__(self, properties: LocalProperties, agent: AgentConfig, context: CallContext) -> None:
        super().__init__(properties, agent, context)
        self._vms = Vms(self.session)
        self._disks = Disks(self.session, self._vms)
        self._stemcells = Stemcells(self.session)

    def open_session(self) -> Session:
        """The state dir, opened with the cloud: every method of this cloud works in it."""
        return Session(self.properties, self.agent, self.context, self.log)

    def vms(self) -> Vms:
        return self._vms

    def disks(self) -> Disks:
        return self._disks

    def stemcells(self) -> Stemcells:
        return self._stemcells

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
    def inventory(self, kind: str) -> list[Resource]:
        from . import inventory  # the operator's side: not on bin/cpi's start-up path

        return inventory.inventory(self.store, kind)

    def available(self, offer: str) -> list[Offer]:
        from . import inventory

        return inventory.available(self.store, offer)

    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    # -- what not every cloud has (cpi.clouds.parts)
    def current_vm_id(self) -> VmCid:
        return VmCid(self._vms.current_vm_id())

    def update_disk(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        new_disk_cid = self._disks.update(disk_cid, new_size, cloud_properties)
        return None if new_disk_cid is None else DiskCid(new_disk_cid)
