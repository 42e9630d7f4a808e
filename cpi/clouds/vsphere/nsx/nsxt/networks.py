"""Managed networks (create_network, delete_network) through NSX-T's Manager API, as the
official CPI makes them (props.ManagedNetworkCloudProperties says what is made).

- Everything create_network needs to know is checked before anything is made: the
  definition, the tier-0 router's edge cluster, a switch of the same name. What it makes is
  undone, newest first, when a later step fails (the official CPI leaves the tier-0 router's
  port behind then).
- delete_network takes the network apart router first and switch last, so that a
  delete_network cut short leaves the switch, the network's cid, for the next one to find
  and finish with; a switch already gone is a network deleted. It refuses, changing
  nothing, a switch whose tier-1 router serves other switches, or with more than one port
  in use (a VM still on it).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Any

from cpi.errors import CloudError
from cpi.validation import parse

from ...props import ManagedNetworkCloudProperties
from .client import Client

log = logging.getLogger("cpi.clouds.vsphere")

API = "/api/v1"
#: the tag scope of the switch that names the IP block subnet it was given
SUBNET_TAG = "bosh_cpi_subnet_id"
DEFAULT_NETMASK_BITS = 24


def _parse(definition: dict[str, Any], *,
           strict: bool) -> tuple[ManagedNetworkCloudProperties, str | None, str | None, int]:
    """(cloud_properties, range, gateway, prefix length) of a network definition; CloudError
    for one that cannot be made."""
    raw = definition.get("cloud_properties")
    if not isinstance(raw, dict) or not raw:
        raise CloudError("create_network: the network definition needs cloud_properties (t0_router_id, "
                         "transport_zone_id, ...)")
    props = parse(ManagedNetworkCloudProperties, raw, "network cloud_properties", strict=strict)
    given_range, gateway = definition.get("range") or None, definition.get("gateway") or None
    if given_range is not None:
        if gateway is None:
            raise CloudError("create_network: a network definition with a range needs its gateway")
        try:
            network = ipaddress.ip_network(str(given_range), strict=False)
            address = ipaddress.ip_interface(str(gateway))
        except ValueError as exc:
            raise CloudError(f"create_network: range or gateway is not an address: {exc}") from None
        if address.network.num_addresses > 1 and "/" in str(gateway):
            raise CloudError(f"create_network: gateway {gateway} is a network, not one address")
        return props, str(network), str(address.ip), network.prefixlen
    if not props.ip_block_id:
        raise CloudError("create_network: without a range, cloud_properties need ip_block_id to allocate the "
                         "subnet from")
    if gateway is not None:
        raise CloudError("create_network: without a range, give no gateway: the allocated subnet's first address is")
    bits = definition.get("netmask_bits")
    bits = DEFAULT_NETMASK_BITS if bits in (None, "") else bits
    if isinstance(bits, bool) or not str(bits).isdigit() or not 1 <= int(bits) <= 32:
        raise CloudError(f"create_network: netmask_bits must be a whole number from 1 to 32, not {bits!r}")
    return props, None, None, int(bits)


class Networks:
    """Managed networks of one NSX-T manager."""

    def __init__(self, client: Client, *, strict: bool):
        self.client = client
        self.strict = strict  # the call's CallContext.strict, for a key no model knows

    def _get(self, path: str) -> Any:
        return self.client.call("GET", API + path)

    def _made(self, path: str, body: dict[str, Any], what: str) -> str:
        """POST `body` to make an object; its id (a placeholder under `cpi plan`)."""
        document = self.client.call("POST", API + path, body)
        if document is None:  # withheld by `cpi plan`
            return f"(planned {what})"
        log.info("create_network: made %s %s", what, document["id"])
        return str(document["id"])

    # ------------------------------------------------------------ create_network

    def create(self, definition: dict[str, Any]) -> list[Any]:
        props, given_range, gateway, prefix = _parse(definition, strict=self.strict)
        t0 = self._get(f"/logical-routers/{props.t0_router_id}")
        if t0 is None:
            raise CloudError(f"create_network: NSX-T has no logical router {props.t0_router_id} (t0_router_id)")
        edge_cluster = t0.get("edge_cluster_id")
        if not edge_cluster:
            raise CloudError(f"create_network: router {props.t0_router_id} has no edge cluster")
        if props.switch_name and any(switch.get("display_name") == props.switch_name
                                     for switch in self.client.pages(f"{API}/logical-switches")):
            raise CloudError(f"create_network: NSX-T has a logical switch named {props.switch_name!r} already; "
                             "choose another switch_name")
        undo: list[tuple[str, Callable[[], None]]] = []
        try:
            subnet = None
            if given_range is None:
                subnet = self.client.call("POST", f"{API}/pools/ip-subnets",
                                          {"block_id": props.ip_block_id, "size": 2 ** (32 - prefix)})
                if subnet is not None:
                    undo.append(("the IP block subnet", lambda: self._delete(f"/pools/ip-subnets/{subnet['id']}")))
                    network = ipaddress.ip_network(subnet["cidr"])
                    given_range, gateway = str(network), str(network.network_address + 1)
                    log.info("create_network: subnet %s from IP block %s", given_range, props.ip_block_id)
            t1 = self._made("/logical-routers", {"resource_type": "LogicalRouter", "router_type": "TIER1",
                                                 "edge_cluster_id": edge_cluster,
                                                 **({"display_name": props.t1_name} if props.t1_name else {})},
                            "tier-1 router")
            undo.append(("the tier-1 router", lambda: self._delete(f"/logical-routers/{t1}?force=true")))
            self._advertise(t1)
            t0_port = self._made("/logical-router-ports", {"resource_type": "LogicalRouterLinkPortOnTIER0",
                                                           "logical_router_id": props.t0_router_id},
                                 "tier-0 router port")
            undo.append(("the tier-0 router's port",
                         lambda: self._delete(f"/logical-router-ports/{t0_port}?force=true")))
            self._made("/logical-router-ports", {
                "resource_type": "LogicalRouterLinkPortOnTIER1", "logical_router_id": t1,
                "linked_logical_router_port_id": {"target_id": t0_port, "target_type": "LogicalRouterLinkPortOnTIER0"}},
                "tier-1 router's link port")
            tags = [{"scope": SUBNET_TAG, "tag": subnet["id"]}] if subnet else []
            switch = self.client.call("POST", f"{API}/logical-switches", {
                "resource_type": "LogicalSwitch", "admin_state": "UP", "transport_zone_id": props.transport_zone_id,
                "replication_mode": "MTEP", **({"display_name": props.switch_name} if props.switch_name else {}),
                **({"tags": tags} if tags else {})}) or {"id": "(planned logical switch)"}
            switch_id = str(switch["id"])
            undo.append(("the logical switch",
                         lambda: self._delete(f"/logical-switches/{switch_id}?cascade=true&detach=true")))
            port = self._made("/logical-ports", {"resource_type": "LogicalPort", "admin_state": "UP",
                                                 "logical_switch_id": switch_id}, "logical port")
            self._made("/logical-router-ports", {
                "resource_type": "LogicalRouterDownLinkPort", "logical_router_id": t1,
                "linked_logical_switch_port_id": {"target_id": port, "target_type": "LogicalPort"},
                "subnets": [{"ip_addresses": [gateway], "prefix_length": prefix}]}, "tier-1 router's downlink port")
        except BaseException as exc:
            self._undo(undo, exc)
            raise
        log.info("create_network: logical switch %s on tier-1 router %s, gateway %s/%d", switch_id, t1, gateway,
                 prefix)
        made: dict[str, Any] = {"range": given_range, "gateway": gateway, "reserved": []} if subnet else {}
        return [switch_id, made, {"name": switch.get("display_name") or switch_id}]

    def _advertise(self, router: str) -> None:
        """The tier-1 router advertises its connected networks, so the tier-0 router routes to them."""
        def change(config: dict[str, Any]) -> bool:
            if config.get("enabled") and config.get("advertise_nsx_connected_routes"):
                return False
            config.update(enabled=True, advertise_nsx_connected_routes=True)
            return True

        if not router.startswith("(planned"):
            self.client.changed(f"{API}/logical-routers/{router}/routing/advertisement", change)

    def _delete(self, path: str) -> None:
        self.client.call("DELETE", API + path)

    @staticmethod
    def _undo(undo: list[tuple[str, Callable[[], None]]], cause: BaseException) -> None:
        for what, step in reversed(undo):
            try:
                step()
                log.info("create_network: removed %s it had made", what)
            except Exception as exc:  # noqa: BLE001 - the failure that stopped the creation is what is reported
                log.error("create_network: %s it made could not be removed (%s) after: %s", what, exc, cause)

    # ------------------------------------------------------------ delete_network

    def delete(self, switch_id: str) -> None:
        switch = self._get(f"/logical-switches/{switch_id}")
        if switch is None:
            log.info("delete_network: NSX-T has no logical switch %s (deleted before?)", switch_id)
            return
        links = (self._get(f"/logical-router-ports?logical_switch_id={switch_id}") or {}).get("results") or []
        routers = sorted({port["logical_router_id"] for port in links})
        if len(routers) > 1:
            raise CloudError(f"delete_network: switch {switch_id} is attached to {len(routers)} routers "
                             f"({', '.join(routers)}); a network this CPI made has one")
        ports = (self._get(f"/logical-ports?logical_switch_id={switch_id}") or {}).get("results") or []
        up = [port["id"] for port in ports
              if ((self._get(f"/logical-ports/{port['id']}/status") or {}).get("status")) == "UP"]
        if len(up) > 1:
            raise CloudError(f"delete_network: switch {switch_id} has {len(up)} ports in use (VMs still on it?); "
                             "a network this CPI made has one, its router's")
        if routers:
            self._delete_router(routers[0], switch_id, links)
        for tag in switch.get("tags") or []:
            if tag.get("scope") == SUBNET_TAG:
                self._delete(f"/pools/ip-subnets/{tag['tag']}")
                log.info("delete_network: released IP block subnet %s", tag["tag"])
        self._delete(f"/logical-switches/{switch_id}?cascade=true&detach=true")
        log.info("delete_network: deleted logical switch %s", switch_id)

    def _delete_router(self, router: str, switch_id: str, links: list[dict[str, Any]]) -> None:
        """The tier-1 router (with its ports) and its port on the tier-0 router; refused when
        it serves another switch too."""
        ours = {port["id"] for port in links}
        ports = (self._get(f"/logical-router-ports?logical_router_id={router}") or {}).get("results") or []
        others = [port["id"] for port in ports if port.get("resource_type") == "LogicalRouterDownLinkPort"
                  and port["id"] not in ours and (port.get("linked_logical_switch_port_id") or {}).get("is_valid")]
        if others:
            raise CloudError(f"delete_network: tier-1 router {router} of switch {switch_id} serves other switches "
                             f"too (ports {', '.join(others)}), which this CPI did not make")
        for port in ports:
            linked = port.get("linked_logical_router_port_id") or {}
            if port.get("resource_type") == "LogicalRouterLinkPortOnTIER1" and \
                    linked.get("target_type") == "LogicalRouterLinkPortOnTIER0":
                self._delete(f"/logical-router-ports/{linked['target_id']}?force=true")
        self._delete(f"/logical-routers/{router}?force=true")
        log.info("delete_network: deleted tier-1 router %s", router)
