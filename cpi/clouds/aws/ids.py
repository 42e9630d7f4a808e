"""EC2 resource IDs by shape. A cid that cannot be an EC2 ID (say "disk-does-not-exist")
names nothing: answering "not found" without a request is faster and does not depend on
how each EC2 API words a malformed ID (`InvalidVolumeID.Malformed`, `InvalidParameterValue`,
`InvalidID` ...)."""

from __future__ import annotations

import re

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
