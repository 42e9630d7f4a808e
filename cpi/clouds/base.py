"""What a cloud is to this CPI: the BOSH interface (cpi.clouds.bosh.BoshCloud) plus what an
operator asks of it and BOSH never does — listing what the CPI made, one resource in
detail, what a cloud-config may name, checking a cloud-config online. All of it
read-only, and none of it on bin/cpi's path.

A plugin derives from `Cloud` (this module's name is its public import path); a cloud that
implements none of the operator's side still serves BOSH in full.
"""

from __future__ import annotations

import abc
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar

from pydantic import BaseModel

from cpi.cids import AgentId, DiskCid, SnapshotCid, StemcellCid, VmCid
from cpi.clouds.bosh import BoshCloud, DiskHint
from cpi.errors import BoshError
from cpi.errors import NotImplemented as CpiNotImplemented
from cpi.models import Network, VMResources

if TYPE_CHECKING:  # the operator's shapes: not on the start-up path of bin/cpi
    from cpi.clouds.inventory import Offer, Resource
    from cpi.clouds.parts import DiskParts, StemcellParts, VmParts

__all__ = ["Cloud", "CloudProperties", "DiskHint", "PartsCloud", "boundary"]

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound="Cloud")
S = TypeVar("S")


class CloudProperties(BaseModel):
    """What cpi.config asks of a cloud's `Properties` besides its fields, declared with
    defaults: a cloud's model subclasses this to take an official CPI's cpi.json as it is. A
    plugin's model that is a plain BaseModel has these defaults (cpi.config.official)."""

    #: Keys of `cloud.properties` that together are the cloud's section when an official
    #: CPI's job renders them there in place of the plugin's name (the vsphere_cpi job's
    #: `vcenters` and `plugins`); none: the section is `cloud.properties.<plugin>` only.
    official_keys: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def official_shape(cls, section: Any) -> Any:
        """`section` in this model's own shape when it came in an official CPI's (the
        vSphere CPI's `{"vcenters": [{...}]}`): cpi.config calls this before it merges a
        context and looks for unknown keys, so both happen where the model's keys are. A
        ValueError is the section's error, named so. By default the section as it is."""
        return section


def boundary(method: Callable[Concatenate[C, P], R]) -> Callable[Concatenate[C, P], R]:
    """Run one of a cloud's BOSH methods at its boundary: an SDK's exception nobody expected
    becomes the cloud's own BoshError (`translate_error`: naming the request and the
    account, never a secret), anything else passes as it is, and the call's IaaS requests
    are logged once it ends (`call_started`/`call_ended`), for the bench and whoever reads
    the task log. One decorator for every cloud; each gives only its own hooks."""

    @functools.wraps(method)
    def wrapper(self: C, /, *args: P.args, **kwargs: P.kwargs) -> R:
        mark = self.call_started()
        try:
            return method(self, *args, **kwargs)
        except BoshError:
            raise
        except Exception as exc:
            translated = self.translate_error(exc, method.__name__)
            if translated is None:
                raise
            raise translated from None
        finally:
            self.call_ended(method.__name__, mark)

    return wrapper


