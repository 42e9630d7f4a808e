"""The datacenter as an operator sees it (`cpi list|show|avail`): read-only, what this CPI (or
the official one) made, with the tags BOSH set.

- vms: the VMs below the VM folder that carry an agent (`bosh.agent_id` in their
  extraConfig, set in the clone; for the official CPI's VMs, which lack it, the agent_id of
  the settings in `guestinfo.userdata`), with their custom attributes (set_vm_metadata):
  one request for them all.
- disks: the vmdk files in `disk_path` of each datastore (one search task per datastore),
  and the VM that has each attached: persistent disks all (a VM's root and ephemeral disks
  live in its own folder); no tags, as vSphere keeps none for a disk.
- stemcells: the `sc-<uuid>` VMs of the template folder (their copies aside).
- snapshots: the vmdk files in `disk_path/snapshots`.

Offers: the clusters as zones and sizes (what a VM there may be given), the datacenter's
networks, the stemcells as images.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from cpi.clouds.inventory import Offer, Resource, read_so_far

from . import collector
from .collector import Kind
from .names import ORIGIN_KEYS, SNAPSHOTS
from .vcenter import tasks
from .vms import devices

if TYPE_CHECKING:
    from .placement.place import Place
    from .vcenter.session import Session


def _collect(session: Session, root: Any, kind: type[Kind], paths: list[str]) -> list[tuple[Kind, dict[str, Any]]]:
    found: list[tuple[Kind, dict[str, Any]]] = []
    for item in collector.below(session, root, kind, paths):
        found.append(item)
        read_so_far(kind.__name__.rsplit(".", 1)[-1], len(found))
    return found


def _agent_id(extra: dict[str, str]) -> str | None:
    """The VM's agent: this CPI's `bosh.agent_id`, else that of the agent settings the
    official CPI (and this one) put in `guestinfo.userdata`."""
    if ORIGIN_KEYS["agent_id"] in extra:
        return extra[ORIGIN_KEYS["agent_id"]]
    userdata = extra.get("guestinfo.userdata")
    if not userdata:
        return None
    try:
        document = base64.b64decode(userdata) if extra.get("guestinfo.userdata.encoding") == "base64" else userdata
        agent_id = json.loads(document).get("agent_id")
    except (ValueError, AttributeError):  # not settings an agent reads: not a BOSH VM
        return None
    return agent_id if isinstance(agent_id, str) and agent_id else None


def _field_names(session: Session) -> dict[int, str]:
    return {f.key: f.name for f in session.content.customFieldsManager.field or []}


def _custom(values: Any, names: dict[int, str]) -> dict[str, str]:
    return {names[v.key]: str(v.value) for v in values or [] if v.key in names}


class Inventory:
    def __init__(self, session: Session, place: Place):
        self.session = session
        self.place = place
        self.disk_path = place.config.disk_path.strip("/")

    def _vms(self, with_devices: bool = False) -> list[tuple[Any, dict[str, Any]]]:
        from pyVmomi import vim

        folder = self.place.folder(self.place.config.vm_folder.strip("/"), create=False)
        if folder is None:
            return []
        paths = ["name", "runtime.powerState", "config.createDate", "config.extraConfig", "customValue",
                 "summary.config.numCpu", "summary.config.memorySizeMB"]
        return _collect(self.session, folder, vim.VirtualMachine,
                        [*paths, "config.hardware.device"] if with_devices else paths)

    def inventory(self, kind: str) -> list[Resource]:
        if kind == "vms":
            names = _field_names(self.session)
            found = []
            for _, values in self._vms():
                extra = {o.key: str(o.value) for o in values.get("config.extraConfig") or []}
                agent_id = _agent_id(extra)
                if agent_id is None:
                    continue
                tags = _custom(values.get("customValue"), names)
                tags.update({key: extra[option] for key, option in ORIGIN_KEYS.items() if option in extra})
                tags["agent_id"] = agent_id
                found.append(Resource("vm", values["name"], str(values.get("runtime.powerState", "?")),
                                      values.get("config.createDate"), tags,
                                      {"cpu": values.get("summary.config.numCpu"),
                                       "ram_mib": values.get("summary.config.memorySizeMB")}))
            return found
        if kind == "disks":
            return self._disks()
        if kind == "snapshots":
            return [Resource("snapshot", name[: -len(".vmdk")], "ready", modified, {},
                             {"datastore": datastore, "size_mib": size >> 20})
                    for datastore, name, size, modified in self._files(f"{self.disk_path}/{SNAPSHOTS}")]
        return self._stemcells()

    def _files(self, folder: str) -> list[tuple[str, str, int, Any]]:
        """(datastore, name, size, modified) of each disk descriptor in `folder` of every
        datastore of the datacenter."""
        from pyVmomi import vim

        browser = vim.host.DatastoreBrowser
        spec = browser.SearchSpec(matchPattern=["*.vmdk"], details=browser.FileInfo.Details(
            fileSize=True, modification=True))
        found = []
        for datastore in self.place.datacenter_datastores():
            try:
                result = tasks.wait(self.session, datastore.ref.browser.SearchDatastore_Task(
                    datastorePath=f"[{datastore.name}] {folder}", searchSpec=spec), f"listing {folder} on "
                    f"{datastore.name}")
            except vim.fault.FileNotFound:
                continue
            files = {f.path: f for f in (result.file if result is not None else [])}
            for name, info in files.items():
                if name.endswith("-flat.vmdk"):
                    continue
                flat = files.get(name.replace(".vmdk", "-flat.vmdk"))
                size = max(info.fileSize or 0, (flat.fileSize or 0) if flat is not None else 0)
                found.append((datastore.name, name, size, info.modification))
        return found

    def _disks(self) -> list[Resource]:
        attached: dict[str, str] = {}
        for _, values in self._vms(with_devices=True):
            for disk_cid in devices.persistent(list(values.get("config.hardware.device") or []), self.disk_path):
                attached[disk_cid] = values["name"]
        found = []
        for datastore, name, size, modified in self._files(self.disk_path):
            cid = name[: -len(".vmdk")]
            # no tags: vSphere keeps no metadata of a disk (disks.Disks.set_metadata)
            found.append(Resource("disk", cid, "in-use" if cid in attached else "available", modified, {},
                                  {"role": "persistent", "datastore": datastore, "size_mib": size >> 20,
                                   "attached_to": attached.get(cid)}))
            read_so_far("disks", len(found))
        return found

    def _stemcells(self) -> list[Resource]:
        from pyVmomi import vim

        folder = self.place.folder(self.place.config.template_folder.strip("/"), create=False)
        if folder is None:
            return []
        names = _field_names(self.session)
        return [Resource("stemcell", values["name"], "ready", values.get("config.createDate"),
                         _custom(values.get("customValue"), names), {})
                for _, values in _collect(self.session, folder, vim.VirtualMachine,
                                          ["name", "config.createDate", "customValue"])
                if values["name"].startswith("sc-") and " " not in values["name"]]

    def available(self, offer: str) -> list[Offer]:
        from pyVmomi import vim

        if offer == "images":
            return [Offer("image", s.cid, s.cid, {}) for s in self._stemcells()]
        if offer == "networks":
            return [Offer("network", values["name"], obj._moId, {"type": type(obj).__name__.rsplit(".", 1)[-1]})
                    for obj, values in _collect(self.session, self.place.datacenter.networkFolder, vim.Network,
                                                ["name"])]
        clusters = _collect(self.session, self.place.datacenter.hostFolder, vim.ClusterComputeResource,
                            ["name", "summary.numCpuCores", "summary.effectiveMemory", "summary.numEffectiveHosts"])
        kind = "zone" if offer == "zones" else "size"
        return [Offer(kind, values["name"], obj._moId, {"cpu_cores": values.get("summary.numCpuCores"),
                                                        "memory_mib": values.get("summary.effectiveMemory"),
                                                        "hosts": values.get("summary.numEffectiveHosts")})
                for obj, values in clusters]
