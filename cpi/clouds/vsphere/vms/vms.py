"""VMs: create_vm, delete_vm, has_vm, reboot_vm, set_vm_metadata, get_disks,
calculate_vm_cloud_properties.

create_vm, as the official CPI: a cluster and resource pool from the vm_type (or AZ) or
cpi.json, a datastore for the ephemeral disk among those the cluster reaches that match
`datastore_pattern` (drawn so that disks spread, placement/), the stemcell's copy on that
datastore (stemcells.py), one clone task (clone.py) that sets CPU, memory, NICs and the ephemeral
disk, the agent's settings as `env.iso` on the CD-ROM and `guestinfo.userdata`, DRS rules
when asked, the vm_type's vGPUs, PCI devices and device groups once its hardware is
upgraded (passthrough.py, which checks before the clone that the hosts offer them), power
on, then the tags and the NSX-T (nsx/nsxt/) and NSX-V (nsx/nsxv.py) memberships, whose groups,
edges and pools are looked up before the clone. The VM is `vm-<uuid>` in the VM folder. Whatever fails after the
clone destroys the VM before the error (VMCreationFailed) leaves; a process killed meanwhile
leaves a `vm-<uuid>` that has_vm, delete_vm and `cpi orphans` find.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cpi.cids import AgentId, DiskCid, StemcellCid, VmCid
from cpi.errors import BoshError, VMCreationFailed
from cpi.models import Network, VMResources

from .. import errors, metadata
from ..placement import drs
from ..placement.choose import choose
from ..stemcells import StemcellMissing, Stemcells
from ..templates import Template
from ..vcenter import tasks
from . import clone, devices
from .existing import ExistingVms
from .finish import finish
from .spec import VmSpec

if TYPE_CHECKING:
    from cpi.models import AgentConfig, CallContext

    from ..nsx import nsxt
    from ..placement.datastores import Datastore
    from ..placement.place import Place
    from ..props import VMCloudProperties
    from ..vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")


class Vms(ExistingVms):
    def __init__(self, session: Session, place: Place, agent: AgentConfig, context: CallContext) -> None:
        super().__init__(session, place)
        self.agent = agent
        self.context = context

    # ------------------------------------------------------------ create_vm

    def create(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict[str, Any],
               nets: dict[str, Network], disk_cids: list[DiskCid], env: dict[str, Any]) -> tuple[VmCid, dict[str, Any]]:
        if disk_cids:
            log.info("disk locality hint %s: the VM goes where its vm_type says; attach_disk moves a disk its "
                     "host cannot reach", ", ".join(disk_cids))
        spec = VmSpec.decide(self.properties, self.context, agent_id, stemcell_cid, cloud_properties,
                             nets, env)
        props, vm_cid = spec.props, spec.vm_cid
        tag_ids = self._tags(props)
        joins = self._nsxt_joins(props)
        nsxv_joining = None
        if self.properties.nsx is not None or props.nsx is not None:  # NSX's clients load only when named
            from ..nsx import nsxv

            nsxv_joining = nsxv.prepare(self.properties, props.nsx, env, self.session.channel)
        placement = choose(self.session, self.place, props, nets, spec.need_mib)
        template = self._template(stemcell_cid, placement.datastore)
        backings = clone.backings(self.session, self.place, spec)
        folder = self.place.folder(self.place.vm_folder_path())
        clone_spec = clone.clone_spec(self.session, self.place, spec, placement, template, backings)
        log.info("create_vm: cloning %s from %s in cluster %s onto datastore %s (%s)", vm_cid, template.name,
                 placement.cluster_name, placement.datastore.name,
                 "linked clone" if clone_spec.snapshot is not None else "full clone")
        vm = tasks.run(self.session, lambda: template.ref.CloneVM_Task(folder=folder, name=vm_cid, spec=clone_spec),
                       f"clone of {vm_cid}", done=lambda: self.place.find_vm(vm_cid))
        try:
            networks_out = finish(self.session, self.place, self.agent, vm, spec, placement)
            if tag_ids:
                from ..tags import Tagging

                with Tagging(self.session) as tagging:
                    tagging.attach(tag_ids, vm)
            if joins is not None:
                joins(vm, vm_cid, networks_out)
            if nsxv_joining is not None:  # NSX-V knows the VM by its moref
                nsxv_joining.run(vm._moId)
        except BaseException as exc:
            self._discard(vm, vm_cid)
            if isinstance(exc, BoshError) and not isinstance(exc, VMCreationFailed):
                raise VMCreationFailed(exc.message, ok_to_retry=exc.ok_to_retry) from None
            raise
        return vm_cid, networks_out

    def _tags(self, props: VMCloudProperties) -> list[str]:
        """The ids of the vm_type's tags, found before anything is made."""
        if not props.tags:
            return []
        from ..tags import Tagging

        with Tagging(self.session) as tagging:
            return tagging.resolve(props.tags)

    def _nsxt_joins(self, props: VMCloudProperties) -> nsxt.Join | None:
        """What NSX-T does for the VM once it is on (its groups, server pools, VIF type),
        looked up before anything is made: a group or pool that is not there refuses create_vm."""
        config = self.properties.nsxt
        asked = props.nsxt
        if asked is None and config is not None and config.default_vif_type and (
                not config.use_policy_api or config.policy_api_migration_mode):
            from ..props import NsxtVmProperties

            asked = NsxtVmProperties()  # every VM's NSX ports get the default VIF type, as with the official CPI
        if asked is None:
            return None
        manager = self._nsxt()
        assert manager is not None  # nsx.nsxt_refusal let it through: cpi.json names the manager
        return manager.prepare(asked)

    def _nsxt(self) -> nsxt.Nsxt | None:
        """cpi.json's NSX-T manager; None, with NSX's clients not even loaded, without one."""
        if self.properties.nsxt is None:
            return None
        from ..nsx import nsxt

        return nsxt.for_vms(self.session, self.properties, self.session.channel)

    def _template(self, stemcell_cid: StemcellCid, datastore: Datastore) -> Template:
        try:
            return Stemcells(self.session, self.place).source_on(stemcell_cid, datastore.ref, datastore.name)
        except StemcellMissing as exc:
            raise VMCreationFailed(exc.message, ok_to_retry=False) from None

    def _discard(self, vm: Any, vm_cid: VmCid) -> None:
        """Destroy a VM create_vm could not finish (logged; a failure to is logged too, and
        the VM is then left for delete_vm to find by its name)."""
        try:
            self._destroy(vm, vm_cid, nsx_required=False)
        except Exception as exc:  # noqa: BLE001 - the creation's own failure is what the call reports
            log.error("create_vm: the unfinished VM %s could not be deleted (%s); delete_vm %s removes it",
                      vm_cid, errors.describe(exc), vm_cid)

    # ------------------------------------------------------------ delete_vm

    def delete(self, vm_cid: VmCid) -> None:
        vm = self.place.find_vm(vm_cid)
        if vm is None:
            log.info("delete_vm: %s is not there (deleted before?)", vm_cid)
            return
        with self.lock(vm_cid):
            self._destroy(vm, vm_cid)

    def _destroy(self, vm: Any, vm_cid: VmCid, nsx_required: bool = True) -> None:
        """Leave NSX-T's groups and pools, power off, detach the persistent disks (vSphere
        deletes every attached disk's files with the VM), destroy, and remove the VM's
        directory (the env ISO). With `nsx_required` false (a create_vm undone), a failure
        to leave NSX-T's groups is logged rather than keeping the VM: NSX is often what made
        create_vm fail."""
        from pyVmomi import vim

        manager = self._nsxt()
        if manager is not None:  # while NSX still sees the VM: its groups are found by its NSX id
            manager.leave(vm, vm_cid, required=nsx_required)
        try:
            if str(vm.runtime.powerState) == "poweredOn":
                try:
                    tasks.wait(self.session, vm.PowerOffVM_Task(), f"power off of {vm_cid}")
                except vim.fault.InvalidPowerState:
                    pass  # powered off meanwhile: what was wanted
            present = list(vm.config.hardware.device)
            keep, recorded = self.persistent(vm)
            directory = _directory(present)
            if keep:
                log.info("delete_vm: detaching %s from %s first, so that they outlive it", ", ".join(sorted(keep)),
                         vm_cid)
                self.detach(vm, vm_cid, keep, recorded)
            pool = vm.resourcePool
            cluster = pool.owner if pool is not None else None
            if isinstance(cluster, vim.ClusterComputeResource):
                drs.leave_groups(self.session, self.properties, cluster, vm)
            tasks.wait(self.session, vm.Destroy_Task(), f"deleting {vm_cid}")
        except vmodl_not_found() as exc:
            log.info("delete_vm: %s went away meanwhile (%s)", vm_cid, errors.describe(exc))
            return
        if directory:
            self.place.delete_file(directory)
        log.info("deleted VM %s", vm_cid)

    # ------------------------------------------------------------ the rest

    def reboot(self, vm_cid: VmCid) -> None:
        vm = self.require(vm_cid)
        tasks.wait(self.session, vm.ResetVM_Task(), f"reset of {vm_cid}")

    def set_metadata(self, vm_cid: VmCid, values: dict[str, str]) -> None:
        vm = self.require(vm_cid)
        metadata.set_values(self.session, vm, values)
        manager = self._nsxt()
        if manager is not None:  # the VM's NSX ports carry them too, for NSX's firewall rules
            manager.tag(vm, vm_cid, values)

    def disks(self, vm_cid: VmCid) -> list[DiskCid]:
        return sorted(self.persistent(self.require(vm_cid))[0])

    @staticmethod
    def calculate_cloud_properties(resources: VMResources) -> dict[str, Any]:
        """The vm_type keys for these resources: vSphere sizes a VM exactly as asked."""
        return {"cpu": resources.cpu, "ram": resources.ram, "disk": max(resources.ephemeral_disk_size, 1)}


def _directory(present: list[Any]) -> str | None:
    """The VM's directory on its datastore (`[ds] vm-x`), from its env ISO's path."""
    cdrom = devices.cdrom(present)
    name = getattr(getattr(cdrom, "backing", None), "fileName", "") or ""
    return name.rsplit("/", 1)[0] if name.endswith("/env.iso") else None


def vmodl_not_found() -> type[BaseException]:
    from pyVmomi import vmodl

    return vmodl.fault.ManagedObjectNotFound