class Cloud(BoshCloud):
    # -- worked out from the config alone: no request to the IaaS, never a secret
    @staticmethod
    def audit_account(properties: Any) -> str | None:
        """The account this cloud's audit lines name (`cpi audit` shows one account's
        lines); None: the lines carry `"account": null`."""
        return None

    @staticmethod
    def audit_path(properties: Any) -> str | os.PathLike[str] | None:
        """Where this cloud's audit trail goes when it has a private state area of its own
        (the local cloud's state dir); None: the job's store, else the user's cache."""
        return None

    @staticmethod
    def missing_state(properties: Any) -> str | None:
        """What opening this cloud would have to create (the local cloud's state dir),
        which a command that only reads must not do; None when nothing is missing."""
        return None

    # -- the boundary of each BOSH method (`boundary`): a cloud overrides what it has
    def translate_error(self, exc: Exception, method: str) -> BoshError | None:
        """The cloud's error for an exception of its SDK that `method` did not expect;
        None for one that is not its SDK's (it then propagates as it is)."""
        return None

    def call_started(self) -> Any:
        """What `call_ended` needs to say what the call cost (a start time, a count)."""
        return None

    def call_ended(self, method: str, mark: Any) -> None:
        """Log what the call cost the IaaS (its requests, its time), if anything."""
        return

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
        groups, flavors, ...), with read-only calls. `items` are cpi.clouds.findings.Item (kind,
        YAML path, cloud_properties); the answer is a list of cpi.clouds.findings.Finding.

        A cloud with checks overrides this (the built-in ones keep theirs in their
        `inspect` module); one without (a third-party plugin, say) raises NotImplemented,
        which `cpi validate` prints as such."""
        raise CpiNotImplemented(f"online checks are not implemented by the {self.name} cloud")


class PartsCloud(Cloud, Generic[S], abc.ABC):
    """A cloud made of three parts (cpi.clouds.parts): its VMs, its disks, its stemcells.
    Every BOSH method the parts carry is written here once, under `boundary`, so a cloud's
    facade holds only its own hooks, the parts' factories and what is truly its own
    (update_disk and current_vm_id where it has them, vSphere's networks).

    A part is made afresh for each method (`vms()` ...), from the cloud's session `S` (its
    IaaS client: cpi.channel under it), which is opened on the first request: a method
    answered without the IaaS opens nothing."""

    _session: S | None = None

    @abc.abstractmethod
    def open_session(self) -> S:
        """The call's session with the IaaS, built with the call's plan (`context.plan`);
        asked for once, when a part first needs it."""

    @property
    def session(self) -> S:
        if self._session is None:
            self._session = self.open_session()
        return self._session

    @property
    def session_opened(self) -> S | None:
        """The session if the call opened one, else None: for what is said or kept after a
        call (requests counted, a token kept), which must not open one to say so."""
        return self._session

    @abc.abstractmethod
    def vms(self) -> VmParts:
        """The cloud's VMs (create_vm ... get_disks)."""

    @abc.abstractmethod
    def disks(self) -> DiskParts:
        """The cloud's disks and their snapshots."""

    @abc.abstractmethod
    def stemcells(self) -> StemcellParts:
        """The cloud's stemcells."""

    # -- stemcells
    @boundary
    def create_stemcell(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        return StemcellCid(self.stemcells().create(image_path, cloud_properties, tags))

    @boundary
    def delete_stemcell(self, stemcell_cid: StemcellCid) -> None:
        self.stemcells().delete(stemcell_cid)

    # -- VMs
    @boundary
    def create_vm(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict,
                  networks: dict[str, Network], disk_cids: list[DiskCid], env: dict) -> tuple[VmCid, dict[str, Any]]:
        vm_cid, vm_networks = self.vms().create(agent_id, stemcell_cid, cloud_properties, networks, disk_cids, env)
        return VmCid(vm_cid), vm_networks

    @boundary
    def delete_vm(self, vm_cid: VmCid) -> None:
        self.vms().delete(vm_cid)

    @boundary
    def has_vm(self, vm_cid: VmCid) -> bool:
        return self.vms().exists(vm_cid)

    @boundary
    def reboot_vm(self, vm_cid: VmCid) -> None:
        self.vms().reboot(vm_cid)

    @boundary
    def set_vm_metadata(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        self.vms().set_metadata(vm_cid, metadata)

    @boundary
    def calculate_vm_cloud_properties(self, resources: VMResources) -> dict[str, Any]:
        return self.vms().calculate_cloud_properties(resources)

    @boundary
    def get_disks(self, vm_cid: VmCid) -> list[DiskCid]:
        return [DiskCid(disk_cid) for disk_cid in self.vms().disks(vm_cid)]

    # -- disks
    @boundary
    def create_disk(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        return DiskCid(self.disks().create(size, cloud_properties, vm_cid))

    @boundary
    def delete_disk(self, disk_cid: DiskCid) -> None:
        self.disks().delete(disk_cid)

    @boundary
    def resize_disk(self, disk_cid: DiskCid, new_size: int) -> None:
        self.disks().resize(disk_cid, new_size)

    @boundary
    def has_disk(self, disk_cid: DiskCid) -> bool:
        return self.disks().exists(disk_cid)

    @boundary
    def attach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> DiskHint:
        return self.disks().attach(vm_cid, disk_cid)

    @boundary
    def detach_disk(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        self.disks().detach(vm_cid, disk_cid)

    @boundary
    def set_disk_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        self.disks().set_metadata(disk_cid, metadata)

    # -- snapshots
    @boundary
    def snapshot_disk(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        return SnapshotCid(self.disks().snapshot(disk_cid, metadata))

    @boundary
    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        self.disks().delete_snapshot(snapshot_cid)
