"""Networks of a VM: the plan (which BOSH network is what), Neutron ports, security
groups and floating IPs.

Every manual network gets a port created before the server, holding the fixed IP, the
security groups and any allowed address pairs; so does a dynamic network with a `net_id`.
Nova boots on those ports, the agent gets their MACs, and delete_vm / a failed create_vm
delete them (Nova does not delete ports it did not create). A port that still holds the
wanted IP but belongs to no device (left by a crashed CPI or a deleted director,
openstack-cpi #114, bosh #1991) is deleted and the create tried again once.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from cpi.cids import VmCid
from cpi.errors import VMCreationFailed
from cpi.models import Network
from cpi.validation import parse

from . import errors
from .props import (
    NetworkCloudProperties,
    OpenStackProperties,
    VipCloudProperties,
    looks_like_uuid,
)
from .session import OpenStack

log = logging.getLogger("cpi.clouds.openstack")


@dataclass
class PlannedNetwork:
    name: str
    network: Network
    properties: NetworkCloudProperties
    port: dict[str, Any] | None = None  # the port made for it


@dataclass
class NetworkPlan:
    networks: list[PlannedNetwork] = field(default_factory=list)
    vip_name: str | None = None
    vip: Network | None = None

    @property
    def gateway(self) -> PlannedNetwork:
        """The network the default route (and a floating IP) goes to."""
        return next((n for n in self.networks if "gateway" in (n.network.default or [])), self.networks[0])

    @property
    def ports(self) -> list[dict[str, Any]]:
        return [n.port for n in self.networks if n.port is not None]

    @property
    def security_groups(self) -> list[str]:
        """The networks' own security groups (in order, without repeats)."""
        groups: list[str] = []
        for planned in self.networks:
            for group in planned.properties.security_groups or []:
                if group not in groups:
                    groups.append(group)
        return groups


def plan(networks: dict[str, Network], properties: OpenStackProperties, *, strict: bool = False) -> NetworkPlan:
    """Check the networks a create_vm asks for and say what each becomes (`strict`: the
    call's CallContext.strict, for a key no model knows)."""
    result = NetworkPlan()
    dynamic = 0
    for name, network in networks.items():
        if network.type == "vip":
            if result.vip is not None:
                raise VMCreationFailed(
                    f"at most one vip network (floating IP) per VM; got {result.vip_name} and {name}", ok_to_retry=False
                )
            parse(VipCloudProperties, network.cloud_properties, f"network '{name}' cloud_properties", strict=strict)
            if not network.ip:
                raise VMCreationFailed(f"vip network '{name}' has no ip (the floating IP)", ok_to_retry=False)
            result.vip_name, result.vip = name, network
            continue
        props = parse(NetworkCloudProperties, network.cloud_properties, f"network '{name}' cloud_properties",
                      strict=strict)
        if network.type == "manual":
            if not props.net_id:
                raise VMCreationFailed(f"manual network '{name}' needs cloud_properties.net_id", ok_to_retry=False)
            if not network.ip:
                raise VMCreationFailed(f"manual network '{name}' has no ip", ok_to_retry=False)
        else:
            dynamic += 1
        result.networks.append(PlannedNetwork(name, network, props))
    if not result.networks:
        raise VMCreationFailed("a VM needs a manual or dynamic network (a vip network alone has no interface)",
                               ok_to_retry=False)
    if dynamic > 1:
        raise VMCreationFailed("at most one dynamic network per VM", ok_to_retry=False)
    if len(result.networks) > 1 and (properties.use_dhcp or not properties.config_drive):
        names = ", ".join(n.name for n in result.networks)
        raise VMCreationFailed(
            f"several networks ({names}) need use_dhcp: false and a config_drive (the agent configures each "
            "interface from the settings, matching them by MAC)",
            ok_to_retry=False,
        )
    unported = [n for n in result.networks if not n.properties.net_id]
    if unported and len(result.networks) > 1:
        raise VMCreationFailed(
            f"dynamic network '{unported[0].name}' needs cloud_properties.net_id when the VM has several networks",
            ok_to_retry=False,
        )
    return result


# ---------------------------------------------------------------- security groups


