"""The vCenter extension the official CPI registers, and the mark (managedBy) it puts on the
VMs and stemcells it makes: the vSphere client then shows them as managed by BOSH and warns
an operator who edits or deletes one by hand. The same key and resource type as the official
CPI's, so that the VMs either CPI made carry the same mark, before and after a switch.

Registered on create_stemcell (as the official CPI does); a user without the privilege to
register extensions still gets stemcells and VMs, unmarked, and a warning in the log.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

from . import errors

if TYPE_CHECKING:
    from pyVmomi import vim

    from .vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")

KEY = "sddc.cpi.extension"
RESOURCE = "cpi-managed-resource"
VERSION = "1.0.0"

#: whether the session's vCenter has the extension, asked once per session (a warm helper
#: keeps its sessions, so a create_vm does not ask again)
_known: weakref.WeakKeyDictionary[Session, bool] = weakref.WeakKeyDictionary()


def _find(session: Session) -> bool:
    manager = session.content.extensionManager
    if manager is None:
        return False
    try:
        return manager.FindExtension(extensionKey=KEY) is not None
    except Exception as exc:
        if errors.fault_name(exc) is None:
            raise
        log.warning("the vCenter's extension manager answered %s: VMs are not marked as managed by BOSH",
                    errors.describe(exc))
        return False


def register(session: Session) -> None:
    """The extension, registered unless it is there: its absence only costs the mark."""
    from pyVmomi import vim

    if _find(session):
        _known[session] = True
        return
    extension = vim.Extension(
        key=KEY, version=VERSION, lastHeartbeatTime=session.si.CurrentTime(), shownInSolutionManager=True,
        description=vim.Description(label="BOSH vSphere CPI", summary="BOSH vSphere CPI extension"),
        managedEntityInfo=[vim.ext.ManagedEntityInfo(type=RESOURCE,
                                                     description="The lifecycle of this resource is managed by BOSH")])
    try:
        session.content.extensionManager.RegisterExtension(extension=extension)
    except Exception as exc:
        if errors.fault_name(exc) is None:
            raise
        if not _find(session):
            log.warning("registering the vCenter extension %s failed (%s): VMs are not marked as managed by "
                        "BOSH in the vSphere client", KEY, errors.describe(exc))
            _known[session] = False
            return
    log.info("vCenter extension %s registered: BOSH's VMs show as managed by it", KEY)
    _known[session] = True


def managed_by(session: Session) -> vim.ext.ManagedByInfo | None:
    """The mark for a VM or stemcell this call makes; None when the vCenter lacks the
    extension (one request the first time a session asks)."""
    from pyVmomi import vim

    if session not in _known:
        _known[session] = _find(session)
    return vim.ext.ManagedByInfo(extensionKey=KEY, type=RESOURCE) if _known[session] else None
