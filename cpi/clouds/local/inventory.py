"""The local cloud as an operator sees it: its records, read without taking a lock (a
listing is a snapshot; it never blocks a CPI call at work)."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any

from cpi import processes
from cpi.clouds.inventory import Offer, Resource, read_so_far

from .process import agent_state
from .store import DiskRecord, SnapshotRecord, StemcellRecord, Store, VMRecord


def _tags(record: VMRecord | DiskRecord | SnapshotRecord | StemcellRecord,
          extra: dict[str, str] | None = None) -> dict[str, str]:
    tags = {"director_uuid": record.director_uuid} if record.director_uuid else {}
    tags.update(extra or {})
    return {k: str(v) for k, v in tags.items()}


def _vm(store: Store, record: VMRecord) -> Resource:
    """A running VM's state is its supervisor's: running, backoff (its agent exited and is
    restarted after a delay) or failing (it exited too often and is left down)."""
    state, agent = record.state, None
    if state == "running" and not processes.alive(record.pid, record.pid_start):
        state = "stopped"
    elif state == "running":
        supervised = agent_state(store.dir(VMRecord, record.vm_cid))
        if supervised is not None:
            state = str(supervised.get("state") or state)
            agent = {key: supervised.get(key) for key in ("agent_pid", "restarts", "last_exit")}
    return Resource("vm", record.vm_cid, state, record.created_at,
                    _tags(record, {"agent_id": record.agent_id, **record.metadata}),
                    {"stemcell": record.stemcell_cid, "ips": list(record.ips), "disks": list(record.disks),
                     "pid": record.pid, "boots": record.boots, "agent": agent,
                     "cloud_properties": record.cloud_properties})


def _disk(store: Store, record: DiskRecord) -> Resource:
    return Resource("disk", record.disk_cid, "in-use" if record.vm_cid else "available", record.created_at,
                    _tags(record, record.metadata),
                    {"role": "persistent",  # a local VM's root and ephemeral disks are its own files, no disk
                     "size_mib": record.size, "attached_to": record.vm_cid,
                     "cloud_properties": record.cloud_properties})


def _stemcell(store: Store, record: StemcellRecord) -> Resource:
    return Resource("stemcell", record.stemcell_cid, "available", record.created_at, _tags(record, record.tags),
                    {"light": record.image is None, "size_bytes": record.size, "sha1": record.sha1,
                     "cloud_properties": record.cloud_properties})


def _snapshot(store: Store, record: SnapshotRecord) -> Resource:
    return Resource("snapshot", record.snapshot_cid, "available", record.created_at,
                    _tags(record, {k: str(v) for k, v in record.metadata.items()}),
                    {"disk": record.disk_cid, "size_mib": record.size})


READERS: dict[str, tuple[type[Any], Callable[[Store, Any], Resource]]] = {
    "vms": (VMRecord, _vm), "disks": (DiskRecord, _disk), "stemcells": (StemcellRecord, _stemcell),
    "snapshots": (SnapshotRecord, _snapshot)}


def inventory(store: Store, kind: str) -> list[Resource]:
    record_type, describe = READERS[kind]
    found = []
    for cid in store.cids(record_type):
        record = store.load(record_type, cid)
        if record is not None:
            found.append(describe(store, record))
            if len(found) % 100 == 0:
                read_so_far(kind, len(found))
    return found


def available(store: Store, offer: str) -> list[Offer]:
    """The local cloud runs everything on this host: its stemcells are its images, any size
    goes (cpu and ram are recorded, not enforced), one zone, any network."""
    if offer == "images":
        return [Offer("image", r.stemcell_cid, r.stemcell_cid, {"tags": r.tags, "light": r.image is None})
                for r in store.all(StemcellRecord)]
    if offer == "sizes":
        return [Offer("size", "any", None, {"cpu": f"1-{os.cpu_count()}", "note": "cpu and ram are recorded only"})]
    if offer == "zones":
        return [Offer("zone", platform.node() or "local", None, {"note": "one host, one zone"})]
    return [Offer("network", "any", None, {"types": ["manual", "dynamic", "vip"],
                                            "note": "manual IPs are reserved exclusively"})]
