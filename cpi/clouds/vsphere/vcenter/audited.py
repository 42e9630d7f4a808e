"""What a vSphere request changes, in words: the audit line of each mutation (cpi.audit) and,
under `cpi plan`, the step that stands for it.

Why one table of read-only methods and not one of mutating ones: vSphere has hundreds of
methods and new ones with each release, and a plan must change nothing. So a method goes to
the vCenter in plan mode only when READS names it; every other method is a mutation, withheld
and recorded, whether MUTATIONS describes it or not (an unknown one gets a bare line naming
the method and its object). MUTATIONS only says how to describe the ones this cloud sends.

Lines name the objects as the vCenter does (`vm-42`, `group-v7`): the moref is in the request
already, while the name would cost a request per change. What a change makes is named by the
name it is given (a clone's `vm-<uuid>`, a disk's `[ds] path`), which is the cid BOSH sees.
Values that may hold secrets (an agent's settings in `guestinfo.userdata`) are left out:
only the keys a reconfiguration sets are listed.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.parse
from typing import TYPE_CHECKING, Any

from cpi import audit

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.vsphere")

#: SOAP methods that change nothing in the inventory: the only ones a plan sends. Session
#: and property-collector housekeeping (logins, views, filters, collectors) belongs to this
#: process's session, not to the inventory; CreateImportSpec only computes a spec.
READS = frozenset({
    "Fetch",  # a property read (pyVmomi's accessor)
    "RetrieveServiceContent", "RetrieveContent", "CurrentTime", "Login", "Logout", "SessionIsActive",
    "RetrieveProperties", "RetrievePropertiesEx", "ContinueRetrievePropertiesEx", "CancelRetrievePropertiesEx",
    "RetrieveContents", "WaitForUpdates", "WaitForUpdatesEx", "CheckForUpdates", "CancelWaitForUpdates",
    "CreateFilter", "DestroyPropertyFilter", "CreatePropertyCollector", "DestroyPropertyCollector",
    "CreateContainerView", "CreateListView", "CreateInventoryView", "DestroyView",
    "FindByInventoryPath", "FindByUuid", "FindAllByUuid", "FindByIp", "FindAllByIp", "FindByDnsName",
    "FindAllByDnsName", "FindChild", "FindByDatastorePath",
    "QueryVirtualDiskUuid", "QueryVirtualDiskInfo", "QueryVirtualDiskGeometry",
    "SearchDatastore_Task", "SearchDatastoreSubFolders_Task",
    "CreateImportSpec", "ParseDescriptor", "ValidateHost",
    "QueryConfigOption", "QueryConfigOptionDescriptor", "QueryConfigTarget", "QueryTargetCapabilities",
    "FindExtension", "RetrieveVendorDeviceGroupInfo",
    # the storage policy service (placement/pbm.py)
    "PbmRetrieveServiceContent", "PbmQueryProfile", "PbmRetrieveContent", "PbmCheckRequirements",
    "PbmQueryAssociatedProfile",
})

#: HTTP methods of the file service and the REST API that change nothing.
HTTP_READS = frozenset({"GET", "HEAD", "OPTIONS"})

#: Methods sent (and, in plan mode, withheld) without a line of their own: an NFC lease's
#: keep-alive, many times per upload, changes nothing a reader of the trail looks for.
SILENT = frozenset({"HttpNfcLeaseProgress"})

#: The kind of object in a line, by the vSphere type of its moref.
KINDS = {"VirtualMachine": "vm", "Folder": "folder", "ClusterComputeResource": "cluster",
         "ResourcePool": "resource_pool", "HttpNfcLease": "import_lease", "VirtualMachineSnapshot": "snapshot",
         "Task": "task", "Datastore": "datastore", "CustomFieldsManager": "custom_field"}


def read_only(method: str) -> bool:
    return method in READS


def kind_of(mo: Any) -> str:
    name = type(mo).__name__.rsplit(".", 1)[-1]
    return KINDS.get(name, name)


def moid(value: Any) -> str | None:
    return getattr(value, "_moId", None) if value is not None else None


def _vm_kind(name: str | None) -> str:
    """A clone of the template folder's (`sc-...`) is a stemcell or its copy; others are VMs."""
    return "stemcell" if isinstance(name, str) and name.startswith("sc-") else "vm"


