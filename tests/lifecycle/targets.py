"""A lifecycle target: one cloud the shared scenarios run against.

Each cloud (local, aws via moto, openstack on loopback, or a real account) provides the
few things the scenarios cannot know: its config, a stemcell to create, cloud_properties,
networks, and ways to look at the IaaS directly to check what the CPI claims.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.runner import Cpi


class Target:
    name: str = "abstract"
    #: whether a manual network may carry IPs chosen by the test (manual_network(i))
    supports_manual_ips: bool = True
    #: whether a disk carries the director that made it, so that `cpi orphans` may offer it
    #: (vSphere keeps no metadata of a disk, as the official CPI keeps none)
    disks_carry_director: bool = True

    def __init__(self, config_path: Path):
        self.config_path = config_path
        self.cpi = Cpi(config_path)

    # -- inputs
    def stemcell_args(self) -> list[Any]:
        """create_stemcell arguments: [image_path, cloud_properties]."""
        raise NotImplementedError

    def vm_cloud_properties(self) -> dict[str, Any]:
        return {}

    def disk_cloud_properties(self) -> dict[str, Any]:
        return {}

    def manual_network(self, index: int) -> dict[str, Any]:
        """A networks argument with one manual network and an IP unique to `index`."""
        raise NotImplementedError

    def dynamic_network(self) -> dict[str, Any]:
        raise NotImplementedError

    # -- checks against the IaaS itself
    def disk_size_mib(self, disk_cid: str) -> int:
        raise NotImplementedError

    def vm_exists(self, vm_cid: str) -> bool:
        raise NotImplementedError

    def disk_attached_to(self, disk_cid: str) -> str | None:
        """The vm_cid the IaaS says this disk is attached to."""
        raise NotImplementedError

    #: whether the stemcell of stemcell_args() is one the CPI makes (and tags, API v3); a
    #: light stemcell names an image someone else owns, which the CPI must leave untouched
    tags_stemcells: bool = True

    def stemcell_tags(self, stemcell_cid: str) -> dict[str, str]:
        """The tags (or image properties) the IaaS holds for this stemcell's image."""
        raise NotImplementedError

    def offered_resources(self, vm_cloud_properties: dict[str, Any]) -> dict[str, int]:
        """What a VM made with these cloud_properties gets, as the IaaS describes it:
        {"cpu": vCPUs, "ram": MiB, "ephemeral_disk": MiB}."""
        raise NotImplementedError

    def leftovers(self) -> dict[str, list[str]]:
        """Resources still present in the IaaS (VMs, disks, ports, ...), by kind."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Remove whatever the scenarios left (after a failing test)."""
