"""The identifiers BOSH passes to a CPI and gets back, each its own type.

At run time each is a plain `str` (NewType costs nothing per call); to a type checker a
`VmCid` is not a `DiskCid`, so handing a disk's cid where a VM's belongs — the mistake an
argument-order slip makes in detach_disk(vm_cid, disk_cid) — is caught before a director
ever sees it. Named as BOSH spells them.
"""

from __future__ import annotations

from typing import NewType

VmCid = NewType("VmCid", str)
DiskCid = NewType("DiskCid", str)
StemcellCid = NewType("StemcellCid", str)
SnapshotCid = NewType("SnapshotCid", str)
NetworkCid = NewType("NetworkCid", str)
AgentId = NewType("AgentId", str)
