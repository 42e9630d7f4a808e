"""What a local VM sees of its persistent disks: the files it keeps in its store.

A local disk is a directory, `<state_dir>/disks/<disk_cid>/`, holding `disk.img` (a file of
the disk's size: sparse, or with its blocks reserved for `type: preallocated`; what
`resize_disk` grows) and `store/`, the files the disk holds. A VM's agent keeps its
persistent data under `BASE/store` (bosh-agent's dummy platform plays /var/vcap in BASE,
and records its mount of the disk there; the built-in agent uses the same path), and
`BASE/store_migration_target` while a second disk is attached for a migration. So
attaching a disk points those paths at the disk's `store/`: the first disk attached at
`BASE/store`, a second at `BASE/store_migration_target`; when the first is detached, the
second moves to `BASE/store`, as the agent's own mounts end after a migration. The links
are relative, inside the state dir, so what a job writes lands on the disk and outlives
the VM (delete_vm, a recreate, an upgrade of the CPI), and two disks stay apart.

What the VM had written into a real `BASE/store` before any disk was attached (on its
root disk, as on a real VM) is set aside while a disk is attached and comes back when the
last one is detached. The disk's size is not enforced on the files in `store/`: this is a
development cloud, and a directory has no size of its own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: the disk's files, in the disk's directory
DISK_STORE = "store"
#: where the VM sees its first and second attached disk, in the VM's base directory
MOUNT_POINTS = ("store", "store_migration_target")
#: what a real BASE/store held before a disk was attached
SET_ASIDE = ".store-before-disk"


def disk_store(disk_dir: Path) -> Path:
    return disk_dir / DISK_STORE


def make_disk_store(disk_dir: Path) -> Path:
    """The disk's files (made on create, and on first attach of a disk from an earlier
    release, which had only disk.img)."""
    store = disk_store(disk_dir)
    store.mkdir(mode=0o700, exist_ok=True)
    return store


def point(vm_dir: Path, disk_dirs: list[Path]) -> None:
    """Make the VM's mount points name the disks attached, in attach order."""
    for index, name in enumerate(MOUNT_POINTS):
        path = vm_dir / name
        wanted = os.path.relpath(make_disk_store(disk_dirs[index]), vm_dir) if index < len(disk_dirs) else None
        if path.is_symlink():
            if os.readlink(path) == wanted:
                continue
            path.unlink()
        elif path.exists() and wanted is not None:
            if index == 0 and not (vm_dir / SET_ASIDE).exists():
                path.rename(vm_dir / SET_ASIDE)
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
            else:
                raise OSError(f"{path} is a directory with files: not replaced by a disk")
        if wanted is not None:
            os.symlink(wanted, path)
        elif index == 0 and (vm_dir / SET_ASIDE).exists() and not path.exists():
            (vm_dir / SET_ASIDE).rename(path)


def copy_disk_store(disk_dir: Path, target_dir: Path) -> None:
    """A snapshot's copy of the disk's files (links inside kept as links)."""
    source = disk_store(disk_dir)
    if source.is_dir():
        shutil.copytree(source, disk_store(target_dir), symlinks=True)
