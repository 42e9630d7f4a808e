"""The local cloud's state directory: one directory per resource, a JSON record in each.

    stemcells/<sc-…>/{stemcell.json, image}
    vms/<vm-…>/{vm.json, cpi-agent-env.json, agent.json, agent.log, ephemeral.img, bosh/}
    disks/<disk-…>/{disk.json, disk.img}
    snapshots/<snap-…>/{snapshot.json, disk.img}
    ips/<address>        one file per reserved manual-network IP, holding its vm_cid
    locks/               flock files (see cpi.locks)

A record is written last when a resource is made and removed first when it is deleted,
so a process killed half way leaves either nothing the CPI reports or a record whose
delete finishes the job.
"""

from __future__ import annotations

import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from cpi.files import atomic_write_json, read_json

R = TypeVar("R", bound=BaseModel)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class StemcellRecord(BaseModel):
    stemcell_cid: str
    cloud_properties: dict[str, Any] = {}
    tags: dict[str, str] = {}
    image: str | None = None  # file name inside the stemcell dir; None for a light stemcell
    sha1: str | None = None
    size: int = 0
    created_at: str = Field(default_factory=now)


class VMRecord(BaseModel):
    vm_cid: str
    agent_id: str
    stemcell_cid: str
    state: str = "creating"  # creating | running | deleting
    cloud_properties: dict[str, Any] = {}
    networks: dict[str, Any] = {}
    ips: list[str] = []
    pid: int | None = None
    pid_start: str | None = None  # the process's start time, so a recycled pid is never signalled
    disks: dict[str, Any] = {}  # disk_cid -> hint, in attach order
    metadata: dict[str, str] = {}
    boots: int = 0
    created_at: str = Field(default_factory=now)


class DiskRecord(BaseModel):
    disk_cid: str
    size: int  # MiB
    cloud_properties: dict[str, Any] = {}
    vm_cid: str | None = None  # attached to
    metadata: dict[str, str] = {}
    created_at: str = Field(default_factory=now)


class SnapshotRecord(BaseModel):
    snapshot_cid: str
    disk_cid: str
    size: int
    metadata: dict[str, Any] = {}
    created_at: str = Field(default_factory=now)


KINDS: dict[type[BaseModel], tuple[str, str, str, str]] = {
    # record type: (directory, record file, cid prefix, cid field)
    StemcellRecord: ("stemcells", "stemcell.json", "sc", "stemcell_cid"),
    VMRecord: ("vms", "vm.json", "vm", "vm_cid"),
    DiskRecord: ("disks", "disk.json", "disk", "disk_cid"),
    SnapshotRecord: ("snapshots", "snapshot.json", "snap", "snapshot_cid"),
}


class Store:
    def __init__(self, root: Path):
        self.root = Path(root).expanduser()
        for sub in ("stemcells", "vms", "disks", "snapshots", "ips", "locks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @property
    def lock_dir(self) -> Path:
        return self.root / "locks"

    @staticmethod
    def new_cid(kind: type[BaseModel]) -> str:
        return f"{KINDS[kind][2]}-{uuid.uuid4()}"

    def dir(self, kind: type[BaseModel], cid: str) -> Path:
        directory, _, prefix, _ = KINDS[kind]
        # A cid is used as a path component: refuse anything that could step outside.
        if not cid.startswith(prefix + "-") or "/" in cid or cid in (".", "..") or "\0" in cid:
            return self.root / directory / ".invalid"
        return self.root / directory / cid

    def load(self, kind: type[R], cid: str) -> R | None:
        path = self.dir(kind, cid) / KINDS[kind][1]
        try:
            return kind.model_validate(read_json(path))
        except FileNotFoundError:
            return None

    def save(self, record: BaseModel) -> None:
        cid = getattr(record, KINDS[type(record)][3])
        atomic_write_json(self.dir(type(record), cid) / KINDS[type(record)][1], record.model_dump())

    def remove(self, kind: type[BaseModel], cid: str) -> bool:
        """Delete the record first, then the directory; True if there was a record."""
        directory = self.dir(kind, cid)
        record = directory / KINDS[kind][1]
        existed = record.exists()
        record.unlink(missing_ok=True)
        if directory.exists():
            shutil.rmtree(directory)
        return existed

    def all(self, kind: type[R]) -> list[R]:
        found = []
        directory = KINDS[kind][0]
        for entry in sorted((self.root / directory).iterdir()):
            record = self.load(kind, entry.name)
            if record is not None:
                found.append(record)
        return found

    # -- IP reservations: O_EXCL files, checked and taken under the "ips" lock

    def ip_owner(self, ip: str) -> str | None:
        try:
            return (self.root / "ips" / ip).read_text().strip() or None
        except FileNotFoundError:
            return None

    def reserve_ip(self, ip: str, vm_cid: str) -> None:
        fd = os.open(self.root / "ips" / ip, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(vm_cid)

    def release_ip(self, ip: str, vm_cid: str) -> None:
        if self.ip_owner(ip) == vm_cid:
            (self.root / "ips" / ip).unlink(missing_ok=True)
