"""The vsphere cloud: a vCenter through pyVmomi, a drop-in for the official vSphere CPI
(cloudfoundry/bosh-vsphere-cpi-release): its cpi.json and job properties, its cloud_properties,
its cids (`sc-<uuid>`, `vm-<uuid>`, `disk-<uuid>[.<pattern>]`), its folders and its agent
settings, so a director switches between the two with one ops file.

This module is what `cpi.clouds.vsphere:VsphereCloud` loads for every vsphere call, `info`
included, so it imports no pyVmomi: the session is opened on the first request.

Each public method runs inside `boundary` (cpi.clouds.base): a vCenter fault nobody expected becomes a
CloudError naming the method and the fault (never a secret), and the call's request count
is logged.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from cpi.cids import AgentId, DiskCid, NetworkCid, SnapshotCid, StemcellCid, VmCid
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import Cloud, DiskHint, boundary
from cpi.errors import BoshError, CloudError
from cpi.models import Network, VMResources

from . import errors
from .job_config import CONTEXT_ENDPOINTS, CONTEXT_OVERRIDES, CONTEXT_SECRETS, VsphereProperties
from .props import DiskCloudProperties, ManagedNetworkCloudProperties, NetworkCloudProperties, VMCloudProperties


class VsphereCloud(Cloud):
    name = "vsphere"
    can_plan = True  # cpi.plan: its session withholds mutations, its waits are noted (vcenter/planned.py)
    stemcell_formats: ClassVar[list[str]] = STEMCELL_FORMATS["vsphere"]
    Properties = VsphereProperties
    context_overrides = CONTEXT_OVERRIDES
    context_endpoints = CONTEXT_ENDPOINTS
    context_secrets = CONTEXT_SECRETS
    cloud_property_models: ClassVar[dict[str, type]] = {
        "vm_type": VMCloudProperties,
        "disk_type": DiskCloudProperties,
        "network (manual)": NetworkCloudProperties,
        "network (managed: made by create_network)": ManagedNetworkCloudProperties,
    }

    properties: VsphereProperties

    def translate_error(self, exc: Exception, method: str) -> BoshError | None:
        if errors.fault_name(exc) is None:
            return None
        password = self.properties.password.get_secret_value()
        return CloudError(errors.scrub(f"{method}: the vCenter at {self.properties.vcenter_host} "
                                       f"answered {errors.describe(exc)}", [password]))

    def call_started(self) -> tuple[float, int]:
        return time.monotonic(), self._session.requests if self._session is not None else 0

    def call_ended(self, method: str, mark: Any) -> None:
        started, before = mark
        if self._session is not None:
            self.log.info("%s: %d vCenter requests in %.2fs", method, self._session.requests - before,
                          time.monotonic() - started)

    @staticmethod
    def audit_account(properties: VsphereProperties) -> str:
        """The account its audit lines name: the vCenter, the user and the datacenter, from
        the config alone."""
        return f"vcenter {properties.vcenter_host} user {properties.user} datacenter {properties.datacenter.name}"

    @classmethod
    def preload(cls) -> None:
        from pyVmomi import vim, vmodl  # noqa: F401 - the SDK's types, ahead of the forked workers

        from . import stemcells  # noqa: F401
        from .vms import disks, vms  # noqa: F401

    def __init__(self, properties, agent, context):
        super().__init__(properties, agent, context)
        self._session: Any = None
        self._place: Any = None

    @property
    def session(self):
        if self._session is None:
            from .vcenter import session

            session.warn_unverified(self.properties)
            self._session = session.get(self.properties, self.context.plan)
        return self._session

    @property
    def place(self):
        if self._place is None:
            from .placement.place import Place

            self._place = Place(self.session, self.properties, self.context.director_uuid)
        return self._place

    def _vms(self):
        from .vms.vms import Vms

        return Vms(self.session, self.place, self.agent, self.context)

    def _disks(self):
        from .vms.disks import Disks

        return Disks(self.session, self.place, self._vms())

    def _stemcells(self):
        from .stemcells import Stemcells

        return Stemcells(self.session, self.place)

    # -- the operator's side (read-only)
    def _inventory(self):
        from .inventory import Inventory

        return Inventory(self.session, self.place)

    @boundary
    def inventory(self, kind: str):
        return self._inventory().inventory(kind)

    def show(self, kind: str, cid: str):
        """A disk by the cid the director knows too: the file's name with, after a ".", the
        datastore pattern it was made for (the listing knows the file's name alone)."""
        return super().show(kind, cid.partition(".")[0] if kind == "disks" else cid)

    @boundary
    def available(self, offer: str):
        return self._inventory().available(offer)

    @boundary
    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    # -- managed networks (NSX-T's Manager API)
    def _networks(self, method: str):
        from cpi.channel import Channel
        from cpi.errors import NotSupported

        from .nsx.nsxt.client import client_for
        from .nsx.nsxt.networks import Networks

        if self.properties.nsxt is None:
            raise CloudError(f"{method} makes networks through NSX-T's Manager API: cpi.json names no NSX-T manager "
                             "(`nsxt`, the job's vcenter.nsxt.*)")
        if self.properties.nsxt.use_policy_api:
            raise NotSupported(f"{method} is not supported through NSX-T's Policy API (vcenter.nsxt.use_policy_api), "
                               "as with the official CPI")
        made = client_for(self.properties, Channel(self.context.plan))
        assert made is not None
        return Networks(made)

    @boundary
    def create_network(self, network_definition: dict) -> list:
        return self._networks("create_network").create(network_definition)

    @boundary
    def delete_network(self, network_cid: NetworkCid) -> None:
        self._networks("delete_network").delete(network_cid)

    # -- stemcells
    @boundary
    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        return StemcellCid(self._stemcells().create(image_path, tags))

    @boundary
    def delete_stemcell(self, stemcell_cid: StemcellCid) -> None:
        self._stemcells().delete(stemcell_cid)

    # -- VMs
    @boundary
    def create_vm(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict,
                  networks: dict[str, Network], disk_cids: list[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        if disk_cids:
            self.log.info("disk locality hint %s: the VM goes where its vm_type says; attach_disk moves a disk its "
                          "host cannot reach", ", ".join(disk_cids))
        vm_cid, vm_networks = self._vms().create(agent_id, stemcell_cid, cloud_properties, networks, env)
        return VmCid(vm_cid), vm_networks

    @boundary
    def delete_vm(self, vm_cid: VmCid) -> None:
        self._vms().delete(vm_cid)

    @boundary
    def has_vm(self, vm_cid: VmCid) -> bool:
        return self._vms().exists(vm_cid)

    @boundary
    def reboot_vm(self, vm_cid: VmCid) -> None:
        self._vms().reboot(vm_cid)

    @boundary
    def set_vm_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        self._vms().set_metadata(vm_cid, metadata)

    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        from .vms.vms import Vms

        return Vms.calculate_cloud_properties(resources)

    # -- disks
    @boundary
    def create_disk(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        return DiskCid(self._disks().create(size, cloud_properties, vm_cid))

    @boundary
    def delete_disk(self, disk_cid: DiskCid) -> None:
        self._disks().delete(disk_cid)

    @boundary
    def resize_disk(self, disk_cid: DiskCid, new_size: int) -> None:
        self._disks().resize(disk_cid, new_size)

    @boundary
    def update_disk(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        self._disks().update(disk_cid, new_size, cloud_properties)
        return None

    @boundary
    def has_disk(self, disk_cid: DiskCid) -> bool:
        return self._disks().exists(disk_cid)

    @boundary
    def attach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> DiskHint:
        return self._disks().attach(vm_cid, disk_cid)

    @boundary
    def detach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        self._disks().detach(vm_cid, disk_cid)

    @boundary
    def get_disks(self, vm_cid: VmCid) -> list[DiskCid]:
        return [DiskCid(disk_cid) for disk_cid in self._vms().disks(vm_cid)]

    @boundary
    def set_disk_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        self._disks().set_metadata(disk_cid, metadata)

    # -- snapshots
    @boundary
    def snapshot_disk(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        return SnapshotCid(self._disks().snapshot(disk_cid))

    @boundary
    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        self._disks().delete_snapshot(snapshot_cid)
