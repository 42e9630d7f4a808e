"""vm_type `advertised_routes`: route table entries that send a destination to a new VM
(a NAT, VPN or router VM), as the official CPI sets them once the instance is running.

Each route is one CreateRoute; where the table already has a route for the destination
(EC2 answers RouteAlreadyExists) it is pointed at the new VM with ReplaceRoute instead,
so a VM that replaces an older one takes its routes over. Asking first (DescribeRouteTables)
would cost a request more and could still race another writer; a CreateRoute resent after
a lost answer ends the same way.
"""

from __future__ import annotations

import ipaddress
import logging

from cpi.cids import VmCid
from cpi.errors import VMCreationFailed

from . import errors
from .props import AdvertisedRoute
from .session import Aws

log = logging.getLogger("cpi.clouds.aws")


def advertise(aws: Aws, vm_cid: VmCid, routes: list[AdvertisedRoute], interface_id: str | None = None) -> None:
    """Point every route at `vm_cid`, or at its interface `interface_id` when given (a VM
    of several interfaces); a route EC2 refuses fails the call (the caller terminates the
    VM), naming the route."""
    hop = {"NetworkInterfaceId": interface_id} if interface_id else {"InstanceId": vm_cid}
    for route in routes:
        destination = _destination(route.destination)
        target = {"RouteTableId": route.table_id, **destination, **hop}
        try:
            try:
                aws.ec2("CreateRoute", **target)
                action = "added"
            except Exception as exc:
                if errors.code(exc) != "RouteAlreadyExists":
                    raise
                aws.ec2("ReplaceRoute", **target)
                action = "replaced"
        except Exception as exc:
            if errors.code(exc) is None:
                raise
            raise VMCreationFailed(
                f"advertised_routes: cannot send {route.destination} in {route.table_id} to {vm_cid}: "
                f"{errors.summary(exc)}",
                ok_to_retry=errors.classifier()(exc).retryable,
            ) from None
        log.info("route %s in %s %s: to %s", route.destination, route.table_id, action, vm_cid)


def _destination(cidr: str) -> dict[str, str]:
    network = ipaddress.ip_network(cidr, strict=False)
    key = "DestinationIpv6CidrBlock" if network.version == 6 else "DestinationCidrBlock"
    return {key: cidr}
