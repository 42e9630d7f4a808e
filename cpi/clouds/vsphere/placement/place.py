"""Where things go in the one datacenter of cpi.json: its folders (made when missing), its
clusters, and the datastores a disk may land on, chosen so that disks spread.

The draw among the datastores that fit, and why it is weighted at random: datastores.py.

Which datastores match is the official CPI's rule: a vm_type's or disk_type's `datastores`
(names, and the datastores of the datastore clusters it names), else the global pattern and
the datastores of the datastore clusters the global cluster pattern matches; clusters count
only with Storage DRS on (pods.py). Both come down to one pattern, which a disk's cid
carries (vms/disks.py), as the official CPI's does.

Reads come in one PropertyCollector request per question (the free space of every candidate
datastore at once), whatever the number of datastores.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cpi.cids import VmCid
from cpi.errors import CloudError

from .. import collector, lookups
from ..patterns import compile_pattern
from . import pods
from .datastores import MIB, Datastore

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..job_config import ClusterProperties, VsphereProperties
    from ..vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")


class Place:
    """The datacenter of cpi.json as one call sees it: lookups cached for the call."""

    def __init__(self, session: Session, properties: VsphereProperties, director_uuid: str | None):
        self.session = session
        self.properties = properties
        self.config = properties.datacenter
        self.director_uuid = director_uuid
        self._datacenter: Any = None
        self._pods: list[pods.Pod] | None = None

    @property
    def datacenter(self) -> Any:
        if self._datacenter is None:
            self._datacenter = lookups.datacenter(self.session, self.config.name)
        return self._datacenter

    # ------------------------------------------------------------ folders

    def _sub(self, path: str) -> str:
        use_sub = self.config.use_sub_folder or any(s.resource_pool for s in self.config.cluster_settings.values())
        if use_sub and self.director_uuid:
            return f"{path.strip('/')}/{self.director_uuid}"
        return path.strip("/")

    def vm_folder_path(self) -> str:
        return self._sub(self.config.vm_folder)

    def template_folder_path(self) -> str:
        return self._sub(self.config.template_folder)

    def folder(self, path: str, create: bool = True) -> Any:
        """The VM folder at `path` below the datacenter's VM folder; made (parents first)
        when missing and `create`, a folder another process made meanwhile being taken."""
        from pyVmomi import vim

        found = self.session.content.searchIndex.FindByInventoryPath(
            inventoryPath=f"{self.config.name}/vm/{path}")
        if found is not None or not create:
            if found is not None and not isinstance(found, vim.Folder):
                raise CloudError(f"'{path}' below the VM folder of datacenter '{self.config.name}' is a "
                                 f"{type(found).__name__.rsplit('.', 1)[-1]}, not a folder")
            return found
        parent_path, _, name = path.rpartition("/")
        parent = self.folder(parent_path) if parent_path else self.datacenter.vmFolder
        try:
            made = parent.CreateFolder(name=name)
            log.info("made the VM folder '%s' in datacenter '%s'", path, self.config.name)
            return made
        except vim.fault.DuplicateName:
            return self.folder(path, create=False)

    def vm_path(self, vm_cid: VmCid) -> str:
        return f"{self.config.name}/vm/{self.vm_folder_path()}/{vm_cid}"

    def find_vm(self, vm_cid: VmCid) -> Any:
        """The VM `vm_cid` in the VM folder (or, with a director's subfolder, also in the
        folder above it, where VMs made before `use_sub_folder` was set live): one or two
        requests."""
        from pyVmomi import vim

        paths = [self.vm_path(vm_cid)]
        plain = f"{self.config.name}/vm/{self.config.vm_folder.strip('/')}/{vm_cid}"
        if plain not in paths:
            paths.append(plain)
        for path in paths:
            found = self.session.content.searchIndex.FindByInventoryPath(inventoryPath=path)
            if isinstance(found, vim.VirtualMachine):
                return found
        return None

    # ------------------------------------------------------------ clusters

    def clusters(self, chosen: Sequence[Mapping[str, ClusterProperties]] | None) -> list[tuple[str, ClusterProperties]]:
        """The clusters a VM may go in: a vm_type's (or AZ's) own, else cpi.json's."""
        entries = chosen if chosen else self.config.clusters
        found = [(name, settings) for entry in entries for name, settings in entry.items()]
        if not found:
            raise CloudError(f"no cluster to put the VM in: datacenter '{self.config.name}' names none in cpi.json and "
                             "the vm_type (or AZ) names none in its datacenters")
        return found

    # ------------------------------------------------------------ datastores

    def datastores(self, refs: list[Any]) -> list[Datastore]:
        """Name, free space, capacity and usability of each datastore of `refs`: one request."""
        from pyVmomi import vim

        found = []
        for ref, values in collector.of(self.session, refs, vim.Datastore, [
                "name", "summary.freeSpace", "summary.capacity", "summary.accessible", "summary.maintenanceMode"]):
            maintenance = values.get("summary.maintenanceMode") or "normal"
            found.append(Datastore(
                name=values["name"], ref=ref, free_mib=int(values.get("summary.freeSpace") or 0) // MIB,
                capacity_mib=int(values.get("summary.capacity") or 0) // MIB,
                usable=bool(values.get("summary.accessible", True)) and maintenance == "normal"))
        return sorted(found, key=lambda d: d.name)

    def delete_file(self, path: str) -> None:
        """Delete a datastore file or directory (`[ds] path`); one that is not there is no error."""
        from pyVmomi import vim

        from ..vcenter import tasks

        try:
            tasks.wait(self.session, self.session.content.fileManager.DeleteDatastoreFile_Task(
                name=path, datacenter=self.datacenter), f"deleting {path}")
        except vim.fault.FileNotFound:
            log.info("%s was not there", path)

    def matching(self, datastores: list[Datastore], pattern: str | None) -> list[Datastore]:
        """Those of `datastores` `pattern` matches (anywhere in the name, as the official
        CPI's Ruby `=~`)."""
        if not pattern:
            return []
        regex = compile_pattern(pattern)
        return [d for d in datastores if regex.search(d.name)]

    def pods(self) -> list[pods.Pod]:
        """The datacenter's datastore clusters (read once in a call)."""
        if self._pods is None:
            self._pods = pods.read(self.session, self.datacenter)
        return self._pods

    def storage(self, datastores: list | None, persistent: bool) -> tuple[str, str]:
        """(pattern, what it is for an error) of the datastores an ephemeral (or, when
        `persistent`, a persistent) disk may go on: those of a vm_type's or disk_type's
        `datastores` when given, else the global ones. A datastore cluster named but not
        there, or clusters that leave no datastore, are a CloudError naming them: nothing
        has been made yet."""
        owner = "disk_type" if persistent else "vm_type"
        if datastores:
            names = [entry for entry in datastores if isinstance(entry, str)]
            clusters: list[str] = next((entry.names for entry in datastores if not isinstance(entry, str)), [])
            what = f"the {owner} datastores"
            if clusters:
                chosen = pods.with_sdrs(pods.named(self.pods(), clusters, self.config.name), what)
                names += [d for pod in chosen for d in pod.datastores if d not in names]
                if not names:
                    raise CloudError(f"{what}: no datastore to put the disk on: the datastore cluster(s) "
                                     f"{', '.join(clusters)} have Storage DRS off or no datastores, and no datastore "
                                     "is named (the official CPI leaves such clusters out too)")
            return pods.exactly(names), what
        key = "persistent_datastore_pattern" if persistent else "datastore_pattern"
        cluster_key = key.replace("_pattern", "_cluster_pattern")
        pattern, cluster_pattern = getattr(self.config, key), getattr(self.config, cluster_key)
        if not cluster_pattern:
            return pattern, key
        found = pods.matching(self.pods(), cluster_pattern)
        members = sorted({d for pod in pods.with_sdrs(found, cluster_key) for d in pod.datastores})
        what = (f"{key} or " if pattern else "") + f"the datastore clusters of {cluster_key}"
        if members:
            return pods.exactly(members) + (f"|{pattern}" if pattern else ""), what
        matched = (f"'{cluster_pattern}' matches no datastore cluster with Storage DRS on and a datastore in "
                   f"datacenter '{self.config.name}' (its datastore clusters: {pods.listed(self.pods())})")
        if not pattern:
            raise CloudError(f"{cluster_key} {matched}, and {key} is not set: no datastore for "
                             f"{'persistent' if persistent else 'ephemeral'} disks")
        log.warning("%s %s: only %s chooses datastores", cluster_key, matched, key)
        return pattern, key

    def datacenter_datastores(self) -> list[Datastore]:
        return self.datastores(list(self.datacenter.datastore))