def _devices(changes: Any) -> list[str]:
    """A device change list as words: `add VirtualDisk [ds] cpi-disks/disk-1.vmdk`."""
    out = []
    for change in changes or []:
        device = change.device
        what = type(device).__name__.rsplit(".", 1)[-1]
        name = getattr(getattr(device, "backing", None), "fileName", None)
        operation = str(change.operation) if change.operation is not None else "edit"
        out.append(" ".join(str(p) for p in (operation, what, name) if p))
    return out


def _config(spec: Any) -> dict[str, Any]:
    """What a VM ConfigSpec sets, keys only for extraConfig (its values may be secrets)."""
    if spec is None:
        return {}
    return {"cpu": spec.numCPUs, "ram_mib": spec.memoryMB, "devices": _devices(spec.deviceChange) or None,
            "extra_config": sorted(o.key for o in spec.extraConfig or []) or None,
            "version": getattr(spec, "version", None), "vapp_properties": _vapp(getattr(spec, "vAppConfig", None))}


def _vapp(config: Any) -> list[str] | None:
    """A vApp config's property changes as words: `add 2001 disk-1` (the disk records of
    vms/records.py), `remove 2001`."""
    changes = [f"{p.operation} {p.info.key} {p.info.label}" if p.info is not None else f"{p.operation} {p.removeKey}"
               for p in getattr(config, "property", None) or []]
    return changes or None


def _cluster(spec: Any) -> dict[str, Any]:
    """What a cluster ConfigSpecEx changes: its rules, groups and per-VM DRS settings."""
    def names(specs: Any, attribute: str) -> list[str] | None:
        found = []
        for item in specs or []:
            info = getattr(item, "info", None)
            label = getattr(info, attribute, None) if info is not None else getattr(item, "removeKey", None)
            found.append(f"{item.operation} {label}")
        return found or None

    return {"rules": names(spec.rulesSpec, "name"), "groups": names(spec.groupSpec, "name"),
            "drs_vms": [f"{s.operation} {moid(s.info.key) if s.info else s.removeKey}"
                        for s in spec.drsVmConfigSpec or []] or None}


