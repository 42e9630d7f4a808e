"""How OpenStack resources are waited for: the shared loop (cpi.waits) on one schedule.

The Ruby CPI polls every `wait_resource_poll_interval` (5 s) and the Go port every 10 s,
so a server Nova builds in 3 s is reported after 5 or 10. Here the first look comes after
a quarter of a second and the pauses grow by half each time, capped by
`wait_resource_poll_interval`: a call returns within moments of the service, with a
handful of requests. Every wait is bounded by `state_timeout`, which callers name
(`setting="state_timeout"`) so that a timeout says which property to raise.
"""

from __future__ import annotations

from cpi.transitions import History
from cpi.waits import Schedule

from .props import OpenStackProperties

FIRST = 0.25
FACTOR = 1.5


def poll_schedule(properties: OpenStackProperties) -> Schedule:
    """0.25 s, then half as long again each time, at most `wait_resource_poll_interval`."""
    return Schedule(first=FIRST, factor=FACTOR, cap=properties.wait_resource_poll_interval)


def history(properties: OpenStackProperties, kind: str) -> History:
    """How long `kind` of transition ("server ACTIVE m1.small image") took lately on this
    cloud (cpi.transitions): the waits for it look when it is about to end."""
    return History(f"openstack {properties.auth_url} {properties.region or '-'} {kind}")
