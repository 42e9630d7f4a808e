"""NSX-T's Manager API (cpi.json's `nsxt` without `use_policy_api`, the official CPI's
default), for a vm_type's `nsxt`: the VM's logical ports join the NSGroups (`ns_groups`)
and the VM the load balancer pools (`lb.server_pools`) it names, its ports get the VIF type
asked, and the director's instance id as a tag, as the official CPI does.

- A VM is known to NSX by its fabric record (display name = the vm_cid) and, through its
  VIFs, by the logical ports its NICs are attached to; NSX learns of a new VM from the
  vCenter a little later, so create_vm waits for them, bounded and logged.
- NSGroups gain and lose the VM's logical ports as simple expressions (`id` EQUALS the
  port's id), and pools gain and lose members named after the vm_cid, through NSX's member
  actions; an action that meets a concurrent change (409/412) is made again.
- A pool whose members are an NSGroup's (dynamic) gets the VM through that group.
"""

from __future__ import annotations

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

API = "/api/v1"


def _query(**values: str) -> str:
    return urllib.parse.urlencode(values)


class ManagerApi:
    """The Manager API of one NSX-T manager."""

    def __init__(self, client: Client):
        self.client = client
        self.host = client.config.host

    def get(self, path: str) -> Any:
        return self.client.call("GET", API + path) or {}

    # ------------------------------------------------------------ lookups

    def ns_groups(self, names: list[str], *, what: str = "vm_type nsxt.ns_groups") -> dict[str, str]:
        """Display name → id of the NSGroups `names`; CloudError naming those not there."""
        found = {str(group.get("display_name")): str(group["id"]) for group in self.client.pages(f"{API}/ns-groups")
                 if group.get("display_name") in names}
        missing = [name for name in names if name not in found]
        if missing:
            raise CloudError(f"{what}: NSX-T at {self.host} has no NSGroup {', '.join(repr(m) for m in missing)}")
        return found

    def pools(self) -> list[dict[str, Any]]:
        return self.client.pages(f"{API}/loadbalancer/pools")

    @staticmethod
    def pool_groups(listed: list[dict[str, Any]], server_pools: list[tuple[str, int | None]]) -> list[str]:
        """The names of the NSGroups whose members make the dynamic pools among `server_pools`
        (of the pools `listed`)."""
        named = {name for name, _ in server_pools}
        found = {((pool.get("member_group") or {}).get("grouping_object") or {}).get("target_display_name")
                 for pool in listed if pool.get("display_name") in named and pool.get("member_group")}
        return sorted(str(name) for name in found if name)

    def logical_ports(self, vm_cid: VmCid, wait: float = DISCOVERY_SECONDS) -> list[dict[str, Any]]:
        """The logical ports of the VM's NICs: with `wait`, once NSX has them all (WaitTimeout
        after `wait` seconds); without, those NSX has now (none for a VM it does not know)."""

        def look() -> waits.Check[list[dict[str, Any]]]:
            machines = self.get(f"/fabric/virtual-machines?{_query(display_name=vm_cid)}").get("results") or []
            if not machines:
                return waits.Check(False, "not in NSX's inventory yet", [])
            external_ids = {machine.get("external_id") for machine in machines}
            if len(external_ids) > 1:  # NSX keeps copies of a VM for a while after a vMotion
                return waits.Check(False, f"{len(machines)} VMs of that name in NSX's inventory", [])
            vifs = [vif for vif in self.get(f"/fabric/vifs?{_query(owner_vm_id=external_ids.pop())}").get("results")
                    or [] if vif.get("lport_attachment_id")]
            if not vifs:
                return waits.Check(False, "no VIF attached to a logical port yet", [])
            ports = [port for vif in vifs for port in (self.get(
                f"/logical-ports?{_query(attachment_id=vif['lport_attachment_id'])}").get("results") or [])[:1]]
            if len(ports) < len(vifs):
                return waits.Check(False, f"{len(ports)} of {len(vifs)} logical ports", ports)
            return waits.Check(True, f"{len(ports)} logical ports", ports)

        return discovered(look, what=f"NSX-T at {self.host} to show the logical ports of VM {vm_cid}", wait=wait,
                          channel=self.client.rest.channel) or []

    # ------------------------------------------------------------ changes

    @staticmethod
    def _expressions(ports: list[dict[str, Any]]) -> dict[str, Any]:
        return {"members": [{"resource_type": "NSGroupSimpleExpression", "op": "EQUALS",
                             "target_type": port.get("resource_type") or "LogicalPort", "target_property": "id",
                             "value": port["id"]} for port in ports]}

    def join_groups(self, vm_cid: VmCid, ports: list[dict[str, Any]], group_ids: dict[str, str]) -> None:
        for name, group_id in group_ids.items():
            self.client.acted(f"{API}/ns-groups/{group_id}?action=ADD_MEMBERS", self._expressions(ports),
                              f"adding {vm_cid}'s logical ports")
            log.info("create_vm: %s's logical ports joined NSGroup %s (%s)", vm_cid, name, group_id)

    def leave_groups(self, vm_cid: VmCid) -> None:
        ports = self.logical_ports(vm_cid, wait=0)
        ids = {port["id"] for port in ports}
        if not ids:
            return  # NSX knows no port of it: no group can hold it
        for group in self.client.pages(f"{API}/ns-groups"):
            held = [member.get("value") for member in group.get("members") or []
                    if member.get("resource_type") == "NSGroupSimpleExpression"
                    and member.get("target_property") == "id" and member.get("value") in ids]
            if held:
                self.client.acted(f"{API}/ns-groups/{group['id']}?action=REMOVE_MEMBERS",
                                  self._expressions([port for port in ports if port["id"] in held]),
                                  f"removing {vm_cid}'s logical ports")
                log.info("delete_vm: %s's logical ports left NSGroup %s", vm_cid, group.get("display_name"))

    def join_pools(self, vm_cid: VmCid, ip: str, server_pools: list[tuple[str, int | None]]) -> None:
        """Add a member named `vm_cid` (`ip`, on the port) to each static pool named."""
        pools = self.pools()
        for name, port in server_pools:
            for pool in pools:
                if pool.get("display_name") != name or pool.get("member_group"):
                    continue
                members = pool.get("members") or []
                if any(m.get("display_name") == vm_cid and m.get("ip_address") == ip for m in members):
                    continue
                member = {"display_name": vm_cid, "ip_address": ip, **({"port": str(port)} if port else {})}
                self.client.acted(f"{API}/loadbalancer/pools/{pool['id']}?action=ADD_MEMBERS", {"members": [member]},
                                  f"adding {vm_cid} to the pool")
                log.info("create_vm: %s (%s) joined server pool %s", vm_cid, ip, name)

    def leave_pools(self, vm_cid: VmCid, addresses: Callable[[], set[str]]) -> None:
        for pool in self.pools():
            mine = [{"ip_address": m.get("ip_address"), **({"port": m["port"]} if m.get("port") else {})}
                    for m in pool.get("members") or [] if is_mine(m, vm_cid, addresses)]
            if mine:
                self.client.acted(f"{API}/loadbalancer/pools/{pool['id']}?action=REMOVE_MEMBERS", {"members": mine},
                                  f"removing {vm_cid} from the pool")

    def set_vif_type(self, ports: list[dict[str, Any]], vif_type: str) -> None:
        for port in ports:
            def change(current: dict[str, Any]) -> bool:
                attachment = current.get("attachment")
                if not attachment:
                    raise CloudError(f"NSX-T logical port {current.get('id')} has no attachment to set a VIF type on")
                context = attachment.get("context") or {}
                if context.get("vif_type") == vif_type:
                    return False
                attachment["context"] = {**context, "resource_type": "VifAttachmentContext", "vif_type": vif_type}
                return True

            self.client.changed(f"{API}/logical-ports/{port['id']}", change)
            log.info("create_vm: logical port %s has VIF type %s", port["id"], vif_type)

    def tag_ports(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        """The instance id (`bosh/id`, hashed) on each logical port of the VM, as the official
        CPI tags them for NSX's firewall rules."""
        if "id" not in metadata:
            return
        for port in self.logical_ports(vm_cid):
            self.client.changed(f"{API}/logical-ports/{port['id']}",
                                lambda current: bosh_tags(current, {"id": metadata["id"]}))

    def tag_vm(self, vm_cid: VmCid, metadata: dict[str, str]) -> None:
        """`tag_nsx_vm_objects`: the metadata as tags of the VM's record in NSX's inventory."""
        machines = self.get(f"/fabric/virtual-machines?{_query(display_name=vm_cid)}").get("results") or []
        if not machines:
            log.info("set_vm_metadata: NSX-T does not know VM %s: its NSX record is not tagged", vm_cid)
            return
        machine = {"tags": list(machines[0].get("tags") or [])}
        if not bosh_tags(machine, metadata):
            return
        self.client.call("POST", f"{API}/fabric/virtual-machines?action=update_tags",
                         {"external_id": machines[0]["external_id"], "tags": machine["tags"]})

