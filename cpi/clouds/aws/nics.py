"""A VM's network interfaces, as bosh-aws-cpi groups them (#22).

Manual networks with the same `nic_group` (by default each network is its own group)
share one interface: an IPv4 and an IPv6 network on one interface is dual stack, and a
network whose `prefix` is shorter than a host's (/28 of IPv4, /80 of IPv6) is a prefix
delegated to its group's interface. The first dynamic network gets an interface of its
own, after the manual groups. Device indexes follow that order, so a vip network's
`nic_group` names the interface its Elastic IP goes to.

One interface is described inside RunInstances (no request of its own, nothing to leak).
Several need their MAC addresses in the agent's settings before the VM boots, so each is
made first (CreateNetworkInterface, tagged like the VM so a leftover can be attributed),
handed to RunInstances by ID, and marked delete-on-termination as soon as it is attached.
"""

from __future__ import annotations

import ipaddress
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from cpi import retry, waits
from cpi.errors import VMCreationFailed
from cpi.models import Network
from cpi.validation import parse

from . import errors, tags
from .props import NetworkCloudProperties, VipCloudProperties
from .session import Aws

log = logging.getLogger("cpi.clouds.aws")

#: Host prefixes: a network whose prefix is one of these is an address, not a delegation.
HOST_PREFIX = {4: 32, 6: 128}
#: How long a request that fixes an address keeps trying while a VM going away still holds it.
IP_IN_USE_BUDGET = 180.0
#: How long deleting an interface keeps trying while the VM it was attached to goes away.
DETACH_BUDGET = 300.0


@dataclass
class NicGroup:
    """The networks of one interface, and what the interface gets from them."""

    name: str
    kind: str  # manual or dynamic
    subnet: str
    networks: list[str] = field(default_factory=list)
    ipv4: str | None = None
    ipv6: str | None = None
    ipv4_prefix: str | None = None
    ipv6_prefix: str | None = None

    def spec(self) -> dict[str, Any]:
        """The interface's addresses in the shape RunInstances' NetworkInterfaces and
        CreateNetworkInterface share."""
        spec: dict[str, Any] = {"SubnetId": self.subnet}
        if self.ipv4:
            spec["PrivateIpAddress"] = self.ipv4
        if self.ipv6:
            spec["Ipv6Addresses"] = [{"Ipv6Address": self.ipv6}]
        if self.ipv4_prefix:
            spec["Ipv4Prefixes"] = [{"Ipv4Prefix": self.ipv4_prefix}]
        if self.ipv6_prefix:
            spec["Ipv6Prefixes"] = [{"Ipv6Prefix": self.ipv6_prefix}]
        return spec


@dataclass
class NetworkPlan:
    groups: list[NicGroup]
    properties: dict[str, NetworkCloudProperties]
    vip_name: str | None = None
    vip: Network | None = None
    vip_device_index: int = 0

    @property
    def subnet(self) -> str:
        """The primary interface's subnet (device index 0)."""
        return self.groups[0].subnet

    @property
    def security_groups(self) -> list[str]:
        """Every network's groups, in order, each once: the VM's when its vm_type names none."""
        found: list[str] = []
        for props in self.properties.values():
            found.extend(props.security_groups or [])
        return list(dict.fromkeys(found))

    @property
    def own_interfaces(self) -> bool:
        """Whether interfaces are made before the VM (several: their MACs go in its settings)."""
        return len(self.groups) > 1


def plan(networks: dict[str, Network], *, strict: bool) -> NetworkPlan:
    manual = [(name, net) for name, net in networks.items() if net.type == "manual"]
    dynamic = [(name, net) for name, net in networks.items() if net.type == "dynamic"]
    vips = [(name, net) for name, net in networks.items() if net.type == "vip"]
    if not manual and not dynamic:
        raise VMCreationFailed("a VM needs a manual or dynamic network (its interface); got none", ok_to_retry=False)
    if len(dynamic) > 1:
        raise VMCreationFailed(
            f"at most one dynamic network per VM (EC2 gives it the VM's own interface); got "
            f"{', '.join(n for n, _ in dynamic)}", ok_to_retry=False)
    if len(vips) > 1:
        raise VMCreationFailed(
            f"at most one vip network (Elastic IP) per VM; got {', '.join(n for n, _ in vips)}", ok_to_retry=False)
    properties = {name: parse(NetworkCloudProperties, net.cloud_properties, f"network '{name}' cloud_properties",
                               strict=strict)
                  for name, net in [*manual, *dynamic]}
    grouped: dict[str, list[tuple[str, Network]]] = {}
    for name, net in manual:
        grouped.setdefault(_group_name(net, name), []).append((name, net))
    groups = [_manual_group(group, members, properties) for group, members in grouped.items()]
    for name, _net in dynamic:
        groups.append(NicGroup(name=name, kind="dynamic", subnet=properties[name].subnet, networks=[name]))
    found = NetworkPlan(groups=groups, properties=properties)
    if vips:
        found.vip_name, found.vip = vips[0]
        parse(VipCloudProperties, found.vip.cloud_properties, f"network '{found.vip_name}' cloud_properties",
              strict=strict)
        if not found.vip.ip:
            raise VMCreationFailed(f"vip network '{found.vip_name}' has no ip (the Elastic IP)", ok_to_retry=False)
        found.vip_device_index = _vip_index(found.vip, found.vip_name, groups)
    return found