def describe(mo: Any, method: str, params: dict[str, Any], answer: Any = None) -> tuple[str, str, Any, Any, Any]:
    """(action, resource type, resource id, old, new) of one mutating method; `answer` is
    what it returned (a folder made is named by its moref; a task's result is not known yet)."""
    p = params.get
    own = moid(mo)
    if method == "CloneVM_Task":
        spec = p("spec")
        location = spec.location if spec is not None else None
        new = {"source": own, "folder": moid(p("folder")),
               "datastore": moid(location.datastore) if location is not None else None,
               "pool": moid(location.pool) if location is not None else None,
               "linked": bool(spec is not None and spec.snapshot is not None), **_config(spec.config if spec else None)}
        return "create", _vm_kind(p("name")), p("name"), None, new
    if method == "ImportVApp":
        spec = p("spec")
        name = getattr(getattr(spec, "configSpec", None), "name", None)
        return "import", _vm_kind(name), name, None, {"pool": own, "folder": moid(p("folder"))}
    if method == "CreateFolder":
        return "create", "folder", moid(answer) or p("name"), None, {"name": p("name"), "parent": own}
    if method == "ReconfigVM_Task":
        return "reconfigure", "vm", own, None, _config(p("spec"))
    if method == "ReconfigureComputeResource_Task":
        return "reconfigure", "cluster", own, None, _cluster(p("spec"))
    simple = {"PowerOnVM_Task": "power_on", "PowerOffVM_Task": "power_off", "ResetVM_Task": "reboot",
              "Destroy_Task": "delete", "HttpNfcLeaseComplete": "complete", "HttpNfcLeaseAbort": "abort",
              "CancelTask": "cancel"}
    if method in simple:
        return simple[method], kind_of(mo), own, None, None
    if method == "UpgradeVM_Task":
        return "upgrade", "vm", own, None, {"version": p("version") or "the newest"}
    if method == "CreateSnapshot_Task":
        return "snapshot", "vm", own, None, {"name": p("name")}
    if method == "setCustomValue":
        return "tag", kind_of(mo), own, None, {p("key"): p("value")}
    if method == "AddCustomFieldDef":
        return "create", "custom_field", p("name"), None, {"applies_to": getattr(p("moType"), "__name__", None)}
    if method == "CreateVirtualDisk_Task":
        spec = p("spec")
        return "create", "disk", p("name"), None, {
            "size_mib": (spec.capacityKb // 1024) if spec is not None and spec.capacityKb else None,
            "type": getattr(spec, "diskType", None)}
    if method == "DeleteVirtualDisk_Task":
        return "delete", "disk", p("name"), None, None
    if method == "CopyVirtualDisk_Task":
        return "copy", "disk", p("destName"), None, {"source": p("sourceName")}
    if method == "ExtendVirtualDisk_Task":
        return "resize", "disk", p("name"), None, {"size_mib": (p("newCapacityKb") or 0) // 1024}
    if method in ("MoveVirtualDisk_Task", "MoveDatastoreFile_Task"):
        return "move", "disk" if "Disk" in method else "file", p("sourceName"), None, {"to": p("destName")}
    if method == "DeleteDatastoreFile_Task":
        return "delete", "file", p("name"), None, None
    if method == "MakeDirectory":
        return "create", "directory", p("name"), None, None
    if method == "RegisterExtension":
        extension = p("extension")
        return "register", "extension", getattr(extension, "key", None), None, None
    # a method this table does not know: still a line, naming it and its object
    return method, kind_of(mo), own, None, None


def after(mo: Any, method: str, params: dict[str, Any], answer: Any = None, *, plan: Plan | None = None) -> None:
    """The audit line of a mutating method the vCenter accepted (a task it started counts:
    the change is under way); under `plan` (the call's, cpi.plan), of one it withheld, the
    line going to the plan."""
    if method in SILENT:
        return
    try:
        action, kind, resource, old, new = describe(mo, method, params, answer)
    except Exception as exc:  # noqa: BLE001 - an audit line must never fail the CPI call
        log.warning("audit: cannot describe %s (%s); recording it bare", method, type(exc).__name__)
        action, kind, resource, old, new = method, kind_of(mo), moid(mo), None, None
    if isinstance(new, dict):
        new = {k: v for k, v in new.items() if v is not None} or None
    audit.record(action, resource, {"old": old, "new": new}, plan=plan, resource_type=kind,
                 request=f"{type(mo).__name__.rsplit('.', 1)[-1]}.{method}")


def http_after(method: str, path: str, body: bytes | None, *, plan: Plan | None = None) -> None:
    """The audit line of a change through HTTP: a file written or deleted on a datastore
    (`/folder/...`), a tag attached through the REST API, a stemcell disk uploaded, an NSX-T
    group, pool, port or VM record, an NSX-V security group or load balancer pool changed."""
    parts = urllib.parse.urlsplit(path)
    query = dict(urllib.parse.parse_qsl(parts.query))
    request = f"{method} {parts.path}"
    if parts.path.startswith("/folder/"):
        where = f"[{query.get('dsName', '?')}] {urllib.parse.unquote(parts.path[len('/folder/'):])}"
        if method == "DELETE":
            audit.record("delete", where, {"old": None, "new": None}, plan=plan, resource_type="file", request=request)
        else:
            audit.record("write", where, {"old": None, "new": {"bytes": len(body or b"")}}, plan=plan,
                         resource_type="file", request=request)
        return
    if "tag-association" in parts.path and query.get("~action") == "attach":
        tag = urllib.parse.unquote(parts.path.rsplit("/", 1)[-1]).removeprefix("id:")
        target = (json.loads(body or b"{}").get("object_id") or {}).get("id")
        audit.record("attach", tag, {"old": None, "new": {"vm": target}}, plan=plan, resource_type="tag",
                     request=request)
        return
    kind = next((kind for pattern, kind in _NSXT_KINDS if re.match(pattern, parts.path)), None)
    if kind is not None:  # NSX-T: a group's or pool's members, a port's tags or VIF type, a VM's tags
        action = query.get("action", {"POST": "create", "DELETE": "delete"}.get(method, "update")).lower()
        target = parts.path.rsplit("/", 1)[-1]
        if kind == "nsxt_vm":  # the VM is named in the body
            target = str(json.loads(body or b"{}").get("external_id"))
        audit.record(action, target, {"old": None, "new": None}, plan=plan, resource_type=kind, request=request)
        return
    if parts.path.startswith(("/api/2.0/services/securitygroup/", "/api/4.0/edges/")):  # NSX-V
        _nsxv(method, parts.path, body, request, plan)
        return
    audit.record(method.lower(), parts.path, {"old": None, "new": None}, plan=plan, resource_type="http",
                 request=request)


#: NSX-T's paths of what the CPI changes, by the kind the audit trail names
_NSXT_KINDS = (
    (r"/policy/api/v1/infra/domains/[^/]+/groups/", "nsxt_group"),
    (r"/policy/api/v1/infra/lb-pools/", "nsxt_server_pool"),
    (r"/policy/api/v1/infra/(tier-1s/[^/]+/)?segments/[^/]+/ports/", "nsxt_segment_port"),
    (r"/api/v1/ns-groups/", "nsxt_ns_group"),
    (r"/api/v1/loadbalancer/pools/", "nsxt_server_pool"),
    (r"/api/v1/logical-ports(/|$)", "nsxt_logical_port"),
    (r"/api/v1/fabric/virtual-machines$", "nsxt_vm"),
    (r"/api/v1/logical-routers/[^/]+/routing/advertisement$", "nsxt_route_advertisement"),
    (r"/api/v1/logical-routers(/|$)", "nsxt_logical_router"),
    (r"/api/v1/logical-router-ports(/|$)", "nsxt_logical_router_port"),
    (r"/api/v1/logical-switches(/|$)", "nsxt_logical_switch"),
    (r"/api/v1/pools/ip-subnets(/|$)", "nsxt_ip_block_subnet"),
    (r"/(policy/)?api/v1/", "nsxt"),
)


def _nsxv(method: str, path: str, body: bytes | None, request: str, plan: Plan | None) -> None:
    """An NSX-V change: a security group made (named by its name: its id is in the answer),
    a VM added to one, a load balancer pool written (with the names of its members)."""
    parts = path.split("/")
    if "/members/" in path:  # /api/2.0/services/securitygroup/<id>/members/<vm moref>
        audit.record("update", parts[5], {"old": None, "new": {"member": parts[-1]}},
                     plan=plan, resource_type="nsxv_security_group", request=request)
    elif "/securitygroup/bulk/" in path:
        audit.record("create", next(iter(_xml_texts(body, "name")), None), {"old": None, "new": {"scope": parts[-1]}},
                     plan=plan, resource_type="nsxv_security_group", request=request)
    elif "/loadbalancer/config/pools/" in path:  # /api/4.0/edges/<edge>/loadbalancer/config/pools/<pool>
        audit.record("update", parts[-1], {"old": None, "new": {"edge": parts[4],
                                                                "members": _xml_texts(body, "member/name")}},
                     plan=plan, resource_type="nsxv_lb_pool", request=request)
    else:
        audit.record(method.lower(), path, {"old": None, "new": None}, plan=plan, resource_type="nsxv", request=request)


def _xml_texts(body: bytes | None, path: str) -> list[str]:
    """The texts at `path` of a document this CPI wrote itself (so trusted); [] when unreadable."""
    import xml.etree.ElementTree as ET  # nosec B405  # the reason is in vsphere/vcenter/session.py

    try:
        return [found.text or "" for found in ET.fromstring(body or b"").findall(path)]  # nosec B314  # as above
    except ET.ParseError:
        return []


def upload_after(url: str, size: int, *, plan: Plan | None = None) -> None:
    """The audit line of a stemcell disk uploaded into an import lease (NFC)."""
    target = urllib.parse.urlsplit(url).path
    audit.record("upload", target, {"old": None, "new": {"bytes": size}}, plan=plan, resource_type="stemcell_disk",
                 request=f"PUT {target}")
