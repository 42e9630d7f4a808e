"""Stemcells: the stemcell's OVF and disks imported as a VM `sc-<uuid>` in the template
folder, and its copies on other datastores (replicas), which VMs are cloned from.

create_stemcell unpacks the stemcell's image (a tarball of `image.ovf` and its vmdk),
asks the vCenter for an import spec, imports it through ImportVApp and an NFC lease,
uploading each disk to the URL the lease names (`*` there is the vCenter itself, as vSphere
documents), and snapshots the result: a linked clone needs a snapshot to hang from. If
anything fails after the lease exists, the lease is aborted and the half-made VM destroyed;
a process killed meanwhile leaves a VM named `sc-<uuid>` in the template folder, which
delete_stemcell and `cpi orphans` find by that name.

A VM is cloned from a copy of the stemcell on its own datastore. The copy of `sc-X` on
datastore D is the VM `sc-X %2f D` (replica_name), found by the datastore it is on, so
the copies the official CPI made are used too. Copies are made when first needed, under a lock per copy:
of several processes that need the same one at once, one clones and snapshots it while the
others wait, and a copy found without its snapshot (its maker was killed after the clone)
is finished by whoever finds it.
"""

from __future__ import annotations

import logging
import os
import tarfile
import tempfile
import uuid
from typing import TYPE_CHECKING, Any

from cpi import locks, waits
from cpi.cids import StemcellCid
from cpi.errors import CloudError

from . import collector, errors, extension, metadata
from .placement.datastores import describe, pick
from .placement.place import Place
from .templates import Template
from .vcenter import tasks, transfer

if TYPE_CHECKING:
    from .vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")

SNAPSHOT_NAME = "bosh-linked-clone"
LEASE_SCHEDULE = waits.Schedule(first=0.1, factor=1.5, cap=2.0)


def replica_name(stemcell_cid: StemcellCid, datastore_name: str) -> str:
    """`sc-X %2f <datastore>`: vSphere shows `sc-X / <datastore>` (a name's `/`, `%` and backslash
    are escaped, as vSphere escapes them). The official CPI puts the datastore's managed
    object id there instead; copies are found by the datastore they are on, not by name, so
    each CPI uses the other's."""
    escaped = datastore_name.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")
    return f"{stemcell_cid} %2f {escaped}"


