"""What placement decides for create_vm, typed: where the VM goes (Placement, which
choose.py builds and the clone and what follows it read) and what the hosts offer of the
passthrough devices the vm_type asks (Found, passthrough.py's answer). Here on their own,
beside no lookup, so that a reader of the choice needs none of the calls that make it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyVmomi import vim

    from ..job_config import ClusterProperties
    from .datastores import Datastore
    from .pbm import Policy


@dataclass
class Found:
    """The clusters whose hosts offer what the vm_type asks, and the device groups' vGPUs."""

    clusters: list[str]
    groups: dict[str, list[str]]


@dataclass(frozen=True)
class Placement:
    cluster_name: str
    #: the cluster's settings (resource pool, host group, DRS rules), cpi.json's or the vm_type's
    settings: ClusterProperties
    #: the resource pool the VM goes in; its owner is the cluster
    pool: vim.ResourcePool
    datastore: Datastore
    policy: Policy | None
    #: what the cluster's hosts offer of the vm_type's passthrough devices, when it asks any
    offered: Found | None

    @property
    def cluster(self) -> vim.ComputeResource:
        """The cluster the resource pool belongs to."""
        return self.pool.owner