def _group_name(net: Network, name: str) -> str:
    # the director writes it as a string or a number (0 and "0" are one group)
    return name if net.nic_group is None else str(net.nic_group)


def _manual_group(name: str, members: list[tuple[str, Network]],
                  properties: dict[str, NetworkCloudProperties]) -> NicGroup:
    subnets = list(dict.fromkeys(properties[n].subnet for n, _ in members))
    if len(subnets) != 1:
        raise VMCreationFailed(
            f"the networks of nic_group '{name}' ({', '.join(n for n, _ in members)}) are in different subnets "
            f"({', '.join(subnets)}): one interface is in one subnet", ok_to_retry=False)
    group = NicGroup(name=name, kind="manual", subnet=subnets[0], networks=[n for n, _ in members])
    for network_name, net in members:
        if not net.ip:
            continue
        version = ipaddress.ip_address(net.ip).version
        delegated = net.prefix is not None and str(net.prefix).strip() != str(HOST_PREFIX[version])
        if delegated:
            _check_prefix(network_name, net.ip, net.prefix, version)
            slot = "ipv4_prefix" if version == 4 else "ipv6_prefix"
            value = f"{net.ip}/{net.prefix}"
        else:
            slot = "ipv4" if version == 4 else "ipv6"
            value = net.ip
        if getattr(group, slot) is not None:
            raise VMCreationFailed(
                f"nic_group '{name}' has two IPv{version} {'prefixes' if delegated else 'addresses'} "
                f"({getattr(group, slot)} and {value}): an interface gets one of each", ok_to_retry=False)
        setattr(group, slot, value)
    if group.ipv4 is None and group.ipv6 is None:
        raise VMCreationFailed(
            f"nic_group '{name}' has no address of its own: a prefix network ({', '.join(group.networks)}) can only "
            "share the interface of a network with an address (give it that network's nic_group)", ok_to_retry=False)
    return group


def _check_prefix(network_name: str, ip: str, prefix: str | int | None, version: int) -> None:
    try:
        ipaddress.ip_network(f"{ip}/{prefix}", strict=True)
    except ValueError as exc:
        raise VMCreationFailed(f"network '{network_name}': {ip}/{prefix} is not a prefix ({exc})",
                               ok_to_retry=False) from None


def _vip_index(vip: Network, vip_name: str, groups: list[NicGroup]) -> int:
    if vip.nic_group is None:
        return 0
    wanted = str(vip.nic_group)
    for index, group in enumerate(groups):
        if group.kind == "manual" and group.name == wanted:
            return index
    raise VMCreationFailed(
        f"vip network '{vip_name}': nic_group '{wanted}' is not the nic_group of any manual network of this VM "
        f"(they are: {', '.join(g.name for g in groups if g.kind == 'manual') or 'none'})", ok_to_retry=False)


def ip_in_use(exc: BaseException) -> retry.Verdict:
    """A fixed address still held by a VM that is going away: worth waiting for."""
    if errors.code(exc) == "InvalidIPAddress.InUse":
        return retry.Verdict(retry.Kind.TRANSIENT, "InvalidIPAddress.InUse")
    return retry.PERMANENT


