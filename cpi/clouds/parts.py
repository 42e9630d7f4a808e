"""The three parts a built-in cloud is made of, as cpi.clouds.base.PartsCloud calls them: its
VMs, its disks and its stemcells, one fixed signature per method.

BOSH's methods are written once, in PartsCloud, in terms of these; a cloud supplies the
parts (its vms.py, disks.py, stemcells.py) and nothing else for them, so no facade repeats
the same twenty delegations. The parts take the cids typed as BOSH names them and may
answer plain strings: PartsCloud types what they return. Arguments are positional only: a
part names its parameters as it likes.

Not here, since not every cloud has them: update_disk and current_vm_id (BOSH treats both
as optional; a cloud that has one implements the BOSH method itself), and the networks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from cpi.cids import AgentId, DiskCid, SnapshotCid, StemcellCid, VmCid
from cpi.clouds.bosh import DiskHint
from cpi.models import Network, VMResources


class VmParts(Protocol):
    def create(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict,
               networks: dict[str, Network], disk_cids: list[DiskCid], env: dict, /) -> tuple[str, dict[str, Any]]:
        """(vm_cid, networks as the VM got them)."""

    def delete(self, vm_cid: VmCid, /) -> None: ...

    def exists(self, vm_cid: VmCid, /) -> bool: ...

    def reboot(self, vm_cid: VmCid, /) -> None: ...

    def set_metadata(self, vm_cid: VmCid, metadata: dict[str, str], /) -> None: ...

    def calculate_cloud_properties(self, resources: VMResources, /) -> dict[str, Any]: ...

    def disks(self, vm_cid: VmCid, /) -> Sequence[str]:
        """The persistent disks attached to the VM (get_disks)."""


class DiskParts(Protocol):
    def create(self, size: int, cloud_properties: dict, vm_cid: VmCid | None, /) -> str: ...

    def delete(self, disk_cid: DiskCid, /) -> None: ...

    def exists(self, disk_cid: DiskCid, /) -> bool: ...

    def resize(self, disk_cid: DiskCid, new_size: int, /) -> None: ...

    def attach(self, vm_cid: VmCid, disk_cid: DiskCid, /) -> DiskHint: ...

    def detach(self, vm_cid: VmCid, disk_cid: DiskCid, /) -> None: ...

    def set_metadata(self, disk_cid: DiskCid, metadata: dict[str, str], /) -> None: ...

    def snapshot(self, disk_cid: DiskCid, metadata: dict[str, Any], /) -> str: ...

    def delete_snapshot(self, snapshot_cid: SnapshotCid, /) -> None: ...


class StemcellParts(Protocol):
    def create(self, image_path: str, cloud_properties: dict, tags: dict[str, str], /) -> str: ...

    def delete(self, stemcell_cid: StemcellCid, /) -> None: ...
