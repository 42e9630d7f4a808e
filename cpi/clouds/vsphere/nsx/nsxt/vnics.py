"""What NSX-T needs to know of a VM from the vCenter: which of its NICs are on NSX (an
opaque `nsx.LogicalSwitch` network or a port group NSX backs) with the attachment ids
vSphere shows for them, and the address a load balancer pool reaches it at."""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING, Any

from cpi import waits
from cpi.cids import VmCid

from ... import collector

if TYPE_CHECKING:
    from ...vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")

#: how long a VM on dynamic networks may take to report its address through VMware Tools
#: (the official CPI's bound: 150 looks, 2 seconds apart)
GUEST_ADDRESS_SECONDS = 300
GUEST_SCHEDULE = waits.Schedule(first=1.0, factor=1.5, cap=5.0)


def on_nsx(session: Session, vm: Any) -> list[str | None]:
    """The attachment id (the NIC's externalId, None until NSX has set it) of each of the
    VM's NICs on an NSX network."""
    from pyVmomi import VmomiSupport, vim

    card = vim.vm.device.VirtualEthernetCard
    [(_, values)] = collector.of(session, [vm], vim.VirtualMachine, ["config.hardware.device", "network"])
    nics = [device for device in values.get("config.hardware.device") or [] if isinstance(device, card)]
    groups = [net for net in values.get("network") or [] if isinstance(net, vim.dvs.DistributedVirtualPortgroup)]
    if not VmomiSupport.IsChildVersion(session.version, "vim.version.v7_0"):
        groups = []  # port groups NSX backs came with vSphere 7.0; before, NSX-T's networks are opaque
    nsx_backed = {found.get("key") for _, found in collector.of(
        session, groups, vim.dvs.DistributedVirtualPortgroup, ["key", "config.backingType"])
        if found.get("config.backingType") == "nsx"}
    chosen = []
    for nic in nics:
        backing = nic.backing
        opaque = isinstance(backing, card.OpaqueNetworkBackingInfo) and backing.opaqueNetworkType == "nsx.LogicalSwitch"
        backed = isinstance(backing, card.DistributedVirtualPortBackingInfo) and backing.port.portgroupKey in nsx_backed
        if opaque or backed:
            chosen.append(nic.externalId)
    return chosen


def address(session: Session, vm: Any, vm_cid: VmCid, networks: dict[str, Any]) -> str | None:
    """The VM's address for a server pool: its manual network's (the one with the default
    gateway first), known at once; else the one VMware Tools reports once the VM has
    booted, as the official CPI always takes, waited for within GUEST_ADDRESS_SECONDS."""
    from pyVmomi import vim

    manual = [net for net in networks.values() if net.get("type", "manual") == "manual" and net.get("ip")]
    manual.sort(key=lambda net: "gateway" not in (net.get("default") or []))
    if manual:
        return str(manual[0]["ip"])

    def look() -> waits.Check[str]:
        [(_, values)] = collector.of(session, [vm], vim.VirtualMachine, ["guest.ipAddress"])
        found = str(values.get("guest.ipAddress") or "")
        try:
            usable = bool(found) and not ipaddress.ip_address(found).is_link_local
        except ValueError:
            usable = False
        return waits.Check(usable, f"VMware Tools report {found!r}" if found else "no address reported yet", found)

    return session.channel.until(look, what=f"VM {vm_cid} to report its address through VMware Tools",
                                 timeout=GUEST_ADDRESS_SECONDS, schedule=GUEST_SCHEDULE, check_first=True, log=log)


def addresses(session: Session, vm: Any) -> set[str]:
    """The addresses VMware Tools report for the VM (none when they report nothing)."""
    from pyVmomi import vim

    [(_, values)] = collector.of(session, [vm], vim.VirtualMachine, ["guest.net", "guest.ipAddress"])
    found = {str(values["guest.ipAddress"])} if values.get("guest.ipAddress") else set()
    for nic in values.get("guest.net") or []:
        found.update(str(ip) for ip in nic.ipAddress or [])
    return found
