"""The interface every IaaS implements for BOSH: the methods a director and bosh-cli call.

Method names and arguments are BOSH's own. A cloud raises the `cpi.errors` types at its
own boundary (an SDK's "not found" becomes VMNotFound/DiskNotFound here, not in api.py).
Everything defaults to NotImplemented, which the director reads as "feature absent", so a
third-party cloud may start with a few methods and still answer the rest correctly.

Not-found contract, the same for every cloud (see docs/protocol.md "Deleting what is gone"):
- delete_stemcell, delete_vm, delete_disk, delete_snapshot: missing → success (logged).
- detach_disk: missing disk → success; disk not attached to that VM → DiskNotAttached.
- has_vm / has_disk: missing → False.
- every other method naming a missing VM/disk → VMNotFound / DiskNotFound.

What an operator adds (listing, orphans, online checks) is cpi.clouds.base.Cloud, a
subclass: the wire (cpi.api) needs only this.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from pydantic import BaseModel

from cpi.cids import AgentId, DiskCid, NetworkCid, SnapshotCid, StemcellCid, VmCid
from cpi.errors import NotImplemented as CpiNotImplemented
from cpi.models import AgentConfig, CallContext, Network, VMResources

DiskHint = str | dict[str, Any]


class BoshCloud:
    #: registry name (cpi.json `cloud.plugin`)
    name: ClassVar[str]
    #: what `info` reports; must be readable without importing the SDK
    stemcell_formats: ClassVar[list[str]]
    #: the model of `cloud.properties.<name>` in cpi.json
    Properties: ClassVar[type[BaseModel]]
    #: the cloud_properties models, by what they describe ("vm_type", "disk_type", "network",
    #: "stemcell"), for the generated reference (`cpi props <cloud>`)
    cloud_property_models: ClassVar[dict[str, type[BaseModel]]] = {}
    #: The `Properties` fields a request's `context` may override for one call (a director's
    #: cpi-config sends them there): credentials, region, endpoints and the like. Never
    #: commands or filesystem paths: whoever writes a cpi-config must not be able to run a
    #: command or choose a file as the CPI's user (root on a director VM).
    context_overrides: ClassVar[frozenset[str]] = frozenset()
    #: Of those, the keys that send the call's requests somewhere else (endpoints, the
    #: identity service), and the secrets a context must then bring itself: the config
    #: file's credentials are never sent to an endpoint that only a context names (a
    #: cpi-config writer would otherwise collect them by setting `auth_url` alone).
    context_endpoints: ClassVar[frozenset[str]] = frozenset()
    context_secrets: ClassVar[frozenset[str]] = frozenset()
    #: Whether this cloud withholds its writes under `cpi plan` (cpi.plan: its session
    #: answers mutating requests itself, its waits are noted). A cloud that does not say
    #: so is refused by `cpi plan`, which would otherwise make its changes for real.
    can_plan: ClassVar[bool] = False

    def __init__(self, properties: BaseModel, agent: AgentConfig, context: CallContext):
        self.properties = properties
        self.agent = agent
        self.context = context
        self.log = logging.getLogger(f"cpi.clouds.{self.name}")

    @classmethod
    def preload(cls) -> None:
        """Import what this cloud's calls import in their methods (its SDK), ahead of them:
        the warm helper runs this once before it forks workers, so a warm call does not
        pay for the SDK. The cloud's module must stay light for `info`; this is where the
        weight goes instead. Nothing may be connected or started here (no sockets, threads
        or credentials): every worker forked afterwards shares what is made."""

    def _absent(self, method: str) -> CpiNotImplemented:
        return CpiNotImplemented(f"'{method}' is not implemented by the {self.name} cloud")

    def before_call(self, method: str) -> None:
        """Runs before every method; the local cloud injects its configured faults here."""

    # -- stemcells
    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        raise self._absent("create_stemcell")

    def delete_stemcell(self, stemcell_cid: StemcellCid) -> None:
        raise self._absent("delete_stemcell")

    # -- VMs
    def create_vm(
        self,
        agent_id: AgentId,
        stemcell_cid: StemcellCid,
        cloud_properties: dict,
        networks: dict[str, Network],
        disk_cids: list[DiskCid],
        env: dict,
    ) -> tuple[VmCid, dict[str, Any]]:
        """Returns (vm_cid, networks as the VM got them)."""
        raise self._absent("create_vm")

    def delete_vm(self, vm_cid: VmCid) -> None:
        raise self._absent("delete_vm")

    def has_vm(self, vm_cid: VmCid) -> bool:
        raise self._absent("has_vm")

    def reboot_vm(self, vm_cid: VmCid) -> None:
        raise self._absent("reboot_vm")

    def set_vm_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        raise self._absent("set_vm_metadata")

    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        raise self._absent("calculate_vm_cloud_properties")

    def current_vm_id(self) -> VmCid:
        raise self._absent("current_vm_id")

    # -- disks
    def create_disk(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        raise self._absent("create_disk")

    def delete_disk(self, disk_cid: DiskCid) -> None:
        raise self._absent("delete_disk")

    def resize_disk(self, disk_cid: DiskCid, new_size: int) -> None:
        raise self._absent("resize_disk")

    def update_disk(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        raise self._absent("update_disk")

    def has_disk(self, disk_cid: DiskCid) -> bool:
        raise self._absent("has_disk")

    def attach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> DiskHint:
        raise self._absent("attach_disk")

    def detach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        raise self._absent("detach_disk")

    def get_disks(self, vm_cid: VmCid) -> list[DiskCid]:
        raise self._absent("get_disks")

    def set_disk_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        raise self._absent("set_disk_metadata")

    # -- snapshots
    def snapshot_disk(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        raise self._absent("snapshot_disk")

    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        raise self._absent("delete_snapshot")

    # -- networks (no built-in cloud manages networks)
    def create_network(self, network_definition: dict) -> list:
        raise self._absent("create_network")

    def delete_network(self, network_cid: NetworkCid) -> None:
        raise self._absent("delete_network")
