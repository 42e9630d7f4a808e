"""The official CPI's record of a VM's persistent disks, kept as it keeps it, so that either
CPI detaches and deletes what the other attached.

bosh-vsphere-cpi gives a VM one vApp property per persistent disk it attaches (category
"BOSH Persistent Disks"; key: the disk device's key; id and label: the disk's cid; value:
the disk's `[ds] path` when attached). Its detach_disk reads it: a disk without one is
moved to `<disk_path>/<file name>` on its datastore, which for a disk in disk_path is its
own path and fails (FileAlreadyExists); a disk with one that vSphere has since moved
(Storage vMotion puts it in the VM's folder) is moved back to the recorded path. Its
delete_vm detaches every disk a property names as well as the independent ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpi.cids import DiskCid

if TYPE_CHECKING:
    from pyVmomi import vim

CATEGORY = "BOSH Persistent Disks"
DESCRIPTION = "Used by BOSH to track persistent disks. Change at your own risk."


def of(vm: Any) -> dict[int, Any]:
    """The VM's records, by the key of the disk device each is of (one read of its config)."""
    config = vm.config.vAppConfig
    return {p.key: p for p in (config.property if config is not None else None) or [] if p.category == CATEGORY}


def labels(recorded: dict[int, Any]) -> dict[int, DiskCid]:
    """Device key → the disk cid its record names."""
    return {key: record.label for key, record in recorded.items() if record.label}


def _info(key: int, cid: DiskCid, path: str) -> vim.vApp.PropertyInfo:
    from pyVmomi import vim

    return vim.vApp.PropertyInfo(key=key, id=cid, label=cid, category=CATEGORY, type="string", value=path,
                                 description=DESCRIPTION, userConfigurable=True)


def record(key: int, cid: DiskCid, path: str, replacing: bool = False) -> vim.vApp.VmConfigSpec:
    """The vAppConfig that records disk `cid` at `path` as device `key` (`replacing`: the VM
    has a record of that key already, of another disk: a key vSphere gave again)."""
    from pyVmomi import vim

    operation = "edit" if replacing else "add"
    return vim.vApp.VmConfigSpec(property=[vim.vApp.PropertySpec(operation=operation, info=_info(key, cid, path))])


def forget(keys: list[int]) -> vim.vApp.VmConfigSpec | None:
    """The vAppConfig that removes the records of these device keys (None: none to remove)."""
    from pyVmomi import vim

    if not keys:
        return None
    return vim.vApp.VmConfigSpec(property=[vim.vApp.PropertySpec(operation="remove", removeKey=key) for key in keys])


def moved_from(disk: Any, recorded: dict[int, Any]) -> str | None:
    """The path `disk` was recorded at when vSphere has moved it since (its file is elsewhere
    now), on the datastore it is on now, as the official CPI moves it back; else None."""
    found = recorded.get(disk.key)
    current = getattr(disk.backing, "fileName", "") or ""
    if found is None or not found.value or "] " not in current:
        return None
    was = str(found.value).split("] ", 1)[1]
    if was.removesuffix(".vmdk").strip() == current.split("] ", 1)[1].removesuffix(".vmdk").strip():
        return None
    return f"{current.split('] ', 1)[0]}] {was}"
