"""NSX-T's Policy API (cpi.json's `nsxt` with `use_policy_api: true`), for a vm_type's
`nsxt`: the VM joins the groups (`ns_groups`) and load balancer server pools
(`lb.server_pools`) it names, and leaves them when it is deleted; its segment ports carry
the director's metadata as `bosh/<key>` tags, as the official CPI does.

- Groups are found by display name through the search API before anything is made, so a
  group that is not there refuses create_vm with nothing to clean up.
- A group's members are its ExternalIDExpressions of member type VirtualMachine: the VM's
  NSX external id (the one NSX's inventory gives it once it has seen the VM in the vCenter)
  is added to one with room (at most MAX_IDS ids each), or to a new one after an OR
  conjunction named `conjunction-<vm_cid>-<n>`, as the official CPI names it, so that a
  switch between the two CPIs keeps each other's memberships.
- Each change is a PUT of the group or pool read just before, carrying its `_revision`: NSX
  refuses it with 412 when another writer came first, and the change is read and made again.
- A pool member is named after the vm_cid, so delete_vm removes exactly this VM's members.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

from cpi import waits
from cpi.cids import VmCid
from cpi.errors import CloudError

from .client import Client
from .inventory import DISCOVERY_SECONDS, discovered, is_mine
from .tags import bosh_tags

log = logging.getLogger("cpi.clouds.vsphere")

API = "/policy/api/v1"
DOMAIN = "default"
#: how many external ids the official CPI puts in one expression before it starts another
MAX_IDS = 500
#: group names looked up per search query, as the official CPI splits them
SEARCH_NAMES = 20


class Policy:
    """The Policy API of one NSX-T manager."""

    def __init__(self, client: Client):
        self.client = client
        self.host = client.config.host

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return self.client.call(method, API + path, body)

    # ------------------------------------------------------------ lookups

    def groups(self, names: list[str], *, missing_ok: bool = False) -> dict[str, str]:
        """Display name → id of the groups `names`; CloudError naming those not there
        (with `missing_ok`, they are logged and left out)."""
        found: dict[str, str] = {}
        for start in range(0, len(names), SEARCH_NAMES):  # a query's length is bounded: so many names a query
            quoted = " OR ".join(json.dumps(name) for name in names[start:start + SEARCH_NAMES])
            query = urllib.parse.urlencode({"query": f"resource_type:Group AND display_name:({quoted})"})
            for group in self.client.pages(f"{API}/search/query?{query}"):
                if group.get("display_name") in names and f"/domains/{DOMAIN}/" in (group.get("path") or ""):
                    found[group["display_name"]] = group["id"]
        missing = [name for name in names if name not in found]
        if missing:
            said = f"NSX-T at {self.host} has no group {', '.join(repr(m) for m in missing)} in domain '{DOMAIN}'"
            if not missing_ok:
                raise CloudError(f"vm_type nsxt.ns_groups: {said}")
            log.info("create_vm: %s (Policy API); the VM joins those there", said)
        return found

    def pools(self) -> list[dict[str, Any]]:
        return self.client.pages(f"{API}/infra/lb-pools")

    def external_id(self, vm_cid: VmCid, wait: float = DISCOVERY_SECONDS) -> str | None:
        """NSX's id of the VM `vm_cid`: with `wait`, once its inventory has it (a WaitTimeout
        after `wait` seconds); without, None when NSX does not see it (a VM on no NSX segment)."""
        query = urllib.parse.urlencode({"query": f"display_name:{vm_cid}"})

        def look() -> waits.Check[str]:
            found = (self.call("GET", f"/infra/realized-state/enforcement-points/default/virtual-machines?{query}")
                     or {}).get("results") or []
            return waits.Check(bool(found), "seen" if found else "not in NSX's inventory yet",
                               found[0].get("external_id") if found else None)

        return discovered(look, what=f"NSX-T at {self.host} to see VM {vm_cid}", wait=wait,
                          channel=self.client.rest.channel)

    # ------------------------------------------------------------ changes

    def join_groups(self, vm_cid: VmCid, group_ids: list[str]) -> None:
        external_id = self.external_id(vm_cid)
        if external_id is None:  # a plan, which waits for nothing
            return
        for group_id in group_ids:
            self.client.changed(f"{API}/infra/domains/{DOMAIN}/groups/{group_id}",
                                lambda group: add_member(group, vm_cid, external_id))
            log.info("create_vm: %s joined NSX-T group %s", vm_cid, group_id)

    def leave_groups(self, vm_cid: VmCid) -> None:
        external_id = self.external_id(vm_cid, wait=0)
        if external_id is None:
            return  # NSX does not see it: no group can hold it
        query = urllib.parse.urlencode({"vm_external_id": external_id})
        for association in self.client.pages(f"{API}/infra/virtual-machine-group-associations?{query}"):
            group_id = (association.get("path") or "").rsplit("/", 1)[-1]
            if group_id:
                self.client.changed(f"{API}/infra/domains/{DOMAIN}/groups/{group_id}",
                                    lambda group: remove_member(group, external_id))

    @staticmethod
    def pool_groups(listed: list[dict[str, Any]], server_pools: list[tuple[str, int | None]]) -> list[str]:
        """The ids of the groups whose members make the dynamic pools among `server_pools` (of
        the pools `listed`)."""
        named = {name for name, _ in server_pools}
        return sorted({pool["member_group"]["group_path"].rsplit("/", 1)[-1] for pool in listed
                       if pool.get("display_name") in named and (pool.get("member_group") or {}).get("group_path")})

    def join_pools(self, vm_cid: VmCid, ip: str | None, server_pools: list[tuple[str, int | None]]) -> None:
        """Add the VM to each named pool: a static pool gets a member named `vm_cid` (its `ip`,
        on the port; none without an address: `cpi plan`); a dynamic one (whose members are
        a group's) gets the VM in that group."""
        listed = self.pools()
        by_name: dict[str, list[dict[str, Any]]] = {}
        for pool in listed:
            by_name.setdefault(pool.get("display_name") or "", []).append(pool)
        dynamic = self.pool_groups(listed, server_pools)
        if dynamic:
            self.join_groups(vm_cid, dynamic)
        for name, port in server_pools if ip else []:
            for pool_id in [pool["id"] for pool in by_name.get(name, []) if not pool.get("member_group")]:
                member = {"display_name": vm_cid, "ip_address": ip, **({"port": str(port)} if port else {})}

                def add(pool: dict[str, Any], member: dict[str, Any] = member) -> bool:
                    members = pool.setdefault("members", [])
                    if any(m.get("display_name") == vm_cid and m.get("ip_address") == ip for m in members):
                        return False
                    members.append(member)
                    return True

                self.client.changed(f"{API}/infra/lb-pools/{pool_id}", add)

    def leave_pools(self, vm_cid: VmCid, addresses: Callable[[], set[str]]) -> None:
        for pool in self.pools():
            if any(is_mine(m, vm_cid, addresses) for m in pool.get("members") or []):
                def drop(current: dict[str, Any]) -> bool:
                    kept = [m for m in current.get("members") or [] if not is_mine(m, vm_cid, addresses)]
                    changed = len(kept) != len(current.get("members") or [])
                    current["members"] = kept
                    return changed

                self.client.changed(f"{API}/infra/lb-pools/{pool['id']}", drop)

    def tag_ports(self, vm_cid: VmCid, attachments: list[str], metadata: dict[str, str],
                  wait: float = DISCOVERY_SECONDS) -> int:
        """Tag the segment ports of the VM's NICs (their attachment ids, which vSphere shows as
        each NIC's externalId) with `bosh/<key>` for each metadata key; how many were tagged.
        A port NSX has not realized yet is waited for, within `wait`."""
        tagged = 0
        for attachment in attachments:
            query = urllib.parse.urlencode({"query": f"resource_type:SegmentPort AND attachment.id:{attachment}"})

            def look(query: str = query) -> waits.Check[str]:
                found = (self.call("GET", f"/search/query?{query}") or {}).get("results") or []
                path = found[0].get("path") if found else None
                return waits.Check(bool(path), "found" if path else "not realized yet", path)

            port = discovered(look, what=f"NSX-T at {self.host} to show the segment port of {vm_cid}'s NIC "
                              f"{attachment}", wait=wait, channel=self.client.rest.channel)
            if port is None:
                continue
            self.client.changed(API + port, lambda current: bosh_tags(current, metadata), method="PATCH")
            tagged += 1
        return tagged


def add_member(group: dict[str, Any], vm_cid: VmCid, external_id: str) -> bool:
    """Put `external_id` in the group's VirtualMachine ExternalIDExpressions, as the official
    CPI does; False when it is there already."""
    expressions = group.setdefault("expression", [])
    holders = [e for e in expressions if e.get("resource_type") == "ExternalIDExpression"
               and e.get("member_type") == "VirtualMachine"]
    if any(external_id in (e.get("external_ids") or []) for e in holders):
        return False
    room = next((e for e in holders if len(e.get("external_ids") or []) < MAX_IDS), None)
    if room is not None:
        room.setdefault("external_ids", []).append(external_id)
        return True
    if expressions:
        named = sum(1 for e in expressions if e.get("resource_type") == "ConjunctionOperator"
                    and str(e.get("id", "")).startswith(f"conjunction-{vm_cid}"))
        expressions.append({"resource_type": "ConjunctionOperator", "conjunction_operator": "OR",
                            "id": f"conjunction-{vm_cid}-{named}"})
    expressions.append({"resource_type": "ExternalIDExpression", "member_type": "VirtualMachine",
                        "external_ids": [external_id]})
    return True


def remove_member(group: dict[str, Any], external_id: str) -> bool:
    """Take `external_id` out of the group's expressions (an expression left empty goes,
    with the OR beside it); False when it was not there."""
    expressions = group.get("expression") or []
    for index, expression in enumerate(expressions):
        ids = expression.get("external_ids") or []
        if expression.get("resource_type") != "ExternalIDExpression" or external_id not in ids:
            continue
        ids.remove(external_id)
        if not ids:
            del expressions[index]
            beside = index - 1 if index > 0 else 0
            if beside < len(expressions) and expressions[beside].get("resource_type") == "ConjunctionOperator":
                del expressions[beside]
        return True
    return False
