"""Where create_vm puts a VM, decided before the clone: its storage policy, the check that
its IP addresses are free, its cluster, resource pool and datastore, and the passthrough
devices its hosts offer, handed on as one typed object (chosen.Placement), as the official
CPI's placement pipeline hands on its choice."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from cpi.errors import VMCreationFailed

from .. import lookups, passthrough
from . import ip_conflicts, pbm
from .chosen import Placement
from .datastores import HEADROOM_MIB, describe, pick

if TYPE_CHECKING:
    from cpi.models import Network

    from ..job_config import ClusterProperties
    from ..props import VMCloudProperties
    from ..vcenter.session import Session
    from .place import Place


def choose(session: Session, place: Place, props: VMCloudProperties, nets: dict[str, Network],
           need_mib: int) -> Placement:
    """The storage policy, then (`ensure_no_ip_conflicts`) the IP addresses' check, then the
    clusters (the vm_type's or AZ's, else cpi.json's) whose hosts offer the passthrough devices
    asked, then a cluster and datastore with room (_with_room)."""
    policy = storage_policy(session, place, props)
    if place.properties.ensure_no_ip_conflicts:
        ip_conflicts.check(session, place.datacenter, nets)
    placements = place.clusters(props.datacenters[0].clusters if props.datacenters else None)
    offered = None
    if props.asks_passthrough:
        offered = passthrough.check(session, place.config.name, [name for name, _ in placements], props)
        placements = [placement for placement in placements if placement[0] in offered.clusters]
    return _with_room(session, place, placements, props, policy, offered, need_mib)


def storage_policy(session: Session, place: Place, props: VMCloudProperties) -> pbm.Policy | None:
    """The storage policy the VM is made with, as in the official CPI: the vm_type's
    `storage_policy`; else none when the vm_type names `datastores`; else the global
    `vm_storage_policy_name`. Found, with its compatible datastores, before anything is made."""
    if props.storage_policy and props.storage_policy.name:
        name, key = props.storage_policy.name, "vm_type storage_policy"
    elif place.properties.vm_storage_policy_name and not props.datastores:
        name, key = place.properties.vm_storage_policy_name, "vm_storage_policy_name"
    else:
        return None
    return pbm.find(session, name, key, list(place.datacenter.datastore))


def _with_room(session: Session, place: Place, placements: list[tuple[str, ClusterProperties]],
               props: VMCloudProperties, policy: pbm.Policy | None, offered: passthrough.Found | None,
               need: int) -> Placement:
    """The clusters in a random order, the first whose datastores compatible with the storage
    policy, else matching the vm_type's or the global datastores (datastore clusters included,
    place.Place.storage), have room for `need` MiB: its resource pool and one of those datastores."""
    if policy is not None:
        pattern, what = None, f"storage policy '{policy.name}'"
    else:
        pattern, what = place.storage(props.datastores, persistent=False)
    tried = []
    for cluster_name, settings in random.sample(placements, len(placements)):
        pool = lookups.resource_pool(session, place.config.name, cluster_name, settings.resource_pool)
        reachable = place.datastores(list(pool.owner.datastore))
        candidates = ([d for d in reachable if d.ref._moId in policy.datastores] if policy is not None
                      else place.matching(reachable, pattern))
        chosen = pick(candidates, need)
        if chosen is not None:
            return Placement(cluster_name=cluster_name, settings=settings, pool=pool, datastore=chosen,
                             policy=policy, offered=offered)
        tried.append(f"cluster '{cluster_name}': {describe(candidates)}")
    raise VMCreationFailed(f"no datastore for the VM's {need} MiB (ephemeral disk and memory) with "
                           f"{HEADROOM_MIB} MiB to spare matches {what}: "
                           + "; ".join(tried), ok_to_retry=False)
