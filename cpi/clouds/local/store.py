"""The local cloud's state directory: one directory per resource, a JSON record in each.

    stemcells/<sc-…>/{stemcell.json, image}
    vms/<vm-…>/{vm.json, cpi-agent-env.json, agent.json, agent.log, ephemeral.img, bosh/}
    disks/<disk-…>/{disk.json, disk.img}
    snapshots/<snap-…>/{snapshot.json, disk.img}
    ips/<address>        one file per reserved manual-network IP (canonical form), holding its vm_cid
    pending/<cid>        a create in progress (see orphans.py)
    locks/               flock files while they are held (see cpi.locks)
    format               the layout's version, `1` (see layout.py): a later one is refused

Everything is private to the CPI's user: the root and its subdirectories are 0700 (and
refused when another user could tamper with them), files 0600, opened without following
links. A record is written last when a resource is made and removed first when it is
deleted; a delete removes whatever exists under its cid, record or not, so a process
killed half way leaves nothing that a delete of that cid (or the sweep of pending
creates) does not remove.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from cpi.cids import AgentId, DiskCid, SnapshotCid, StemcellCid, VmCid
from cpi.errors import CpiError
from cpi.failpoints import reached
from cpi.files import atomic_write_bytes, atomic_write_json, read_json
from cpi.private import PlantedEntry, open_nofollow, open_state_file, private_dir

from . import layout

R = TypeVar("R", bound=BaseModel)



def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Record(BaseModel):
    """A resource's record file. Each call reads one or two kinds: a schema is built the
    first time its kind is read or written, not by every call that imports the store."""

    model_config = ConfigDict(defer_build=True)


class StemcellRecord(_Record):
    stemcell_cid: StemcellCid
    cloud_properties: dict[str, Any] = {}
    tags: dict[str, str] = {}
    image: str | None = None  # file name inside the stemcell dir; None for a light stemcell
    sha1: str | None = None
    size: int = 0
    director_uuid: str | None = None  # who asked for it: `cpi list` and orphans filter by it
    created_at: str = Field(default_factory=now)


class VMRecord(_Record):
    vm_cid: VmCid
    agent_id: AgentId
    stemcell_cid: StemcellCid
    state: str = "creating"  # creating | running | deleting
    cloud_properties: dict[str, Any] = {}
    networks: dict[str, Any] = {}
    ips: list[str] = []
    pid: int | None = None
    pid_start: str | None = None  # the process's start time, so a recycled pid is never signalled
    disks: dict[DiskCid, Any] = {}  # disk_cid -> hint, in attach order
    metadata: dict[str, str] = {}
    boots: int = 0
    director_uuid: str | None = None  # who asked for it: `cpi list` and orphans filter by it
    created_at: str = Field(default_factory=now)


class DiskRecord(_Record):
    disk_cid: DiskCid
    size: int  # MiB
    cloud_properties: dict[str, Any] = {}
    vm_cid: VmCid | None = None  # attached to
    metadata: dict[str, str] = {}
    director_uuid: str | None = None  # who asked for it: `cpi list` and orphans filter by it
    created_at: str = Field(default_factory=now)


class SnapshotRecord(_Record):
    snapshot_cid: SnapshotCid
    disk_cid: DiskCid
    size: int
    metadata: dict[str, Any] = {}
    director_uuid: str | None = None  # who asked for it: `cpi list` and orphans filter by it
    created_at: str = Field(default_factory=now)


KINDS: dict[type[BaseModel], tuple[str, str, str, str]] = {
    # record type: (directory, record file, cid prefix, cid field)
    StemcellRecord: ("stemcells", "stemcell.json", "sc", "stemcell_cid"),
    VMRecord: ("vms", "vm.json", "vm", "vm_cid"),
    DiskRecord: ("disks", "disk.json", "disk", "disk_cid"),
    SnapshotRecord: ("snapshots", "snapshot.json", "snap", "snapshot_cid"),
}


SUBDIRS = ("stemcells", "vms", "disks", "snapshots", "ips", "pending", "locks")
STATE_DIR_SETTING = "cloud.properties.local.state_dir"


def canonical_ip(ip: str) -> str:
    """One spelling per address (`FD00:0:0:0:0:0:0:5` is `fd00::5`), so a reservation
    cannot be dodged by writing the same IP another way."""
    try:
        canonical = ipaddress.ip_address(ip).compressed
    except ValueError:
        raise CpiError(f"'{ip}' is not an IP address") from None
    if "/" in canonical or "\0" in canonical:
        raise CpiError(f"'{ip}' is not an IP address")
    return canonical


class Store:
    def __init__(self, root: Path):
        self.root = private_dir(Path(root).expanduser(), STATE_DIR_SETTING)
        # a later layout, or a format file that holds none, is refused before anything is
        # made in it (layout.py)
        found = layout.read(self.root)
        for sub in SUBDIRS:
            path = self.root / sub
            if not os.path.isdir(path) or os.path.islink(path):
                private_dir(path, STATE_DIR_SETTING)
        if found != layout.FORMAT:
            self.record_format()

    def record_format(self) -> None:
        """Bring the state dir to this code's layout before anything reads it: a new one,
        or one made by an older release (layout.py)."""
        layout.upgrade(self.root, self.lock_dir)

    @property
    def lock_dir(self) -> Path:
        return self.root / "locks"

    @staticmethod
    def new_cid(kind: type[BaseModel]) -> str:
        return f"{KINDS[kind][2]}-{uuid.uuid4()}"

    @staticmethod
    def kind_of(cid: str) -> type[BaseModel] | None:
        for kind, (_, _, prefix, _) in KINDS.items():
            if cid.startswith(prefix + "-"):
                return kind
        return None

    @staticmethod
    def valid(kind: type[BaseModel], cid: str) -> bool:
        """A cid is used as a path component: refuse anything that could step outside."""
        prefix = KINDS[kind][2]
        return (cid.startswith(prefix + "-") and "/" not in cid and "\0" not in cid
                and len(cid.encode(errors="surrogatepass")) <= 255)

    def dir(self, kind: type[BaseModel], cid: str) -> Path:
        if not self.valid(kind, cid):
            return self.root / KINDS[kind][0] / ".invalid"
        return self.root / KINDS[kind][0] / cid

    def make_dir(self, kind: type[BaseModel], cid: str) -> Path:
        directory = self.dir(kind, cid)
        directory.mkdir(mode=0o700)
        reached(f"mkdir {KINDS[kind][0]}")
        return directory

    def load(self, kind: type[R], cid: str) -> R | None:
        path = self.dir(kind, cid) / KINDS[kind][1]
        try:
            return kind.model_validate(read_json(path))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def save(self, record: BaseModel) -> None:
        cid = getattr(record, KINDS[type(record)][3])
        atomic_write_json(self.dir(type(record), cid) / KINDS[type(record)][1], record.model_dump())

    def exists(self, kind: type[BaseModel], cid: str) -> bool:
        """Anything at all under this cid: a record, or what a killed call made before it."""
        return self.valid(kind, cid) and os.path.lexists(self.dir(kind, cid))

    def remove(self, kind: type[BaseModel], cid: str) -> bool:
        """Delete the record first, then the directory, whether or not there was a record;
        True if anything was there."""
        if not self.valid(kind, cid):
            return False
        directory = self.dir(kind, cid)
        record = directory / KINDS[kind][1]
        existed = os.path.lexists(directory)
        try:
            record.unlink()
            reached(f"removed {KINDS[kind][1]}")
        except (FileNotFoundError, NotADirectoryError):
            pass
        if os.path.islink(directory) or os.path.isfile(directory):
            directory.unlink()
        elif os.path.isdir(directory):
            shutil.rmtree(directory)
            reached(f"removed {KINDS[kind][0]} dir")
        return existed

    def cids(self, kind: type[BaseModel]) -> list[str]:
        return sorted(e for e in os.listdir(self.root / KINDS[kind][0]) if not e.startswith("."))

    def all(self, kind: type[R]) -> list[R]:
        found = []
        for cid in self.cids(kind):
            record = self.load(kind, cid)
            if record is not None:
                found.append(record)
        return found

    # -- creates in progress: one empty file per cid (see orphans.py)

    def pending_path(self, cid: str) -> Path:
        if "/" in cid or "\0" in cid or cid in ("", ".", "..") or len(cid.encode(errors="surrogatepass")) > 255:
            return self.root / "pending" / ".invalid"  # a hostile cid never names a path outside
        return self.root / "pending" / cid

    def add_pending(self, cid: str) -> None:
        os.close(open_nofollow(self.pending_path(cid), os.O_WRONLY | os.O_CREAT, 0o600))
        reached("pending added")

    def remove_pending(self, cid: str) -> None:
        try:
            os.unlink(self.pending_path(cid))
            reached("pending removed")
        except FileNotFoundError:
            pass

    def pending(self) -> list[str]:
        return sorted(e for e in os.listdir(self.root / "pending") if not e.startswith("."))

    # -- IP reservations: one file per canonical address, taken under the "ips" lock

    def _ip_path(self, ip: str) -> Path:
        return self.root / "ips" / canonical_ip(ip)

    def ip_owner(self, ip: str) -> str | None:
        return self._owner(self._ip_path(ip))

    @staticmethod
    def _owner(path: Path) -> str | None:
        """The vm_cid a reservation holds (None: none there); PlantedEntry when something
        other than a reservation file is there."""
        try:
            with os.fdopen(open_state_file(path), "r", errors="replace") as handle:
                return handle.read().strip() or None
        except FileNotFoundError:
            return None

    def reserve_ip(self, ip: str, vm_cid: VmCid) -> None:
        """Written to a temp file in the VM's own directory and linked into place, so the
        reservation appears with its owner in it or not at all."""
        temp = self.dir(VMRecord, vm_cid) / f".ip-{canonical_ip(ip)}"
        atomic_write_bytes(temp, vm_cid.encode())
        try:
            try:
                os.link(temp, self._ip_path(ip))
            except FileExistsError:
                if self.ip_owner(ip) is not None:
                    raise
                # an empty reservation, left by a CPI before this one wrote them atomically
                self._ip_path(ip).unlink()
                os.link(temp, self._ip_path(ip))
        finally:
            temp.unlink(missing_ok=True)
        reached("ip reserved")

    def release_ip(self, entry: str, vm_cid: VmCid) -> None:
        """`entry`: a canonical address, or a name as `ips_of` lists it."""
        if "/" in entry or entry in (".", ".."):
            return
        path = self.root / "ips" / entry
        if self._owner(path) == vm_cid:
            path.unlink(missing_ok=True)
            reached("ip released")

    def ips_of(self, vm_cid: VmCid) -> list[str]:
        """Every address reserved for this VM, whether its record knew of it or not."""
        directory = self.root / "ips"
        return [ip for ip in sorted(os.listdir(directory)) if self._owned(directory / ip, vm_cid)]

    def _owned(self, path: Path, vm_cid: VmCid) -> bool:
        """Whether the reservation at `path` is this VM's. A planted entry names no owner,
        so it is nobody's here: the VM whose record names that address meets it (and its
        PlantedEntry) when it releases it, and every other VM's delete goes on."""
        try:
            return self._owner(path) == vm_cid
        except PlantedEntry:
            return False
