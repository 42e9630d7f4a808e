"""Octavia (LBaaS v2) pool memberships of VMs (vm_type `loadbalancer_pools`).

A membership is recorded in the server's metadata as `lbaas_pool_<n>: <pool_id>/<member_id>`,
so delete_vm removes it even when the director is a different process, days later. A
load balancer refuses changes while it is PENDING_UPDATE (409): those requests are
retried, and each change is waited on until the load balancer is ACTIVE again.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

from cpi import waits
from cpi.errors import CloudError, VMCreationFailed

from . import errors
from .props import LoadBalancerPool, OpenStackProperties
from .session import OpenStack
from .waits import poll_schedule

log = logging.getLogger("cpi.clouds.openstack")

SERVICE = "load-balancer"
METADATA_PREFIX = "lbaas_pool_"


def _immutable(exc: errors.ApiError) -> bool:
    return exc.status == 409


def find_pool(api: OpenStack, name: str) -> dict[str, Any]:
    query = urllib.parse.urlencode({"name": name})
    pools = api.get(SERVICE, f"/lbaas/pools?{query}")["pools"]
    if not pools:
        raise VMCreationFailed(f"load balancer pool '{name}' not found", ok_to_retry=False)
    if len(pools) > 1:
        raise VMCreationFailed(f"load balancer pool name '{name}' is ambiguous ({len(pools)} pools)", ok_to_retry=False)
    return pools[0]


def _wait_active(api: OpenStack, properties: OpenStackProperties, loadbalancer_id: str) -> None:
    def check() -> waits.Check:
        lb = api.get(SERVICE, f"/lbaas/loadbalancers/{loadbalancer_id}")["loadbalancer"]
        status = lb.get("provisioning_status", "UNKNOWN")
        if status == "ERROR":
            raise CloudError(f"load balancer {loadbalancer_id} went ERROR")
        return waits.Check(status == "ACTIVE", status)

    api.channel.until(check, what=f"load balancer {loadbalancer_id} to be ACTIVE", timeout=properties.state_timeout,
                      setting="state_timeout", schedule=poll_schedule(properties))


def add_member(api: OpenStack, properties: OpenStackProperties, pool_spec: LoadBalancerPool, address: str,
               subnet_id: str | None) -> tuple[str, str]:
    """Make `address` a member of the pool; returns (pool_id, member_id)."""
    pool = find_pool(api, pool_spec.name)
    member: dict[str, Any] = {"address": address, "protocol_port": pool_spec.port}
    if subnet_id:
        member["subnet_id"] = subnet_id
    if pool_spec.monitoring_port:
        member["monitor_port"] = pool_spec.monitoring_port
    created = api.post(SERVICE, f"/lbaas/pools/{pool['id']}/members", {"member": member},
                       also=_immutable, budget=properties.state_timeout)["member"]
    log.info("added %s:%d to load balancer pool %s as member %s", address, pool_spec.port, pool_spec.name,
             created["id"])
    for lb in pool.get("loadbalancers") or []:
        _wait_active(api, properties, lb["id"])
    return pool["id"], created["id"]


def remove_member(api: OpenStack, properties: OpenStackProperties, pool_id: str, member_id: str) -> None:
    response = api.delete(SERVICE, f"/lbaas/pools/{pool_id}/members/{member_id}", ok=(404,), also=_immutable,
                          budget=properties.state_timeout)
    if response.status_code == 404:
        log.info("load balancer member %s of pool %s was already gone", member_id, pool_id)
    else:
        log.info("removed member %s from load balancer pool %s", member_id, pool_id)


def memberships(metadata: dict[str, str]) -> list[tuple[str, str]]:
    found = []
    for key, value in sorted((metadata or {}).items()):
        if key.startswith(METADATA_PREFIX) and "/" in value:
            pool_id, member_id = value.split("/", 1)
            found.append((pool_id, member_id))
    return found


def metadata_for(members: list[tuple[str, str]]) -> dict[str, str]:
    return {f"{METADATA_PREFIX}{i + 1}": f"{pool_id}/{member_id}" for i, (pool_id, member_id) in enumerate(members)}
