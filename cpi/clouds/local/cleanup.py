"""Making and removing resources so that a CPI killed at any step loses nothing.

A create announces itself (orphans.py) before it makes anything and, if it fails, removes
what it made before it raises; any removal (delete_*, a failed create, the sweep of a
create whose process died) takes whatever exists under the cid, record or not, each step
safe to repeat. So whatever a killed call leaves, a delete of that cid or the next
create's sweep finds and removes.

Removing a VM lives here, not in vms.py, because every create needs it: its sweep may find
a VM whose creator died.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any, cast

from pydantic import BaseModel

from cpi.cids import SnapshotCid, StemcellCid, VmCid

from . import orphans, process
from .session import Session
from .store import DiskRecord, SnapshotRecord, StemcellRecord, Store, VMRecord

_KIND_NAMES: dict[type[BaseModel] | None, str] = {
    StemcellRecord: "stemcell", VMRecord: "vm", DiskRecord: "disk", SnapshotRecord: "snapshot"}
#: What a delete's audit line shows of the resource it removed (not its tags: a tag value
#: a director once sent as a secret is not known as one to a later call's redactor).
_SUMMARY: dict[type[BaseModel], set[str]] = {
    StemcellRecord: {"sha1", "size"},
    VMRecord: {"agent_id", "stemcell_cid", "ips", "disks"},
    DiskRecord: {"size", "vm_cid"},
    SnapshotRecord: {"disk_cid", "size"},
}


@contextlib.contextmanager
def creating(session: Session, cid: str, *also_lock: str) -> Iterator[None]:
    """Make a new resource under its lock, announced as pending first: if this process
    dies half way, the next create's sweep finds the entry with its lock free and
    removes what was made; if it fails, it removes what it made before raising."""
    orphans.sweep(session.store, functools.partial(delete_orphan, session), planned=session.plan is not None)
    with session.lock(cid, *also_lock):
        session.store.add_pending(cid)
        try:
            yield
        except BaseException:
            session.log.info("creating %s failed; removing what it made", cid)
            purge(session, cid, audited=False)
            raise
        session.store.remove_pending(cid)


def purge(session: Session, cid: str, kind: type | None = None, audited: bool = True) -> bool:
    """Remove everything under `cid` (its lock held): processes, IPs, files, record,
    pending entry. True if anything was there. `kind` is the one the caller's method
    deletes (delete_disk of a VM's cid must not touch the VM); by default the cid's."""
    store = session.store
    kind = kind or store.kind_of(cid)
    if kind is not store.kind_of(cid):
        return False
    old = _load_quietly(store, kind, cid)
    if kind is VMRecord:
        found = _destroy_vm(session, VmCid(cid), cast("VMRecord | None", old))  # of the kind asked for
    elif kind is not None:
        found = store.remove(kind, cid)
    else:
        found = False
    store.remove_pending(cid)
    if found and audited:
        session.audit("delete", _KIND_NAMES[kind], cid, old=summary(old))
    return found


def delete_alone(session: Session, cid: StemcellCid | SnapshotCid, kind: type, what: str) -> None:
    """delete_stemcell, delete_snapshot: what is under `cid` removed, its lock held (nothing
    else is locked: a stemcell or snapshot holds nothing); one that is not there is no
    error, as a director retries deletes."""
    with session.lock(cid):
        if not purge(session, cid, kind):
            session.log.info("%s %s not found: nothing to delete", what, cid)


def delete_orphan(session: Session, cid: str) -> None:
    """Called by the sweep for a create whose process died: remove what it made."""
    if session.store.kind_of(cid) is VMRecord:
        delete_vm(session, VmCid(cid))  # with the locks of any disk attached meanwhile
    else:
        with session.lock(cid):
            purge(session, cid)


def delete_vm(session: Session, vm_cid: VmCid) -> None:
    with _locked_with_disks(session, vm_cid) as record:
        found = _destroy_vm(session, vm_cid, record)
        if session.store.valid(VMRecord, vm_cid):
            session.store.remove_pending(vm_cid)
        if found:
            session.audit("delete", "vm", vm_cid, old=summary(record))
        if not found:
            session.log.info("VM %s not found: nothing to delete", vm_cid)


def stop_vm(session: Session, vm_cid: VmCid, record: VMRecord | None) -> None:
    if not session.effect(f"stop the processes of VM {vm_cid}"):
        return
    pid, pid_start = (record.pid, record.pid_start) if record else (None, None)
    process.stop(pid, pid_start, str(session.store.dir(VMRecord, vm_cid)))


def _destroy_vm(session: Session, vm_cid: VmCid, record: VMRecord | None) -> bool:
    """Stop its processes, release its disks and IPs, remove the VM: from whatever is
    there (record or not), each step safe to repeat. Call with the VM's and its disks'
    locks held. True if anything was there."""
    store = session.store
    if not store.valid(VMRecord, vm_cid):
        return False
    found = store.exists(VMRecord, vm_cid)
    stop_vm(session, vm_cid, record)
    for disk_cid in list(record.disks) if record else []:
        disk = store.load(DiskRecord, disk_cid)
        if disk and disk.vm_cid == vm_cid:
            disk.vm_cid = None
            store.save(disk)
            session.log.info("released disk %s", disk_cid)
            device = record.disks.get(disk_cid) if record else None
            session.audit("detach", "disk", disk_cid, old={"vm_cid": vm_cid, "device": device})
    for ip in sorted(set(store.ips_of(vm_cid)) | set(record.ips if record else [])):
        store.release_ip(ip, vm_cid)
        session.audit("release", "ip", ip, old={"vm_cid": vm_cid})
        found = True
    return store.remove(VMRecord, vm_cid) or found


@contextlib.contextmanager
def _locked_with_disks(session: Session, vm_cid: VmCid) -> Iterator[VMRecord | None]:
    """Lock the VM and every disk its record lists, all at once (the global order that
    attach and detach follow too); yields the record as it is under those locks."""
    while True:
        before = session.store.load(VMRecord, vm_cid)
        disks = sorted(before.disks) if before else []
        with session.lock(vm_cid, *disks):
            record = session.store.load(VMRecord, vm_cid)
            if sorted(record.disks if record else []) == disks:
                yield record
                return
        session.log.info("disks of VM %s changed while locking; locking again", vm_cid)


def _load_quietly(store: Store, kind: type | None, cid: str) -> BaseModel | None:
    """The record, or None when there is none or it cannot be read (a delete goes on)."""
    if kind is None:
        return None
    try:
        return store.load(kind, cid)
    except (OSError, ValueError):
        return None


def summary(record: BaseModel | None) -> dict[str, Any] | None:
    return None if record is None else record.model_dump(include=_SUMMARY[type(record)])
