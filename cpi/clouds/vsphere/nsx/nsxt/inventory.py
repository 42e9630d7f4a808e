"""A VM as NSX-T's inventory knows it: NSX learns of a new VM, and of its ports, from the
vCenter a little later (it is eventually consistent), so what is looked for there is looked
at once and, when it is not there yet, waited for; and which members of a load balancer
pool are a VM's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cpi import waits
from cpi.cids import VmCid

if TYPE_CHECKING:
    from cpi.channel import Channel

log = logging.getLogger("cpi.clouds.vsphere")
T = TypeVar("T")

#: how long NSX may take to see a new VM or port in the vCenter, and how often it is asked
#: meanwhile
DISCOVERY_SECONDS = 60
DISCOVERY_SCHEDULE = waits.Schedule(first=0.5, factor=1.5, cap=5.0)


def discovered(look: Callable[[], waits.Check[T]], *, what: str, wait: float, channel: Channel) -> T | None:
    """What `look` finds: at once when NSX has it already (so `cpi plan`, which waits for
    nothing, sees it too), else, with `wait`, once it has (WaitTimeout after `wait` seconds).
    `channel`: the call's (cpi.channel), whose plan notes the wait instead."""
    first = look()
    if first.done or not wait:
        return first.value
    return channel.until(look, what=what, timeout=wait, schedule=DISCOVERY_SCHEDULE, log=log)


def is_mine(member: dict[str, Any], vm_cid: VmCid, addresses: Callable[[], set[str]]) -> bool:
    """Whether a pool member is the VM's: named after it (as this CPI and the official one
    name them), or unnamed (as older official CPIs added them) at one of its `addresses()`
    (asked only for an unnamed member)."""
    name = member.get("display_name")
    if name == vm_cid:
        return True
    return name in (None, "", member.get("ip_address")) and member.get("ip_address") in addresses()
