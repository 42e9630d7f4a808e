"""What a cloud holds, as its operator interface answers it (`Cloud.inventory`, `show`,
`available` in cpi/clouds/base.py).

These shapes are part of the cloud contract, so they live beside it: every cloud builds
them and the operator's commands (cpi/operator, cpi/cli) read them, and the arrow of
imports may only point down to the clouds, never up from them to the operator.

Salt Cloud drivers answer `list_nodes`, `show_instance` and `avail_*` in one shape per
cloud; here every cloud answers in one shape for all: a `Resource` per VM, disk,
stemcell or snapshot, carrying the tags BOSH sets (director_uuid, agent_id, deployment,
job, index) so an operator can tell whose it is, and an `Offer` per image, size, zone or
network a cloud-config may name. These are read-only: nothing here changes the IaaS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

#: What `Cloud.inventory` (`cpi list`, `cpi show`) and `Cloud.available` (`cpi avail`) take.
KINDS = ("vms", "disks", "stemcells", "snapshots")
OFFERS = ("images", "sizes", "zones", "networks")

#: The tags (metadata, custom attributes) that make a resource BOSH's, whichever CPI made
#: it: this CPI's own (`agent_id` on a VM, `director_uuid` on what it makes for a director),
#: the director's (set_vm_metadata and set_disk_metadata send `director`, its name), and
#: snapshot_disk's metadata, which the official CPIs copy onto the snapshot (`director_uuid`,
#: `agent_id`, `director`). A fleet the official CPI made before a switch carries only the
#: director's, so looking for this CPI's tags alone would hide it.
BOSH_TAGS = ("agent_id", "director_uuid", "director")

#: What a volume is to its VM (a disk's `details.role`): a persistent disk, the director's to
#: keep across VMs, or the VM's own root or ephemeral disk, made and deleted with the VM.
ROLES = ("persistent", "root", "ephemeral")


def is_bosh(tags: Mapping[str, Any]) -> bool:
    """Whether these tags say a director (through any CPI) made or claimed the resource."""
    return any(tags.get(key) for key in BOSH_TAGS)

#: Told (what, how many so far) as a cloud reads its listing page after page: the operator's
#: commands show it, so a listing of thousands is seen to move. None: nobody is looking.
progress: Callable[[str, int], None] | None = None


def read_so_far(what: str, count: int) -> None:
    if progress is not None:
        progress(what, count)


def rfc3339(value: str | datetime | None) -> str | None:
    """A time as every operator command prints it: RFC 3339 in UTC to the second, with "Z"
    (EC2 says 2026-01-31T12:00:00.000Z, Nova 2026-01-31T12:00:00Z, Cinder
    2026-01-31T12:00:00.000000 meaning UTC, the local cloud +00:00). What does not parse as
    a time is kept as it is: it is what the cloud said."""
    if value is None or value == "":
        return None
    when = value
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            return value  # type: ignore[return-value]
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Resource:
    kind: str  # vm | disk | stemcell | snapshot
    cid: str
    state: str  # as the cloud says: running, available, in-use, creating, ...
    created_at: str | None = None  # RFC 3339, UTC, "Z" (rfc3339 makes it so)
    tags: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # size, attached_to, ips, image, ...

    def __post_init__(self) -> None:
        self.created_at = rfc3339(self.created_at)

    def age(self, now: datetime | None = None) -> str:
        """`3d4h`, `5m`: how long ago it was made, for a table a person reads at a glance."""
        if not self.created_at:
            return "?"
        try:
            made = datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))
        except ValueError:
            return "?"
        if made.tzinfo is None:
            made = made.replace(tzinfo=UTC)
        seconds = max(0, int(((now or datetime.now(UTC)) - made).total_seconds()))
        days, rest = divmod(seconds, 86400)
        hours, rest = divmod(rest, 3600)
        minutes = rest // 60
        if days:
            return f"{days}d{hours}h"
        if hours:
            return f"{hours}h{minutes}m"
        return f"{minutes}m" if minutes else f"{seconds}s"

    def wire(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Offer:
    """Something a cloud-config may name: an image, a size (flavor, instance type), a zone,
    a network or subnet."""

    kind: str  # image | size | zone | network
    name: str
    id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        return asdict(self)
