"""Creates that died half way, found and undone by whoever comes next.

A create_* killed before it answers made something whose cid nobody learned: no director
will ever delete it. So a create first takes the lock on its new cid and writes
`pending/<cid>`, makes the resource, and removes the entry last. A pending entry whose lock
is free therefore belongs to a dead creator; every later create sweeps such entries,
removing whatever exists under that cid (VM processes found by their marker, IP
reservations, files, record). The sweep also removes the lock files of processes killed
while they held a lock (cpi.locks.collect_stale), and the temp file of a faults.json
write killed before its rename.

A resource whose create finished but whose answer was lost (killed after the entry went)
has a complete record: `has_*` reports it and `delete_*` removes it, as any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cpi.locks import collect_stale, held, try_locked

from . import faults
from .store import Store

log = logging.getLogger(__name__)


def sweep(store: Store, delete: Callable[[str], None], *, planned: bool) -> None:
    """Remove what every dead create left. `delete(cid)` removes whatever exists under a
    cid and takes the locks that needs (a VM's disks too): the cloud's to give, so that
    this module needs nothing of the cloud but its store. `planned`: the call runs under
    `cpi plan` (cpi.plan), which writes nothing."""
    if planned:  # the same finds, through a look that writes nothing
        for cid in store.pending():
            if not held(store.lock_dir, cid) and store.pending_path(cid).exists():
                log.info("a create of %s was killed half way: the call would remove what it left", cid)
                delete(cid)
        return
    for cid in store.pending():
        with try_locked(store.lock_dir, cid) as free:
            dead = free and store.pending_path(cid).exists()
        if not dead:
            continue  # its creator is still at work (or finished meanwhile)
        log.info("a create of %s was killed half way: removing what it left", cid)
        delete(cid)
    collect_stale(store.lock_dir)
    faults.collect_temp(store.root, store.lock_dir)
