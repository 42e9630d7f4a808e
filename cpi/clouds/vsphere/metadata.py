"""Metadata on vSphere objects as the official CPI keeps it: custom attributes (custom
fields) of VMs, one per key, defined on first use.

Field definitions are read once per call (one request); a field another process defined
meanwhile (DuplicateName) is taken, not an error. Values are set one request per key, as
vSphere has no call that sets several.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")


def _fields(session: Session) -> dict[str, int]:
    """Every custom field that applies to VMs (or to every kind), name → key."""
    manager = session.content.customFieldsManager
    return {f.name: f.key for f in manager.field or [] if f.managedObjectType in (None, _vm_type())}


def _vm_type() -> Any:
    from pyVmomi import vim

    return vim.VirtualMachine


def set_values(session: Session, entity: Any, values: dict[str, str]) -> None:
    """Set each custom attribute of `entity` (a VM) to its value, defining those missing."""
    from pyVmomi import vim

    if not values:
        return
    manager = session.content.customFieldsManager
    known = _fields(session)
    for name in values:
        if name in known:
            continue
        try:
            field = manager.AddCustomFieldDef(name=name, moType=vim.VirtualMachine)
            known[name] = field.key
        except vim.fault.DuplicateName:  # another process defined it meanwhile
            known = _fields(session)
    for name, value in values.items():
        entity.setCustomValue(key=name, value=str(value))


def values_of(session: Session, entity: Any) -> dict[str, str]:
    """The custom attributes `entity` has, by name."""
    names = {key: name for name, key in _fields(session).items()}
    return {names[v.key]: v.value for v in entity.customValue or [] if v.key in names}
