"""The interface every IaaS implements.

Method names and arguments are BOSH's own. A cloud raises the `cpi.errors` types at its
own boundary (an SDK's "not found" becomes VMNotFound/DiskNotFound here, not in api.py).
Everything defaults to NotImplemented, which the director reads as "feature absent", so a
third-party cloud may start with a few methods and still answer the rest correctly.

Not-found contract, the same for every cloud (see README "Deleting what is gone"):
- delete_stemcell, delete_vm, delete_disk, delete_snapshot: missing → success (logged).
- detach_disk: missing disk → success; disk not attached to that VM → DiskNotAttached.
- has_vm / has_disk: missing → False.
- every other method naming a missing VM/disk → VMNotFound / DiskNotFound.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from cpi.errors import NotImplemented as CpiNotImplemented
from cpi.models import AgentConfig, CallContext, Network, VMResources

if TYPE_CHECKING:  # the operator's shapes: not on the start-up path of bin/cpi
    from cpi.inventory import Offer, Resource

DiskHint = str | dict[str, Any]


class Cloud:
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

    def _absent(self, method: str):
        return CpiNotImplemented(f"'{method}' is not implemented by the {self.name} cloud")

    def before_call(self, method: str) -> None:
        """Runs before every method; the local cloud injects its configured faults here."""

    # -- stemcells
    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> str:
        raise self._absent("create_stemcell")

    def delete_stemcell(self, stemcell_cid: str) -> None:
        raise self._absent("delete_stemcell")

    # -- VMs
    def create_vm(
        self,
        agent_id: str,
        stemcell_cid: str,
        cloud_properties: dict,
        networks: dict[str, Network],
        disk_cids: list[str],
        env: dict,
    ) -> tuple[str, dict[str, Any]]:
        """Returns (vm_cid, networks as the VM got them)."""
        raise self._absent("create_vm")

    def delete_vm(self, vm_cid: str) -> None:
        raise self._absent("delete_vm")

    def has_vm(self, vm_cid: str) -> bool:
        raise self._absent("has_vm")

    def reboot_vm(self, vm_cid: str) -> None:
        raise self._absent("reboot_vm")

    def set_vm_metadata(self, vm_cid: str, metadata: dict[str, str]) -> None:
        raise self._absent("set_vm_metadata")

    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        raise self._absent("calculate_vm_cloud_properties")

    def current_vm_id(self) -> str:
        raise self._absent("current_vm_id")

    # -- disks
    def create_disk(self, size: int, cloud_properties: dict, vm_cid: str | None) -> str:
        raise self._absent("create_disk")

    def delete_disk(self, disk_cid: str) -> None:
        raise self._absent("delete_disk")

    def resize_disk(self, disk_cid: str, new_size: int) -> None:
        raise self._absent("resize_disk")

    def update_disk(self, disk_cid: str, new_size: int, cloud_properties: dict) -> str | None:
        raise self._absent("update_disk")

    def has_disk(self, disk_cid: str) -> bool:
        raise self._absent("has_disk")

    def attach_disk(self, vm_cid: str, disk_cid: str) -> DiskHint:
        raise self._absent("attach_disk")

    def detach_disk(self, vm_cid: str, disk_cid: str) -> None:
        raise self._absent("detach_disk")

    def get_disks(self, vm_cid: str) -> list[str]:
        raise self._absent("get_disks")

    def set_disk_metadata(self, disk_cid: str, metadata: dict[str, str]) -> None:
        raise self._absent("set_disk_metadata")

    # -- snapshots
    def snapshot_disk(self, disk_cid: str, metadata: dict[str, Any]) -> str:
        raise self._absent("snapshot_disk")

    def delete_snapshot(self, snapshot_cid: str) -> None:
        raise self._absent("delete_snapshot")

    # -- networks (no built-in cloud manages networks)
    def create_network(self, network_definition: dict) -> list:
        raise self._absent("create_network")

    def delete_network(self, network_cid: str) -> None:
        raise self._absent("delete_network")

    # -- the operator's side (`cpi list|show|avail`): read-only, never called by BOSH
    def inventory(self, kind: str) -> list[Resource]:
        """Every resource of `kind` (vms, disks, stemcells, snapshots) this CPI made."""
        raise self._absent(f"listing {kind}")

    def show(self, kind: str, cid: str) -> Resource | None:
        """One resource, with its details; None when it is not there."""
        found = [r for r in self.inventory(kind) if r.cid == cid]
        return found[0] if found else None

    def available(self, offer: str) -> list[Offer]:
        """What a cloud-config may name: images, sizes, zones, networks."""
        raise self._absent(f"listing available {offer}")

    # -- the operator's side (`cpi validate --online`): read-only, never called by BOSH
    def check_cloud_config(self, items: list) -> list:
        """Check that what a cloud-config's cloud_properties name exists (subnets, security
        groups, flavors, ...), with read-only calls. `items` are cpi.cloud_config.Item (kind,
        YAML path, cloud_properties); the answer is a list of cpi.cloud_config.Finding.

        By default a built-in cloud's checks live next to it, in its `inspect` module
        (`check_cloud_config(cloud, items)`); a cloud without one (a third-party plugin, say)
        raises NotImplemented, which `cpi validate` prints as such."""
        import importlib

        package = type(self).__module__.rpartition(".")[0]
        try:
            module = importlib.import_module(f"{package}.inspect")
        except ImportError:
            module = None
        if module is None or not hasattr(module, "check_cloud_config"):
            raise CpiNotImplemented(f"online checks are not implemented by the {self.name} cloud")
        return module.check_cloud_config(self, items)
