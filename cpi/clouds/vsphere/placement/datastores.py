"""The datastores a disk may land on, as one request reads them (Datastore), and the draw
among those with room (pick): what place.py, create_vm's placement, create_disk and
create_stemcell share, apart from the lookups, so that a reader of a choice needs no session.

Why weighted at random: the official CPI's users watch every ephemeral disk land on one
datastore until it fills, because a thin disk does not lower the free space it picks by,
so "the one with most free space" stays the same one for disk after disk. Here each fitting
datastore is drawn with a weight equal to the space it would have left, so two equal
datastores take about half the disks each, a fuller one fewer, and one that would be left
with less than HEADROOM_MIB none at all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyVmomi import vim

#: what a datastore must keep free after a disk is put on it (MiB), as the official CPI
HEADROOM_MIB = 1024
MIB = 1 << 20


@dataclass(frozen=True)
class Datastore:
    name: str
    ref: vim.Datastore
    free_mib: int
    capacity_mib: int
    usable: bool  # accessible, and not entering or in maintenance mode


def pick(candidates: list[Datastore], need_mib: int, rng: random.Random | None = None) -> Datastore | None:
    """One of `candidates` with room for `need_mib` and HEADROOM_MIB to spare, drawn with a
    weight of the space it would have left; None when none has room."""
    fitting = [d for d in candidates if d.usable and d.free_mib - need_mib >= HEADROOM_MIB]
    if not fitting:
        return None
    return (rng or random).choices(fitting, weights=[d.free_mib - need_mib for d in fitting])[0]


def describe(candidates: list[Datastore]) -> str:
    """The candidates as an error names them: each with its free space, and why it is out."""
    if not candidates:
        return "none"
    return ", ".join(f"{d.name} ({d.free_mib} MiB free{'' if d.usable else ', not usable'})" for d in candidates)