class Stemcells:
    def __init__(self, session: Session, place: Place):
        self.session = session
        self.place = place
        self.properties = place.properties

    # ------------------------------------------------------------ reading the template folder

    def templates(self, stemcell_cid: StemcellCid) -> list[Template]:
        """The stemcell `stemcell_cid` and its copies: one request listing the template
        folder (none when the folder is not there)."""
        from pyVmomi import vim

        folder = self.place.folder(self.place.template_folder_path(), create=False)
        if folder is None:
            return []
        found: list[Template] = []
        for ref, values in collector.children(self.session, folder, vim.VirtualMachine,
                                              ["name", "datastore", "snapshot.currentSnapshot"]):
            name = values.get("name") or ""
            if name == stemcell_cid or name.startswith(f"{stemcell_cid} %2f "):
                datastores = tuple(d._moId for d in values.get("datastore") or [])
                found.append(Template(name, ref, datastores, values.get("snapshot.currentSnapshot")))
        return found

    # ------------------------------------------------------------ create_stemcell

    def create(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        """`cloud_properties` is BOSH's argument, which this cloud does not read."""
        from pyVmomi import vim

        stemcell_cid = StemcellCid(f"sc-{uuid.uuid4()}")
        with tempfile.TemporaryDirectory(prefix="cpi-vsphere-stemcell-") as workdir:
            ovf_path = self._unpack(image_path, workdir)
            with open(ovf_path, encoding="utf-8") as handle:
                descriptor = handle.read()
            disks_mib = sum(os.path.getsize(os.path.join(workdir, f)) for f in os.listdir(workdir)) >> 20
            cluster_name, settings = self.place.clusters(None)[0]
            pool = self._pool(cluster_name, settings.resource_pool)
            cluster = pool.owner
            pattern, what = self.place.storage(None, persistent=False)
            candidates = self.place.matching(self.place.datastores(list(cluster.datastore)), pattern)
            datastore = pick(candidates, disks_mib)
            if datastore is None:
                raise CloudError(f"create_stemcell: no datastore of cluster '{cluster_name}' matching "
                                 f"{what} has {disks_mib} MiB and the headroom free: {describe(candidates)}")
            folder = self.place.folder(self.place.template_folder_path())
            params = vim.OvfManager.CreateImportSpecParams(entityName=stemcell_cid, diskProvisioning="thin")
            spec = self.session.content.ovfManager.CreateImportSpec(
                ovfDescriptor=descriptor, resourcePool=pool, datastore=datastore.ref, cisp=params)
            if spec.error:
                raise CloudError("create_stemcell: the vCenter refused the stemcell's OVF: "
                                 + "; ".join(errors.describe(e) for e in spec.error))
            for warning in spec.warning or []:
                log.warning("create_stemcell: the vCenter warns about the stemcell's OVF: %s", errors.describe(warning))
            extension.register(self.session)
            spec.importSpec.configSpec.managedBy = extension.managed_by(self.session)
            log.info("create_stemcell: importing %s (%d MiB) to datastore %s", stemcell_cid, disks_mib, datastore.name)
            vm = self._import(spec, pool, folder, workdir, stemcell_cid)
            try:
                self._snapshot(vm, stemcell_cid)
                metadata.set_values(self.session, vm, tags)
            except BaseException:
                self._destroy(vm, stemcell_cid)
                raise
        return stemcell_cid

    def _unpack(self, image_path: str, workdir: str) -> str:
        """Unpack the stemcell's image into `workdir`; the path of its OVF."""
        try:
            with tarfile.open(image_path) as archive:
                archive.extractall(workdir, filter="data")
        except (OSError, tarfile.TarError) as exc:
            raise CloudError(f"create_stemcell: cannot unpack the stemcell image {image_path}: {exc}") from None
        found = sorted(f for f in os.listdir(workdir) if f.endswith(".ovf"))
        if not found:
            raise CloudError(f"create_stemcell: the stemcell image {image_path} has no .ovf file (a vSphere stemcell's "
                             "image holds image.ovf and its vmdk)")
        return os.path.join(workdir, found[0])

    def _pool(self, cluster_name: str, resource_pool: str | None) -> Any:
        from . import lookups

        return lookups.resource_pool(self.session, self.place.config.name, cluster_name, resource_pool)

    def _import(self, spec: Any, pool: Any, folder: Any, workdir: str, stemcell_cid: StemcellCid) -> Any:
        """The VM ImportVApp makes, its disks uploaded; the lease aborted and what it made
        destroyed when anything fails."""
        from pyVmomi import vim

        lease = pool.ImportVApp(spec=spec.importSpec, folder=folder)
        vm = None
        try:
            def ready() -> waits.Check[str]:
                state = str(lease.state)
                if state == "error":
                    raise CloudError(f"create_stemcell: the vCenter's import lease failed: "
                                     f"{errors.describe(lease.error) if lease.error else 'no reason given'}")
                return waits.Check(state == "ready", state, state)

            self.session.channel.until(ready, what=f"import lease of {stemcell_cid}",
                                       timeout=self.properties.task_timeout,
                                       schedule=LEASE_SCHEDULE, setting="task_timeout", log=log, check_first=True)
            info = lease.info
            vm = info.entity
            items = {item.deviceId: item for item in spec.fileItem or []}
            total = sum(item.size or os.path.getsize(os.path.join(workdir, item.path)) for item in items.values())
            done = 0
            for device in info.deviceUrl:
                item = items.get(device.importKey)
                if item is None:
                    continue
                path = os.path.join(workdir, item.path)
                size = os.path.getsize(path)
                start = done

                def progress(sent: int, start: int = start) -> None:
                    lease.HttpNfcLeaseProgress(percent=min(99, int(100 * (start + sent) / max(total, 1))))

                with open(path, "rb") as source:
                    transfer.upload(self.session, device.url, source, size, method="PUT" if item.create else "POST",
                                    progress=progress, what=f"create_stemcell: upload of {item.path}")
                done += size
            lease.HttpNfcLeaseComplete()
        except BaseException:
            try:
                lease.HttpNfcLeaseAbort()
            except Exception as exc:  # noqa: BLE001 - the import's own failure is what the call reports
                log.warning("create_stemcell: aborting the import lease failed: %s", errors.describe(exc))
            if vm is None:
                vm = self._find_by_name(stemcell_cid, stemcell_cid)
            if isinstance(vm, vim.VirtualMachine):
                self._destroy(vm, stemcell_cid)
            raise
        return vm

    def _find_by_name(self, name: str, stemcell_cid: StemcellCid) -> Any:
        """The template called `name` among the stemcell's and its copies."""
        for template in self.templates(stemcell_cid):
            if template.name == name:
                return template.ref
        return None

    def _destroy(self, vm: Any, what: str) -> None:
        try:
            tasks.wait(self.session, vm.Destroy_Task(), f"deleting {what}")
            log.info("deleted %s", what)
        except Exception as exc:
            if errors.fault_name(exc) != "ManagedObjectNotFound":
                raise

    # ------------------------------------------------------------ delete_stemcell

    def delete(self, stemcell_cid: StemcellCid) -> None:
        found = self.templates(stemcell_cid)
        if not found:
            log.info("delete_stemcell: %s is not there (deleted before?)", stemcell_cid)
            return
        for template in sorted(found, key=lambda t: t.name == stemcell_cid):  # the copies first, the original last
            self._destroy(template.ref, template.name)

    # ------------------------------------------------------------ the copy a VM is cloned from

    def source_on(self, stemcell_cid: StemcellCid, datastore: Any, datastore_name: str) -> Template:
        """The stemcell's copy on `datastore`, with its snapshot: the original when it is
        there, else a copy, made (under the copy's lock) when missing or unfinished."""
        found = self.templates(stemcell_cid)
        original = next((t for t in found if t.name == stemcell_cid), None)
        if original is None:
            raise StemcellMissing(stemcell_cid)
        here = [t for t in found if datastore._moId in t.datastores]
        ready = next((t for t in here if t.snapshot is not None), None)
        if ready is not None:
            return ready
        name = replica_name(stemcell_cid, datastore_name)
        with locks.locked(self.properties.lock_directory(), f"vsphere-replica {name}",
                          timeout=self.properties.task_timeout):
            found = self.templates(stemcell_cid)
            copy = next((t for t in found if t.name == name or (datastore._moId in t.datastores
                                                                and t.name != stemcell_cid)), None)
            if copy is None:
                copy = self._replicate(stemcell_cid, original, datastore, name)
            if copy.snapshot is None:
                log.info("finishing the copy %s: its snapshot", copy.name)
                copy = Template(copy.name, copy.ref, copy.datastores, self._snapshot(copy.ref, copy.name))
            return copy

    def _snapshot(self, vm: Any, name: str) -> Any:
        """The snapshot linked clones hang from (a lost answer: the one the vCenter made)."""
        def made() -> Any:
            snapshot = vm.snapshot
            return snapshot.currentSnapshot if snapshot is not None else None

        return tasks.run(self.session, lambda: vm.CreateSnapshot_Task(name=SNAPSHOT_NAME, memory=False, quiesce=False),
                         f"snapshot of {name}", done=made)

    def _replicate(self, stemcell_cid: StemcellCid, original: Template, datastore: Any, name: str) -> Template:
        from pyVmomi import vim

        pool = original.ref.resourcePool
        folder = original.ref.parent
        log.info("copying stemcell %s to another datastore as '%s'", original.name, name)
        spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(datastore=datastore, pool=pool), template=False,
                                powerOn=False, config=vim.vm.ConfigSpec(managedBy=extension.managed_by(self.session)))
        try:
            vm = tasks.run(self.session, lambda: original.ref.CloneVM_Task(folder=folder, name=name, spec=spec),
                           f"copy of stemcell as {name}", done=lambda: self._find_by_name(name, stemcell_cid))
        except vim.fault.DuplicateName:  # made meanwhile by a process of another machine
            vm = next(t.ref for t in self.templates(stemcell_cid) if t.name == name)
        return Template(name, vm, (datastore._moId,), None)


class StemcellMissing(CloudError):
    def __init__(self, stemcell_cid: StemcellCid):
        super().__init__(f"stemcell '{stemcell_cid}' not found in the template folder")
