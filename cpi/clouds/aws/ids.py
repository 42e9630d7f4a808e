"""EC2 resource IDs by shape. A cid that cannot be an EC2 ID (say "disk-does-not-exist")
names nothing: answering "not found" without a request is faster and does not depend on
how each EC2 API words a malformed ID (`InvalidVolumeID.Malformed`, `InvalidParameterValue`,
`InvalidID` ...)."""

from __future__ import annotations

import re

from cpi.cids import DiskCid, VmCid
from cpi.errors import DiskNotFound, VMNotFound

_SHAPES = {
    "instance": re.compile(r"i-[0-9a-zA-Z]+"),
    "volume": re.compile(r"vol-[0-9a-zA-Z]+"),
    "snapshot": re.compile(r"snap-[0-9a-zA-Z]+"),
    "image": re.compile(r"ami-[0-9a-zA-Z]+"),
}


def is_instance(cid: str) -> bool:
    return bool(_SHAPES["instance"].fullmatch(cid))


def is_volume(cid: str) -> bool:
    return bool(_SHAPES["volume"].fullmatch(cid))


def is_snapshot(cid: str) -> bool:
    return bool(_SHAPES["snapshot"].fullmatch(cid))


def is_image(cid: str) -> bool:
    return bool(_SHAPES["image"].fullmatch(cid))


def instance(vm_cid: VmCid) -> VmCid:
    """`vm_cid`, or VMNotFound when it cannot be an instance ID."""
    if not is_instance(vm_cid):
        raise VMNotFound(f"VM '{vm_cid}' not found")
    return vm_cid


def volume(disk_cid: DiskCid) -> DiskCid:
    """`disk_cid`, or DiskNotFound when it cannot be a volume ID."""
    if not is_volume(disk_cid):
        raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)
    return disk_cid
