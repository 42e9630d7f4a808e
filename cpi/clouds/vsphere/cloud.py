"""The vsphere cloud: a vCenter through pyVmomi, a drop-in for the official vSphere CPI
(cloudfoundry/bosh-vsphere-cpi-release): its cpi.json and job properties, its cloud_properties,
its cids (`sc-<uuid>`, `vm-<uuid>`, `disk-<uuid>[.<pattern>]`), its folders and its agent
settings, so a director switches between the two with one ops file.

This module is what `cpi.clouds.vsphere:VsphereCloud` loads for every vsphere call, `info`
included, so it imports no pyVmomi: the session is opened on the first request.

Its BOSH methods are cpi.clouds.base.PartsCloud's, made of this cloud's parts (vms/vms.py,
vms/disks.py, stemcells.py), but for what is its own: update_disk, the networks NSX-T makes,
and calculate_vm_cloud_properties, answered without a session. Each runs inside
`boundary`: a vCenter fault nobody expected becomes a
CloudError naming the method and the fault (never a secret), and the call's request count
is logged.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from cpi.cids import DiskCid, NetworkCid
from cpi.clouds import STEMCELL_FORMATS
from cpi.clouds.base import PartsCloud, boundary
from cpi.errors import BoshError, CloudError
from cpi.models import AgentConfig, CallContext, VMResources

from . import errors
from .job_config import CONTEXT_ENDPOINTS, CONTEXT_OVERRIDES, CONTEXT_SECRETS, VsphereProperties
from .props import DiskCloudProperties, ManagedNetworkCloudProperties, NetworkCloudProperties, VMCloudProperties

if TYPE_CHECKING:  # the parts and the session: pyVmomi's, imported by the first call that needs them
    from cpi.clouds.inventory import Offer, Resource

    from .inventory import Inventory
    from .nsx.nsxt.networks import Networks
    from .placement.place import Place
    from .stemcells import Stemcells
    from .vcenter.session import Session
    from .vms.disks import Disks
    from .vms.vms import Vms


class VsphereCloud(PartsCloud["Session"]):
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
        opened = self.session_opened
        return time.monotonic(), opened.requests if opened is not None else 0

    def call_ended(self, method: str, mark: Any) -> None:
        started, before = mark
        opened = self.session_opened
        if opened is not None:
            self.log.info("%s: %d vCenter requests in %.2fs", method, opened.requests - before,
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

    def __init__(self, properties: VsphereProperties, agent: AgentConfig, context: CallContext) -> None:
        super().__init__(properties, agent, context)
        self._place: Place | None = None

    def open_session(self) -> Session:
        from .vcenter import session

        session.warn_unverified(self.properties)
        return session.get(self.properties, self.context.plan)

    @property
    def place(self) -> Place:
        if self._place is None:
            from .placement.place import Place

            self._place = Place(self.session, self.properties, self.context.director_uuid)
        return self._place

    def vms(self) -> Vms:
        from .vms.vms import Vms

        return Vms(self.session, self.place, self.agent, self.context)

    def disks(self) -> Disks:
        from .vms.disks import Disks

        return Disks(self.session, self.place, self.vms(), self.context)

    def stemcells(self) -> Stemcells:
        from .stemcells import Stemcells

        return Stemcells(self.session, self.place)

    # -- the operator's side (read-only)
    def _inventory(self) -> Inventory:
        from .inventory import Inventory

        return Inventory(self.session, self.place)

    @boundary
    def inventory(self, kind: str) -> list[Resource]:
        return self._inventory().inventory(kind)

    def show(self, kind: str, cid: str) -> Resource | None:
        """A disk by the cid the director knows too: the file's name with, after a ".", the
        datastore pattern it was made for (the listing knows the file's name alone)."""
        return super().show(kind, cid.partition(".")[0] if kind == "disks" else cid)

    @boundary
    def available(self, offer: str) -> list[Offer]:
        return self._inventory().available(offer)

    @boundary
    def check_cloud_config(self, items: list) -> list:
        from . import inspect  # `cpi validate --online`'s read-only checks: not on bin/cpi's path

        return inspect.check_cloud_config(self, items)

    # -- managed networks (NSX-T's Manager API)
    def _networks(self, method: str) -> Networks:
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
        return Networks(made, strict=self.context.strict)

    @boundary
    def create_network(self, network_definition: dict) -> list:
        return self._networks("create_network").create(network_definition)

    @boundary
    def delete_network(self, network_cid: NetworkCid) -> None:
        self._networks("delete_network").delete(network_cid)

    # -- what is this cloud's own (cpi.clouds.parts)
    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        """From the resources alone: no session is opened, and no boundary is needed."""
        from .vms.vms import Vms

        return Vms.calculate_cloud_properties(resources)

    @boundary
    def update_disk(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        self.disks().update(disk_cid, new_size, cloud_properties)
        return None
