"""What a director's CPI made that the director no longer knows — VMs a killed create_vm
left, disks and snapshots nobody deletes — found by the director_uuid the CPI tags
everything with. `cpi orphans` lists and deletes them; `cpi certify` looks the same way
for what its own run left, so the two can never disagree about what is left."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpi.clouds.base import Cloud
    from cpi.clouds.inventory import Resource

#: What is looked at, and the CPI method that deletes each kind, in a safe order (a VM
#: before the disks it may hold and the stemcell it was made from).
DELETERS = {"vms": "delete_vm", "snapshots": "delete_snapshot", "disks": "delete_disk",
            "stemcells": "delete_stemcell"}


def find(cloud: Cloud, director_uuid: str, known_cids: set[str]) -> list[Resource]:
    """A disk attached to a VM is never an orphan by itself: it is a known VM's, or goes with
    an orphaned VM (root and ephemeral volumes carry their VM's tags) and is released when
    that VM is deleted. A snapshot of a disk the director knows is that disk's (the director
    deletes it with the disk), not an orphan."""
    found = []
    for kind in DELETERS:
        for resource in cloud.inventory(kind):
            if resource.tags.get("director_uuid") != director_uuid or resource.cid in known_cids:
                continue
            if kind == "disks" and resource.details.get("attached_to"):
                continue
            if kind == "snapshots" and (resource.details.get("disk") or resource.details.get("volume")) in known_cids:
                continue
            found.append(resource)
    return found
