"""Plan mode on vSphere (cpi.plan): every SOAP method not known to be read-only
(audited.READS), every HTTP request that writes, and every NFC upload is withheld at the
session's stub and at transfer.py; the CPI answers it itself and the call goes on.

- What a withheld method would make gets a placeholder moref (a clone's VM `vm-planned1`, a
  folder, an import lease, a snapshot); a task gets a placeholder task, whose wait
  (tasks.wait) is noted in the plan, not waited, and whose result is that placeholder.
- A read that names a placeholder ends the plan (cpi.plan.Horizon): only the vCenter could
  say what the clone's devices or the lease's URLs would be.
- So does a read of what a withheld method would have changed: after a withheld
  ReconfigVM_Task the VM's `config` read now is the old one, and code reading it would go on
  from a state the real call never sees. Each object keeps the properties its withheld
  changes touch (TOUCHES; all of them when not listed); reads of others go out as usual
  (a VM powered off in the plan still has its devices to read).
- MakeDirectory of a directory that is there is answered FileAlreadyExists, as the vCenter
  would (a real read finds it first), so the plan lists only directories the call makes.

vSphere has no dry run: each mutation says its permission was not checked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from . import audited
from .made_up import state as _state

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.vsphere")

UNCHECKED = "not checked: vSphere has no dry run"

#: method -> the properties of its object it changes (a read of any other still goes out);
#: a withheld method not listed changes them all ("*")
_POWER = ("runtime", "summary", "guest", "guestHeartbeatStatus", "overallStatus")
TOUCHES: dict[str, tuple[str, ...]] = {
    "PowerOnVM_Task": _POWER, "PowerOffVM_Task": _POWER, "ResetVM_Task": _POWER,
    "setCustomValue": ("customValue", "value", "summary", "availableField"),
    "ReconfigVM_Task": ("config", "layout", "layoutEx", "storage", "summary", "datastore", "network", "guest"),
    "CreateSnapshot_Task": ("snapshot", "rootSnapshot", "layout", "layoutEx", "storage", "summary"),
    "AddCustomFieldDef": ("field",),
}
#: what a withheld method makes: (the vSphere type of the placeholder, its moref's prefix)
MAKES = {"CloneVM_Task": ("VirtualMachine", "vm-"), "CreateFolder": ("Folder", "group-"),
         "ImportVApp": ("HttpNfcLease", "lease-"), "CreateSnapshot_Task": ("VirtualMachineSnapshot", "snapshot-")}


def _vim(type_name: str) -> Any:
    from pyVmomi import vim

    return getattr(vim, type_name)


def withhold(the_plan: Plan, session: Any, stub: Any, mo: Any, method: str, params: dict[str, Any],
             is_task: bool) -> Any:
    """Answer a mutating method without sending it, and put it in the call's plan."""
    if method == "MakeDirectory" and _directory_exists(the_plan, session, params):
        from pyVmomi import vim

        raise vim.fault.FileAlreadyExists(file=params.get("name"))
    made = None
    if method in MAKES:
        type_name, prefix = MAKES[method]
        made = _vim(type_name)(the_plan.placeholder(prefix), stub)
    elif method == "AddCustomFieldDef":
        made = _vim("CustomFieldsManager").FieldDef(key=0, name=params.get("name"))
    log.info("plan: %s.%s not sent", type(mo).__name__.rsplit(".", 1)[-1], method)
    with the_plan.permission(UNCHECKED):
        audited.after(mo, method, params, made, plan=the_plan)
    own = audited.moid(mo)
    if own is not None:
        _state(the_plan).touched.setdefault(own, set()).update(TOUCHES.get(method, ("*",)))
    if not is_task:
        return made
    task = _vim("Task")(the_plan.placeholder("task-"), stub)
    _state(the_plan).results[task._moId] = made
    return task


def before_read(the_plan: Plan, mo: Any, method: str, args: Any) -> None:
    """Before a read goes out: Horizon when it names a placeholder, or reads what a withheld
    change would have changed."""
    what = f"{type(mo).__name__.rsplit('.', 1)[-1]}.{method}"
    plain: list[str] = []
    _flatten([mo, args], plain, 0)
    the_plan.read(what, plain)
    touched = _state(the_plan).touched
    if not touched:
        return
    for obj, paths in _reads(mo, method, args):
        changed = touched.get(audited.moid(obj) or "")
        if changed and ("*" in changed or paths is None or any(p.split(".")[0] in changed for p in paths)):
            raise the_plan.stop(f"{what} reads {audited.moid(obj)}, which a change the plan withheld would have "
                                "changed: only the real call could tell what it then holds")


def _reads(mo: Any, method: str, args: Any) -> list[tuple[Any, list[str] | None]]:
    """(object, property paths or None for all) that a read reads."""
    if method == "Fetch":
        return [(mo, [args[0]])] if args else [(mo, None)]
    if method in ("RetrieveProperties", "RetrievePropertiesEx", "RetrieveContents"):
        specs = args[0] if args else []
        found: list[tuple[Any, list[str] | None]] = []
        for spec in specs or []:
            paths: list[str] | None = []
            for prop in spec.propSet or []:
                if prop.all or paths is None:
                    paths = None
                else:
                    paths.extend(prop.pathSet or [])
            found.extend((o.obj, paths) for o in spec.objectSet or [])
        return found
    return [(mo, None)]


def _flatten(value: Any, into: list[str], depth: int) -> None:
    """The strings and morefs of a request's arguments, for Plan.read's placeholder check."""
    if depth > 12 or value is None:
        return
    if isinstance(value, str):
        into.append(value)
        return
    ref = getattr(value, "_moId", None)
    if ref is not None:
        into.append(str(ref))
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _flatten(item, into, depth + 1)
        return
    properties = getattr(value, "_GetPropertyList", None)
    if properties is not None:  # a pyVmomi data object
        for prop in properties():
            _flatten(getattr(value, prop.name, None), into, depth + 1)


def _directory_exists(the_plan: Plan, session: Any, params: dict[str, Any]) -> bool:
    """Whether the datastore directory `[ds] path` is there: one datastore search, sent."""
    from pyVmomi import vim

    from . import tasks

    name = str(params.get("name") or "")
    datastore_name = name[1:].partition("]")[0] if name.startswith("[") else ""
    datacenter = params.get("datacenter")
    if not datastore_name or datacenter is None or audited.moid(datacenter) in the_plan.placeholders:
        return False
    datastore = next((d for d in datacenter.datastore if d.name == datastore_name), None)
    if datastore is None:
        return False
    try:
        tasks.wait(session, datastore.browser.SearchDatastore_Task(
            datastorePath=name, searchSpec=vim.host.DatastoreBrowser.SearchSpec(matchPattern=["-"])),
            f"looking for {name}")
    except (vim.fault.FileNotFound, vim.fault.CannotAccessFile):
        return False
    return True


def http(the_plan: Plan, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
    """A writing HTTP request (a datastore file, a tag attachment), withheld: answered as a
    success with no body."""
    log.info("plan: %s %s not sent", method, path.split("?", 1)[0])
    with the_plan.permission(UNCHECKED):
        audited.http_after(method, path, body, plan=the_plan)
    return (204 if method == "DELETE" else 201), b""


def upload(the_plan: Plan, url: str, size: int, what: str) -> None:
    """An NFC upload, withheld."""
    log.info("plan: %s not sent", what)
    with the_plan.permission(UNCHECKED):
        audited.upload_after(url, size, plan=the_plan)