def resolve_security_groups(api: OpenStack, wanted: list[str]) -> list[str]:
    """Names or IDs → IDs. IDs are taken as they are (Neutron checks them when the port is
    made); names cost one request for all of them. A name several groups share is resolved
    to the one in this project."""
    names = [g for g in wanted if not looks_like_uuid(g)]
    if not names:
        return _unique(wanted)
    query = urllib.parse.urlencode([("name", n) for n in names] + [("fields", f) for f in ("id", "name", "project_id")])
    found = api.get("network", f"/security-groups?{query}")["security_groups"]
    by_name: dict[str, list[dict]] = {}
    for group in found:
        by_name.setdefault(group["name"], []).append(group)
    missing = [n for n in names if n not in by_name]
    if missing:
        raise VMCreationFailed(f"security group(s) not found: {', '.join(missing)}", ok_to_retry=False)
    ids = []
    for entry in wanted:
        if entry not in by_name:
            ids.append(entry)
            continue
        groups = by_name[entry]
        if len(groups) > 1:
            own = [g for g in groups if g.get("project_id") == api.project_id]
            if len(own) != 1:
                raise VMCreationFailed(
                    f"security group name '{entry}' is ambiguous ({len(groups)} groups): use its ID", ok_to_retry=False
                )
            groups = own
        ids.append(groups[0]["id"])
    return _unique(ids)


# ---------------------------------------------------------------- ports


def _check_vrrp_ports(api: OpenStack, addresses: list[str], network: str) -> None:
    """Each allowed address pair names the address of a port that exists (the VRRP port),
    as the official CPI checks before it makes the VM's port."""
    for address in addresses:
        query = urllib.parse.urlencode({"fixed_ips": f"ip_address={address}"})
        found = api.get("network", f"/ports?{query}")["ports"]
        if not found:
            raise VMCreationFailed(f"network '{network}': no port holds the VRRP address {address} that "
                                   "allowed_address_pairs names (vrrp_port_check: false skips this check)",
                                   ok_to_retry=False)


def create_port(api: OpenStack, planned: PlannedNetwork, *, name: str, origin: dict[str, str],
                security_group_ids: list[str], address_pairs: list[str]) -> dict[str, Any]:
    """The port of one network: the fixed IP of a manual network, the security groups, the
    allowed address pairs. A stale port holding the IP is removed and the create repeated once.
    Its description names the agent and director (`origin`) from the create on: Neutron
    takes tags only in a second request, which a killed call may never send."""
    description = "BOSH VM port " + " ".join(f"{key}={value}" for key, value in origin.items())
    body: dict[str, Any] = {"network_id": planned.properties.net_id, "name": name, "description": description[:255]}
    if planned.network.type == "manual":
        body["fixed_ips"] = [{"ip_address": planned.network.ip}]
        if address_pairs:
            if planned.properties.vrrp_port_check:
                _check_vrrp_ports(api, address_pairs, planned.name)
            body["allowed_address_pairs"] = [{"ip_address": ip} for ip in address_pairs]
    if security_group_ids:
        body["security_groups"] = security_group_ids
    try:
        return _post_port(api, body, planned)
    except errors.ApiError as exc:
        net_id, ip = planned.properties.net_id, planned.network.ip  # both set on a manual network
        taken = exc.status == 409 and exc.mentions("IpAddressAlreadyAllocated", "already allocated")
        if not (planned.network.type == "manual" and taken and net_id and ip):
            raise
    if not _remove_stale_ports(api, net_id, ip, planned.name):
        raise VMCreationFailed(f"IP {planned.network.ip} of network '{planned.name}' is already in use",
                               ok_to_retry=False)
    return _post_port(api, body, planned)


def _named_port(api: OpenStack, net_id: str, name: str) -> dict[str, Any] | None:
    """The port this call made, if Neutron made it (names are unique: vm-<uuid>-<network>)."""
    query = urllib.parse.urlencode({"network_id": net_id, "name": name})
    found = api.get("network", f"/ports?{query}")["ports"]
    return found[0] if found else None


