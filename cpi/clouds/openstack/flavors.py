"""Nova flavors: finding the vm_type's flavor, and calculate_vm_cloud_properties.

One request lists every flavor the project may use (`/flavors/detail?is_public=None`);
the flavor is picked by name from it (or by ID), so a missing flavor is an error that
names it and lists what there is, without a `find_*` probe per candidate.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from cpi.errors import CloudError, VMCreationFailed
from cpi.models import VMResources

from .session import OpenStack

log = logging.getLogger("cpi.clouds.openstack")

#: GiB the OS takes on the root disk, besides an ephemeral partition (as the Ruby CPI counts).
OS_OVERHEAD_GIB = 3


def all_flavors(api: OpenStack) -> list[dict[str, Any]]:
    return api.get("compute", "/flavors/detail?is_public=None")["flavors"]


def ephemeral(flavor: dict[str, Any]) -> int:
    return int(flavor.get("OS-FLV-EXT-DATA:ephemeral", flavor.get("ephemeral", 0)) or 0)


def disabled(flavor: dict[str, Any]) -> bool:
    return bool(flavor.get("OS-FLV-DISABLED:disabled", False))


def find(api: OpenStack, name: str) -> dict[str, Any]:
    flavors = all_flavors(api)
    by_name = [f for f in flavors if f.get("name") == name]
    if not by_name:
        by_name = [f for f in flavors if f.get("id") == name]
    if not by_name:
        names = ", ".join(sorted(f.get("name", "?") for f in flavors)) or "none"
        raise VMCreationFailed(f"flavor '{name}' not found (instance_type); flavors available: {names}",
                               ok_to_retry=False)
    if len(by_name) > 1:
        raise VMCreationFailed(f"flavor name '{name}' is ambiguous ({len(by_name)} flavors): use its ID",
                               ok_to_retry=False)
    flavor = by_name[0]
    if disabled(flavor):
        raise VMCreationFailed(f"flavor '{name}' is disabled", ok_to_retry=False)
    eph = ephemeral(flavor)
    if eph > 0 and flavor.get("ram"):
        # the agent puts swap (as large as RAM) and /var/vcap/data on the ephemeral disk
        minimum = (int(flavor["ram"]) // 1024) * 2
        if eph < minimum:
            raise VMCreationFailed(
                f"flavor '{name}' has {eph} GiB of ephemeral disk; with {flavor['ram']} MiB of RAM it needs at least "
                f"{minimum} GiB (swap and /var/vcap/data)",
                ok_to_retry=False,
            )
    return flavor


def calculate(api: OpenStack, resources: VMResources, boot_from_volume: bool) -> dict[str, Any]:
    """The smallest flavor (vCPUs, RAM, then disk) with the CPUs and RAM asked for and room
    for the ephemeral disk: on a dedicated ephemeral disk, or on the root disk next to the
    OS. Where the root disk has to be sized for it, `root_disk.size` says how large."""
    flavors = [f for f in all_flavors(api) if not disabled(f)]
    eph_gib = resources.ephemeral_disk_size / 1024.0
    fitting = [f for f in flavors if f["vcpus"] >= resources.cpu and f["ram"] >= resources.ram]
    if boot_from_volume:
        # the boot volume is sized to hold the ephemeral partition when there is no ephemeral disk
        candidates = [f for f in fitting if ephemeral(f) >= eph_gib or ephemeral(f) == 0]
    else:
        candidates = [
            f for f in fitting
            if (ephemeral(f) >= math.ceil(eph_gib) and f["disk"] >= OS_OVERHEAD_GIB)
            or (ephemeral(f) == 0 and f["disk"] >= math.ceil(eph_gib) + OS_OVERHEAD_GIB)
        ]
    if not candidates:
        listing = "; ".join(
            f"{f['name']}: {f['vcpus']} CPU, {f['ram']} MiB RAM, {f['disk']} GiB disk, {ephemeral(f)} GiB ephemeral"
            for f in sorted(flavors, key=lambda f: (f["vcpus"], f["ram"]))
        ) or "none"
        raise CloudError(
            f"no flavor has {resources.cpu} CPU, {resources.ram} MiB RAM and room for a "
            f"{resources.ephemeral_disk_size} MiB ephemeral disk; flavors: {listing}"
        )
    best = min(candidates, key=lambda f: (f["vcpus"], f["ram"], f["disk"] + ephemeral(f), f["disk"]))
    result: dict[str, Any] = {"instance_type": best["name"]}
    if boot_from_volume and (best["disk"] < OS_OVERHEAD_GIB or ephemeral(best) == 0):
        extra = math.ceil(eph_gib) if ephemeral(best) == 0 else 0
        size = OS_OVERHEAD_GIB + extra
        if size > best["disk"]:
            result["root_disk"] = {"size": size}
    log.info("flavor %s fits %d CPU, %d MiB RAM, %d MiB ephemeral", best["name"], resources.cpu, resources.ram,
             resources.ephemeral_disk_size)
    return result
