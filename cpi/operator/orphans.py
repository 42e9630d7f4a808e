"""What a director's CPI made that the director no longer knows — VMs a killed create_vm
left, disks and snapshots nobody deletes — found by the director_uuid the CPI tags
everything with. `cpi orphans` lists and deletes them; `cpi certify` looks the same way
for what its own run left, so the two can never disagree about what is left.

The known list is the operator's word, and it may be short (a bosh command left out, a
deployment missed); the cloud's own answer is not. So what the cloud shows in use is never
offered, whatever the list lacks: a disk attached to a VM, the snapshots of a disk that
stays, the stemcell a VM that stays runs. Only what nothing alive holds is offered."""

from __future__ import annotations

from dataclasses import dataclass, field

from cpi.clouds.inventory import is_bosh

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpi.clouds.base import Cloud
    from cpi.clouds.inventory import Resource

#: What is looked at, and the CPI method that deletes each kind, in a safe order (a VM
#: before the disks it may hold and the stemcell it was made from).
DELETERS = {"vms": "delete_vm", "snapshots": "delete_snapshot", "disks": "delete_disk",
            "stemcells": "delete_stemcell"}


@dataclass
class Survey:
    """What `find` saw: the orphans it offers, and the resources a director tagged that
    carry no director_uuid to tie them to this one (the fleet an official CPI made before
    a switch: its VMs and disks have only the director's `director` name), never offered."""

    offered: list[Resource] = field(default_factory=list)
    untied: list[Resource] = field(default_factory=list)


def survey(cloud: Cloud, director_uuid: str, known_cids: set[str]) -> Survey:
    # a vSphere disk cid carries the datastore pattern it was made for after a ".", where a
    # listing knows only the file's name: that name is known too (no other cloud's cid has
    # a "." a listing would drop, so this only ever offers less)
    known_cids = known_cids | {cid.partition(".")[0] for cid in known_cids}
    listed = {kind: cloud.inventory(kind) for kind in DELETERS}
    result = Survey()

    def candidate(resource: Resource) -> bool:
        if resource.cid in known_cids:
            return False
        if resource.tags.get("director_uuid") == director_uuid:
            return True
        if not resource.tags.get("director_uuid") and is_bosh(resource.tags):
            result.untied.append(resource)
        return False

    vms = [r for r in listed["vms"] if candidate(r)]
    leaving = {r.cid for r in vms}
    staying_vms = [r for r in listed["vms"] if r.cid not in leaving]
    # a disk attached to any VM is never an orphan by itself: it is a known VM's, or goes
    # with an orphaned VM (root and ephemeral volumes are deleted with it)
    disks = [r for r in listed["disks"] if candidate(r) and not r.details.get("attached_to")]
    leaving = {r.cid for r in disks}
    staying_disks = known_cids | {r.cid for r in listed["disks"] if r.cid not in leaving}
    snapshots = [r for r in listed["snapshots"] if candidate(r) and _of_disk(r) not in staying_disks]
    running = {_image(r) for r in staying_vms} - {None}
    stemcells = [r for r in listed["stemcells"]
                 if candidate(r) and r.cid not in running and r.cid.removesuffix(" light") not in running]
    result.offered = [*vms, *snapshots, *disks, *stemcells]
    return result


def find(cloud: Cloud, director_uuid: str, known_cids: set[str]) -> list[Resource]:
    """The orphans of `director_uuid` that `known_cids` does not name (DELETERS' order)."""
    return survey(cloud, director_uuid, known_cids).offered


def _of_disk(snapshot: Resource) -> str | None:
    return snapshot.details.get("disk") or snapshot.details.get("volume")


def _image(vm: Resource) -> str | None:
    return vm.details.get("stemcell") or vm.details.get("image")