def _post_port(api: OpenStack, body: dict[str, Any], planned: PlannedNetwork) -> dict[str, Any]:
    try:
        port = api.create("network", "/ports", {"port": body}, key="port",
                          find=lambda: _named_port(api, body["network_id"], body["name"]))
    except errors.ApiError as exc:
        if exc.status == 404 and exc.mentions("network"):
            raise VMCreationFailed(
                f"network '{planned.name}': net_id {planned.properties.net_id} not found ({exc.message}); "
                "it must be a Neutron network ID (not a subnet ID) visible to this project",
                ok_to_retry=False,
            ) from None
        if exc.status == 404 and exc.mentions("security group", "securitygroup"):
            raise VMCreationFailed(f"network '{planned.name}': {exc.message}", ok_to_retry=False) from None
        if exc.status in (400, 409) and not exc.mentions("IpAddressAlreadyAllocated", "already allocated"):
            raise VMCreationFailed(f"network '{planned.name}': cannot create its port: {exc.message}",
                                   ok_to_retry=False) from None
        raise
    ips = ", ".join(ip["ip_address"] for ip in port.get("fixed_ips", []))
    log.info("created port %s on network %s (%s, mac %s)", port["id"], planned.properties.net_id, ips or "no IP",
             port.get("mac_address"))
    return port


def _remove_stale_ports(api: OpenStack, net_id: str, ip: str, network_name: str) -> bool:
    """Delete the ports on `net_id` that hold `ip` and belong to no device; False when the
    IP is held by a port in use (which is then named in the log)."""
    query = urllib.parse.urlencode({"network_id": net_id, "fixed_ips": f"ip_address={ip}"})
    holders = api.get("network", f"/ports?{query}")["ports"]
    if not holders:
        return True  # released since the conflict: try again
    in_use = [p for p in holders if p.get("device_id") or p.get("device_owner")]
    if in_use:
        port = in_use[0]
        log.warning("IP %s of network '%s' is held by port %s (device %s, owner %s)", ip, network_name, port["id"],
                    port.get("device_id") or "-", port.get("device_owner") or "-")
        return False
    for port in holders:
        log.info("IP %s of network '%s' is held by port %s, which no device uses: deleting it", ip, network_name,
                 port["id"])
        delete_port(api, port["id"])
    return True


def delete_port(api: OpenStack, port_id: str) -> None:
    api.delete("network", f"/ports/{port_id}", ok=(404,))


def server_ports(api: OpenStack, vm_cid: VmCid) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode([("device_id", vm_cid)] + [("fields", f) for f in ("id", "network_id", "fixed_ips",
                                                                                     "mac_address", "device_owner")])
    return api.get("network", f"/ports?{query}")["ports"]


# ---------------------------------------------------------------- floating IPs


def find_floating_ip(api: OpenStack, address: str, vip_name: str) -> dict[str, Any]:
    query = urllib.parse.urlencode({"floating_ip_address": address})
    found = api.get("network", f"/floatingips?{query}")["floatingips"]
    if not found:
        raise VMCreationFailed(
            f"floating IP {address} of vip network '{vip_name}' is not allocated to this project", ok_to_retry=False
        )
    if len(found) > 1:
        raise VMCreationFailed(f"floating IP {address} is ambiguous ({len(found)} matches)", ok_to_retry=False)
    return found[0]


def associate_floating_ip(api: OpenStack, floating_ip: dict[str, Any], port: dict[str, Any]) -> None:
    """Move the floating IP to `port`, first taking it from any other port (a VM that held
    it before, openstack-cpi #169)."""
    address = floating_ip["floating_ip_address"]
    if floating_ip.get("port_id") == port["id"]:
        log.info("floating IP %s is already on port %s", address, port["id"])
        return
    path = f"/floatingips/{floating_ip['id']}"
    if floating_ip.get("port_id"):
        log.info("floating IP %s moves from port %s (fixed IP %s)", address, floating_ip["port_id"],
                 floating_ip.get("fixed_ip_address"))
        api.put("network", path, {"floatingip": {"port_id": None}})
    body: dict[str, Any] = {"port_id": port["id"]}
    fixed = [ip["ip_address"] for ip in port.get("fixed_ips", []) if ":" not in ip["ip_address"]]
    if len(fixed) > 1:
        body["fixed_ip_address"] = fixed[0]
    try:
        api.put("network", path, {"floatingip": body})
    except errors.ApiError as exc:
        if exc.status in (400, 404, 409):
            raise VMCreationFailed(f"cannot associate floating IP {address} with port {port['id']}: {exc.message}",
                                   ok_to_retry=False) from None
        raise
    log.info("associated floating IP %s with port %s", address, port["id"])


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
