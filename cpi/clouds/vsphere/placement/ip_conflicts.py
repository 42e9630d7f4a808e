"""`ensure_no_ip_conflicts`: before a VM is made, ask the vCenter whether a VM already has one
of its manual IP addresses on the same network, as the official CPI does, and refuse the VM
if so. The vCenter knows a VM's addresses from VMware Tools, so a VM without them is not
seen. One search per address (SearchIndex.FindAllByIp, whatever the number of VMs), then
one read of each VM found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpi.errors import VMCreationFailed

if TYPE_CHECKING:
    from cpi.models import Network

    from ..vcenter.session import Session


def check(session: Session, datacenter: Any, networks: dict[str, Network]) -> None:
    """VMCreationFailed when a VM in `datacenter` (vim.Datacenter) holds one of `networks`' manual
    IP addresses on the same network."""
    for name, net in networks.items():
        if net.type != "manual" or not net.ip:
            continue
        wanted = net.cloud_properties.get("name")
        for vm in session.content.searchIndex.FindAllByIp(datacenter=datacenter, ip=net.ip, vmSearch=True):
            for nic in vm.guest.net or []:
                if net.ip in (nic.ipAddress or []) and nic.network in (None, wanted):
                    raise VMCreationFailed(
                        f"network '{name}': IP {net.ip} is in use on '{wanted}' by VM '{vm.name}' "
                        "(ensure_no_ip_conflicts): the VM would share an address with it", ok_to_retry=False)
