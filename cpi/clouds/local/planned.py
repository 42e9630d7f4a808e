"""Plan mode on the local cloud (cpi.plan): the store a planned call works on.

Reads see the state dir as it is; writes (records, pending entries, IP reservations) land
in memory on top of it, so a later read in the same call sees them, as it would in a real
call, and nothing reaches the disk. New cids are placeholders. The file and process work
(disk images, agent settings, VM processes) is skipped by the cloud itself
(Session.effect, session.py); this only keeps the bookkeeping.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel

from cpi.plan import Plan

from . import layout
from .store import KINDS, R, Store, canonical_ip

log = logging.getLogger(__name__)


class PlannedStore(Store):
    def __init__(self, root: Path, plan: Plan):
        root = Path(root).expanduser()
        if os.path.lexists(root):
            super().__init__(root)  # checked as any call checks it
        else:
            self.root = root  # a state dir no call has made yet: empty, and not made by a plan
        self.plan = plan
        self._records: dict[tuple[type, str], BaseModel | None] = {}  # None: removed
        self._pending: dict[str, bool] = {}
        self._ips: dict[str, str | None] = {}  # canonical address -> owner (None: released)

    def record_format(self) -> None:
        """Nothing is recorded: the real call would (a later format is refused as by any
        call, when the store is opened)."""
        log.info("plan: the call would record the state dir's format %d", layout.FORMAT)

    def new_cid(self, kind: type[BaseModel]) -> str:  # type: ignore[override]  # over a staticmethod: placeholders need the plan
        return self.plan.placeholder(f"{KINDS[kind][2]}-")

    def make_dir(self, kind: type[BaseModel], cid: str) -> Path:
        return self.dir(kind, cid)

    # -- records
    def load(self, kind: type[R], cid: str) -> R | None:
        if (kind, cid) in self._records:
            record = self._records[(kind, cid)]
            return None if record is None else cast(R, record.model_copy(deep=True))  # saved by kind
        return super().load(kind, cid)

    def save(self, record: BaseModel) -> None:
        cid = getattr(record, KINDS[type(record)][3])
        self._records[(type(record), cid)] = record.model_copy(deep=True)

    def exists(self, kind: type[BaseModel], cid: str) -> bool:
        if (kind, cid) in self._records:
            return self._records[(kind, cid)] is not None
        return super().exists(kind, cid)

    def remove(self, kind: type[BaseModel], cid: str) -> bool:
        if not self.valid(kind, cid):
            return False
        existed = self.exists(kind, cid)
        self._records[(kind, cid)] = None
        return existed

    def cids(self, kind: type[BaseModel]) -> list[str]:
        found = set(_listed(super().cids, kind))
        for (record_kind, cid), record in self._records.items():
            if record_kind is kind:
                (found.add if record is not None else found.discard)(cid)
        return sorted(found)

    # -- creates in progress
    def add_pending(self, cid: str) -> None:
        self._pending[cid] = True

    def remove_pending(self, cid: str) -> None:
        self._pending[cid] = False

    def pending(self) -> list[str]:
        found = set(_listed(super().pending))
        for cid, present in self._pending.items():
            (found.add if present else found.discard)(cid)
        return sorted(found)

    # -- IP reservations (keyed as the state dir names them: the canonical address)
    def ip_owner(self, ip: str) -> str | None:
        key = canonical_ip(ip)
        return self._ips[key] if key in self._ips else super().ip_owner(ip)

    def reserve_ip(self, ip: str, vm_cid: str) -> None:
        if self.ip_owner(ip) is not None:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), ip)
        self._ips[canonical_ip(ip)] = vm_cid

    def release_ip(self, entry: str, vm_cid: str) -> None:
        if "/" in entry or entry in (".", ".."):
            return
        owner = self._ips[entry] if entry in self._ips else self._owner(self.root / "ips" / entry)
        if owner == vm_cid:
            self._ips[entry] = None

    def ips_of(self, vm_cid: str) -> list[str]:
        found = {ip for ip in _listed(super().ips_of, vm_cid) if self._ips.get(ip, vm_cid) == vm_cid}
        found.update(ip for ip, owner in self._ips.items() if owner == vm_cid)
        return sorted(found)


def _listed(listing: Callable[..., list[str]], *args: Any) -> list[str]:
    """A listing of the state dir, empty where the directory is not there yet."""
    try:
        return listing(*args)
    except FileNotFoundError:
        return []