class Interfaces:
    """The interfaces one create_vm makes before its VM, by device index; none for a VM
    of one interface, which RunInstances makes itself."""

    def __init__(self, aws: Aws, timeout: float) -> None:
        self.aws = aws
        self.timeout = timeout  # vm_wait_timeout
        self.made: list[tuple[NicGroup, dict[str, Any]]] = []

    def make(self, found: NetworkPlan, group_ids: list[str], create_tags: dict[str, str]) -> None:
        for group in found.groups:
            params: dict[str, Any] = {**group.spec(), "Description": f"bosh nic_group {group.name}"}
            if group_ids:
                params["Groups"] = group_ids
            specs = tags.specifications(create_tags, ("network-interface",))
            if specs:
                params["TagSpecifications"] = specs

            def create(params: dict[str, Any] = params) -> dict[str, Any]:
                # a token per attempt: a resent request is answered with the same interface
                attempt = {**params, "ClientToken": str(uuid.uuid4())}
                return self.aws.ec2("CreateNetworkInterface", **attempt)["NetworkInterface"]

            interface = retry.call(create, classify=ip_in_use, what="CreateNetworkInterface (fixed IP still in use)",
                                   budget=IP_IN_USE_BUDGET)
            self.made.append((group, interface))
            log.info("made interface %s (%s) for nic_group %s in %s", interface["NetworkInterfaceId"],
                     interface.get("MacAddress"), group.name, group.subnet)
        self._wait_available()

    def _wait_available(self) -> None:
        wanted = [doc["NetworkInterfaceId"] for _, doc in self.made]

        def check() -> waits.Check:
            found = self.aws.ec2("DescribeNetworkInterfaces", NetworkInterfaceIds=wanted)["NetworkInterfaces"]
            pending = [i["NetworkInterfaceId"] for i in found if i.get("Status") != "available"]
            return waits.Check(not pending, f"{', '.join(pending)} not available yet" if pending else "available")

        self.aws.channel.until(check, what="network interfaces to be available", timeout=self.timeout,
                               setting="vm_wait_timeout", schedule=waits.Schedule(first=0.25, factor=2.0, cap=2.0),
                               check_first=True)

    def associate_public_ips(self) -> None:
        """auto_assign_public_ip for a VM of several interfaces: EC2 gives none at launch then."""
        for _, doc in self.made:
            self.aws.ec2("ModifyNetworkInterfaceAttribute", NetworkInterfaceId=doc["NetworkInterfaceId"],
                         AssociatePublicIpAddress=True)

    def with_mac(self, name: str, network: Network) -> Network:
        """A manual network of a made interface with that interface's MAC, by which the agent
        tells the VM's interfaces apart."""
        if network.type != "manual":
            return network
        for group, doc in self.made:
            if name in group.networks:  # no MacAddress: a plan's imagined interface, whose MAC is open
                return Network.model_validate({**network.wire(), "mac": doc.get("MacAddress")})
        return network

    def attachments(self) -> list[dict[str, Any]]:
        return [{"DeviceIndex": index, "NetworkInterfaceId": doc["NetworkInterfaceId"]}
                for index, (_, doc) in enumerate(self.made)]

    def at(self, device_index: int) -> str | None:
        return self.made[device_index][1]["NetworkInterfaceId"] if device_index < len(self.made) else None

    def delete_on_termination(self) -> None:
        """From here on the interfaces go with the VM, as the ones RunInstances makes do."""
        if not self.made:
            return
        wanted = [doc["NetworkInterfaceId"] for _, doc in self.made]
        attachments: dict[str, str | None]
        planned = self.aws.channel.plan
        if planned is not None:  # imagined interfaces: nothing to read back, the same changes
            attachments = {interface_id: planned.placeholder("eni-attach-") for interface_id in wanted}
        else:
            found = self.aws.ec2("DescribeNetworkInterfaces", NetworkInterfaceIds=wanted)["NetworkInterfaces"]
            attachments = {i["NetworkInterfaceId"]: (i.get("Attachment") or {}).get("AttachmentId") for i in found}
        for interface_id, attachment_id in attachments.items():
            if not attachment_id:
                raise VMCreationFailed(f"interface {interface_id} is not attached to the VM", ok_to_retry=True)
            self.aws.ec2("ModifyNetworkInterfaceAttribute", NetworkInterfaceId=interface_id,
                         Attachment={"AttachmentId": attachment_id, "DeleteOnTermination": True})

    def delete(self) -> str:
        """After a failed create_vm: each interface it made, once its VM (if any) let go of
        it. Returns what could not be deleted, for the call's error ("" when all went)."""
        problems = []
        for _, doc in self.made:
            interface_id = doc["NetworkInterfaceId"]
            try:
                self.aws.ec2("DeleteNetworkInterface", NetworkInterfaceId=interface_id, budget=DETACH_BUDGET,
                             also=lambda c: c == "InvalidNetworkInterface.InUse")
                log.info("deleted interface %s", interface_id)
            except Exception as exc:  # noqa: BLE001 - reported in the call's error, never hidden
                if errors.is_not_found(exc):
                    continue  # it went with its VM
                log.error("could not delete interface %s: %s", interface_id, errors.summary(exc))
                problems.append(f"{interface_id} ({errors.summary(exc)})")
        self.made = []
        return f"; interface(s) {', '.join(problems)} not deleted: delete them by hand" if problems else ""
