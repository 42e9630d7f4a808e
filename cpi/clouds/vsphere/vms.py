"""VMs: create_vm, delete_vm, has_vm, reboot_vm, set_vm_metadata, get_disks,
calculate_vm_cloud_properties.

create_vm, as the official CPI: a cluster and resource pool from the vm_type (or AZ) or
cpi.json, a datastore for the ephemeral disk among those the cluster reaches that match
`datastore_pattern` (drawn so that disks spread, place.py), the stemcell's copy on that
datastore (stemcells.py), one clone task that sets CPU, memory, NICs and the ephemeral
disk, the agent's settings as `env.iso` on the CD-ROM and `guestinfo.userdata`, DRS rules
when asked, the vm_type's vGPUs, PCI devices and device groups once its hardware is
upgraded (passthrough.py, which checks before the clone that the hosts offer them), power
on, then the tags and the NSX-T (nsxt.py) and NSX-V (nsxv.py) memberships, whose groups,
edges and pools are looked up before the clone. The VM is `vm-<uuid>` in the VM folder. Whatever fails after the
clone destroys the VM before the error (VMCreationFailed) leaves; a process killed meanwhile
leaves a `vm-<uuid>` that has_vm, delete_vm and `cpi orphans` find.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import re
import uuid
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from cpi import agent_env, locks
from cpi.cids import AgentId, DiskCid, StemcellCid
from cpi.errors import BoshError, VMCreationFailed, VMNotFound
from cpi.models import Network, VMResources
from cpi.validation import parse

from . import (
    collector,
    devices,
    drs,
    errors,
    extension,
    ip_conflicts,
    lookups,
    metadata,
    passthrough,
    pbm,
    records,
    tasks,
    transfer,
)
from .names import ORIGIN_KEYS
from .place import HEADROOM_MIB, Datastore, Place, describe, pick
from .props import NetworkCloudProperties, VMCloudProperties
from .stemcells import StemcellMissing, Stemcells, Template

if TYPE_CHECKING:
    from . import nsxt
    from .job_config import ClusterProperties
    from .session import Session

log = logging.getLogger("cpi.clouds.vsphere")

class Vms:
    def __init__(self, session: Session, place: Place, agent: Any, context: Any):
        self.session = session
        self.place = place
        self.properties = place.properties
        self.agent = agent
        self.context = context

    # ------------------------------------------------------------ lookups

    def require(self, vm_cid: str) -> Any:
        vm = self.place.find_vm(vm_cid)
        if vm is None:
            raise VMNotFound(f"VM '{vm_cid}' not found in the VM folder of datacenter '{self.place.config.name}'")
        return vm

    def exists(self, vm_cid: str) -> bool:
        return self.place.find_vm(vm_cid) is not None

    def lock(self, vm_cid: str) -> AbstractContextManager[None]:
        """The lock every change of a VM's devices is made under (attach, detach, delete)."""
        return locks.locked(self.properties.lock_directory(), f"vsphere-vm {vm_cid}",
                            timeout=self.properties.task_timeout)

    # ------------------------------------------------------------ create_vm

    def create(self, agent_id: AgentId, stemcell_cid: StemcellCid, cloud_properties: dict, nets: dict[str, Network],
               disk_cids: list[DiskCid], env: dict) -> tuple[str, dict[str, Any]]:
        from pyVmomi import vim

        if disk_cids:
            log.info("disk locality hint %s: the VM goes where its vm_type says; attach_disk moves a disk its "
                     "host cannot reach", ", ".join(disk_cids))

        props = parse(VMCloudProperties, cloud_properties, "vm_type cloud_properties")
        if props.nsxt:
            from . import nsxt

            refused = nsxt.refusal(self.properties)
            if refused:
                raise VMCreationFailed(refused, ok_to_retry=False)
        network_props: list[NetworkCloudProperties] = []
        for name, net in nets.items():
            if net.type == "vip":
                raise VMCreationFailed(f"network '{name}' is a vip network: vSphere has none (as in the official "
                                       "CPI); use a manual network", ok_to_retry=False)
            if not net.cloud_properties.get("name"):
                raise VMCreationFailed(f"network '{name}': its cloud_properties need `name`, the vSphere network to "
                                       "put the NIC on", ok_to_retry=False)
            # typed as AWS's and OpenStack's are: a bad value fails here (CpiError), before anything is made
            network_props.append(parse(NetworkCloudProperties, net.cloud_properties,
                                       f"network '{name}' cloud_properties"))
        vm_cid = self._name(env)
        tag_ids = self._tags(props)
        joins = self._nsxt_joins(props)
        nsxv_joining = None
        if self.properties.nsx is not None or props.nsx is not None:  # NSX's clients load only when named
            from . import nsxv

            nsxv_joining = nsxv.prepare(self.properties, props.nsx, env)
        policy = self._policy(props)
        if self.properties.ensure_no_ip_conflicts:
            ip_conflicts.check(self.session, self.place, nets)
        placements = self.place.clusters(props.datacenters[0].clusters if props.datacenters else None)
        offered = None
        if passthrough.asked(props):
            offered = passthrough.check(self.session, self.place.config.name, [name for name, _ in placements], props)
            placements = [placement for placement in placements if placement[0] in offered.clusters]
        cluster_name, cluster_settings, pool, datastore = self._placement(placements, props, policy)
        template = self._template(stemcell_cid, datastore)
        backings = [devices.nic_backing(self.session, lookups.network(self.session, self.place.config.name, net.name))
                    for net in network_props]
        folder = self.place.folder(self.place.vm_folder_path())
        template_devices = list(template.ref.config.hardware.device)
        spec = self._clone_spec(props, pool, datastore, template, template_devices, backings, vm_cid, policy)
        reserve = self.properties.cpu_reserve_full_mhz if props.cpu_reserve_full_mhz is None \
            else props.cpu_reserve_full_mhz
        if reserve:
            spec.config.cpuAllocation = vim.ResourceAllocationInfo(reservation=props.cpu * self._host_mhz(pool.owner))
        # whose it is, from the clone on: a VM left by a create_vm killed half-way is attributed
        spec.config.extraConfig += [vim.option.OptionValue(key=key, value=value) for key, value in self._origin(
            agent_id).items()]
        log.info("create_vm: cloning %s from %s in cluster %s onto datastore %s (%s)", vm_cid, template.name,
                 cluster_name, datastore.name, "linked clone" if spec.snapshot is not None else "full clone")
        vm = tasks.run(self.session, lambda: template.ref.CloneVM_Task(folder=folder, name=vm_cid, spec=spec),
                       f"clone of {vm_cid}", done=lambda: self.place.find_vm(vm_cid))
        try:
            networks_out = self._finish(vm, vm_cid, agent_id, props, nets, env, datastore, cluster_settings,
                                        pool.owner, offered)
            if tag_ids:
                from .tags import Tagging

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
        from .tags import Tagging

        with Tagging(self.session) as tagging:
            return tagging.resolve(props.tags)

    def _policy(self, props: VMCloudProperties) -> pbm.Policy | None:
        """The storage policy the VM is made with, as in the official CPI: the vm_type's
        `storage_policy`; else none when the vm_type names `datastores`; else the global
        `vm_storage_policy_name`. Found, with its compatible datastores, before anything is made."""
        if props.storage_policy and props.storage_policy.name:
            name, key = props.storage_policy.name, "vm_type storage_policy"
        elif self.properties.vm_storage_policy_name and not props.datastores:
            name, key = self.properties.vm_storage_policy_name, "vm_storage_policy_name"
        else:
            return None
        return pbm.find(self.session, name, key, list(self.place.datacenter.datastore))

    def _nsxt_joins(self, props: VMCloudProperties) -> nsxt.Join | None:
        """What NSX-T does for the VM once it is on (its groups, server pools, VIF type),
        looked up before anything is made: a group or pool that is not there refuses create_vm."""
        config = self.properties.nsxt
        asked = props.nsxt
        if asked is None and config is not None and config.default_vif_type and (
                not config.use_policy_api or config.policy_api_migration_mode):
            from .props import NsxtVmProperties

            asked = NsxtVmProperties()  # every VM's NSX ports get the default VIF type, as with the official CPI
        if asked is None:
            return None
        manager = self._nsxt()
        assert manager is not None  # nsxt.refusal let it through: cpi.json names the manager
        return manager.prepare(asked)

    def _nsxt(self) -> nsxt.Nsxt | None:
        """cpi.json's NSX-T manager; None, with NSX's clients not even loaded, without one."""
        if self.properties.nsxt is None:
            return None
        from . import nsxt

        return nsxt.for_vms(self.session, self.properties)

    def _name(self, env: dict) -> str:
        """`vm-<uuid>`, or with `enable_human_readable_name` `<instance group>_<deployment>_<12
        hex digits>` (at most 80 characters) when the director sent those names in ASCII."""
        unique = uuid.uuid4()
        groups = ((env or {}).get("bosh") or {}).get("groups") or []
        if self.properties.enable_human_readable_name and len(groups) >= 3:
            _, deployment, instance_group = (str(g) for g in groups[:3])
            readable = f"{instance_group}_{deployment}"
            if readable.isascii() and re.fullmatch(r"[A-Za-z0-9_.-]+", readable):
                return f"{readable[:80 - 13]}_{unique.hex[:12]}"
            log.info("create_vm: the instance group or deployment name is not plain ASCII: the VM is vm-<uuid>")
        return f"vm-{unique}"

    def _host_mhz(self, cluster: Any) -> int:
        """The clock of the fastest connected host of the cluster (cpu_reserve_full_mhz)."""
        from pyVmomi import vim

        clocks = [values.get("summary.hardware.cpuMhz") or 0
                  for _, values in collector.of(self.session, list(cluster.host), vim.HostSystem,
                                                ["summary.hardware.cpuMhz", "runtime.connectionState"])
                  if str(values.get("runtime.connectionState")) == "connected"]
        if not clocks:
            raise VMCreationFailed("cpu_reserve_full_mhz: the cluster has no connected host to take the clock of")
        return max(clocks)

    def _origin(self, agent_id: str) -> dict[str, str]:
        """The VM's `bosh.*` extraConfig keys: its agent and director (`cpi list`, `cpi orphans`)."""
        origin = {ORIGIN_KEYS["agent_id"]: agent_id}
        if self.context.director_uuid:
            origin[ORIGIN_KEYS["director_uuid"]] = self.context.director_uuid
        return origin

    def _placement(self, placements: list[tuple[str, ClusterProperties]], props: VMCloudProperties,
                   policy: pbm.Policy | None) -> tuple[str, ClusterProperties, Any, Datastore]:
        """(cluster name, its settings, resource pool, datastore): the clusters in a random
        order, the first whose datastores compatible with the storage policy, else matching the
        vm_type's or the global datastores (datastore clusters included, place.Place.storage),
        have room."""
        need = props.disk + (0 if self._reserve_all_memory(props) else props.ram)
        if policy is not None:
            pattern, what = None, f"storage policy '{policy.name}'"
        else:
            pattern, what = self.place.storage(props.datastores, persistent=False)
        tried = []
        for cluster_name, settings in random.sample(placements, len(placements)):
            pool = lookups.resource_pool(self.session, self.place.config.name, cluster_name, settings.resource_pool)
            reachable = self.place.datastores(list(pool.owner.datastore))
            candidates = ([d for d in reachable if d.ref._moId in policy.datastores] if policy is not None
                          else self.place.matching(reachable, pattern))
            chosen = pick(candidates, need)
            if chosen is not None:
                return cluster_name, settings, pool, chosen
            tried.append(f"cluster '{cluster_name}': {describe(candidates)}")
        raise VMCreationFailed(f"no datastore for the VM's {need} MiB (ephemeral disk and memory) with "
                               f"{HEADROOM_MIB} MiB to spare matches {what}: "
                               + "; ".join(tried), ok_to_retry=False)

    def _template(self, stemcell_cid: StemcellCid, datastore: Datastore) -> Template:
        try:
            return Stemcells(self.session, self.place).source_on(stemcell_cid, datastore.ref, datastore.name)
        except StemcellMissing as exc:
            raise VMCreationFailed(exc.message, ok_to_retry=False) from None

    def _reserve_all_memory(self, props: VMCloudProperties) -> bool:
        if passthrough.asked(props):
            return True  # vSphere requires it of a VM with passthrough devices
        if props.memory_reservation_locked_to_max is not None:
            return props.memory_reservation_locked_to_max
        return self.properties.memory_reservation_locked_to_max

    def _clone_spec(self, props: VMCloudProperties, pool: Any, datastore: Any, template: Any,
                    template_devices: list[Any], backings: list[Any], vm_cid: str, policy: pbm.Policy | None
                    ) -> Any:
        from pyVmomi import vim

        changes = [devices.remove(nic) for nic in devices.nics(template_devices)]
        changes += [devices.add(devices.nic(backing, key=-100 - i)) for i, backing in enumerate(backings)]
        controller = devices.scsi_controller(template_devices)
        if controller is None:
            raise VMCreationFailed(f"stemcell {template.name} has no SCSI controller for the ephemeral disk",
                                   ok_to_retry=False)
        retyped = devices.retyped_controller(controller, self.properties.default_scsi_controller_type)
        if retyped is not None:  # the disks on it keep its key, so the ephemeral disk is added to it the same
            changes.append(devices.edit(retyped))
            controller = retyped
        thin = self.properties.default_disk_type == "thin"
        ephemeral = devices.new_disk(controller, devices.free_unit(template_devices, controller),
                                     f"[{datastore.name}] {vm_cid}/{devices.EPHEMERAL_FILE}", props.disk, thin)
        ephemeral_change = devices.add(ephemeral, create_file=True)
        changes.append(ephemeral_change)
        linked = not props.root_disk_size_gb
        system = devices.system(template_devices, self.place.config.disk_path)
        if props.root_disk_size_gb and system is not None:
            system.capacityInKB = props.root_disk_size_gb * 1024 * 1024
            changes.append(devices.edit(system))
        extra = self._extra(props)
        config = vim.vm.ConfigSpec(
            numCPUs=props.cpu, memoryMB=props.ram, deviceChange=changes,
            cpuHotAddEnabled=props.cpu_hot_add_enabled, memoryHotAddEnabled=props.memory_hot_add_enabled,
            nestedHVEnabled=props.nested_hardware_virtualization or None,
            extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in extra.items()])
        if self._reserve_all_memory(props):
            config.memoryReservationLockedToMax = True
        config.managedBy = extension.managed_by(self.session)  # "managed by BOSH" in the vSphere client
        if policy is not None:  # the VM's home and the ephemeral disk; the system disk below
            config.vmProfile = [policy.spec()]
            ephemeral_change.profile = [policy.spec()]
        location = vim.vm.RelocateSpec(datastore=datastore.ref, pool=pool)
        if linked:
            location.diskMoveType = "createNewChildDiskBacking"
        if policy is not None and system is not None:
            # the template's disk as the clone gets it: where it goes, how, and its policy
            location.disk = [vim.vm.RelocateSpec.DiskLocator(diskId=system.key, datastore=datastore.ref,
                                                             diskMoveType=location.diskMoveType,
                                                             profile=[policy.spec()])]
        return vim.vm.CloneSpec(location=location, powerOn=False, template=False, config=config,
                                snapshot=template.snapshot if linked else None)

    def _finish(self, vm: Any, vm_cid: str, agent_id: str, props: VMCloudProperties, nets: dict[str, Network],
                env: dict, datastore: Any, cluster_settings: Any, cluster: Any,
                offered: passthrough.Found | None) -> dict[str, Any]:
        """The clone's agent settings, DRS rules, hardware, passthrough devices and power:
        what follows the clone."""
        from pyVmomi import vim

        made = list(vm.config.hardware.device)
        cards = devices.nics(made)
        if len(cards) != len(nets):
            raise VMCreationFailed(f"the vCenter made {vm_cid} with {len(cards)} NIC(s) for {len(nets)} network(s)")
        out = {}
        for (name, net), card in zip(nets.items(), cards, strict=True):
            wired = net.wire()
            wired["mac"] = card.macAddress
            out[name] = wired
        uuid_disks = devices.uuid_enabled(self._extra(props))
        system = devices.system(made, self.place.config.disk_path)
        ephemeral = devices.ephemeral(made)
        settings = agent_env.settings(
            agent_id=agent_id, vm_name=vm_cid, agent=self.agent,
            networks={name: Network.model_validate(wired) for name, wired in out.items()}, env=env,
            system_disk=str(system.unitNumber) if system is not None else "0",
            ephemeral_disk=({"id": ephemeral.backing.uuid.lower()} if uuid_disks and ephemeral.backing.uuid
                            else str(ephemeral.unitNumber)))
        settings["vm"]["id"] = vm._moId
        document = json.dumps(settings).encode()
        self._write_env(vm, vm_cid, datastore, document, made)
        rules = getattr(cluster_settings, "drs_rules", None) or []  # cpi.json's clusters have none
        for rule in rules:
            drs.add_to_anti_affinity_rule(self.session, self.properties, cluster, rule.name, vm)
        if not rules and self.properties.enable_auto_anti_affinity_drs_rules:
            group = ((env or {}).get("bosh") or {}).get("group")
            if group:
                drs.add_to_anti_affinity_rule(self.session, self.properties, cluster, group, vm)
        if props.vm_group:
            drs.add_to_vm_group(self.session, self.properties, cluster, props.vm_group, vm)
        if cluster_settings.host_group_name and cluster_settings.host_group_rule:
            drs.tie_to_host_group(self.session, self.properties, cluster, cluster_settings.host_group_name,
                                  cluster_settings.host_group_rule, vm)
        if props.disable_drs:
            drs.disable_drs(self.session, self.properties, cluster, vm)
        self._hardware(vm, vm_cid, props)
        if offered is not None:
            passthrough.attach(self.session, vm, vm_cid, props, offered)
        try:
            tasks.wait(self.session, vm.PowerOnVM_Task(), f"power on of {vm_cid}")
        except vim.fault.InvalidPowerState:  # a power on whose answer was lost, sent again: on already
            if str(vm.runtime.powerState) != "poweredOn":
                raise
        return out

    def _hardware(self, vm: Any, vm_cid: str, props: VMCloudProperties) -> None:
        """`upgrade_hw_version`, or a vm_type with passthrough devices (a VM at the stemcell's
        version takes one vGPU): the newest hardware version the host supports; otherwise
        `default_hw_version` when the stemcell's is older (a VM is never downgraded)."""
        from pyVmomi import vim

        newest = self.properties.upgrade_hw_version if props.upgrade_hw_version is None else props.upgrade_hw_version
        newest = newest or passthrough.asked(props)
        wanted = None if newest else f"vmx-{self.properties.default_hw_version}"
        if wanted is not None:
            current = str(vm.config.version or "")
            if current.startswith("vmx-") and current[4:].isdigit() and int(current[4:]) >= \
                    self.properties.default_hw_version:
                return
        what = f"hardware upgrade of {vm_cid} to {wanted or 'the newest version'}"
        try:
            tasks.wait(self.session, vm.UpgradeVM_Task(version=wanted) if wanted else vm.UpgradeVM_Task(), what)
        except vim.fault.AlreadyUpgraded:
            log.info("%s: it has that version already", what)

    def _extra(self, props: VMCloudProperties) -> dict[str, Any]:
        return {**self.properties.vmx_options, **(props.vmx_options or {})}

    def _write_env(self, vm: Any, vm_cid: str, datastore: Any, document: bytes, made: list[Any]) -> None:
        """The settings as `env.iso` (and `env.json`, for whoever debugs) in the VM's
        directory, on its CD-ROM, and as `guestinfo.userdata`: one upload each, one
        reconfiguration."""
        from pyVmomi import vim

        from .iso import env_iso

        dc = self.place.config.name
        for name, body in (("env.json", document), ("env.iso", env_iso(document))):
            transfer.request(self.session, "PUT", transfer.datastore_path(dc, datastore.name, f"{vm_cid}/{name}"),
                             body=body)
        iso = f"[{datastore.name}] {vm_cid}/env.iso"
        cdrom = devices.cdrom(made)
        change = (devices.edit(devices.iso_cdrom(cdrom, iso, datastore.ref)) if cdrom is not None
                  else devices.add(devices.new_cdrom(made, iso, datastore.ref)))
        userdata = [vim.option.OptionValue(key="guestinfo.userdata", value=base64.b64encode(document).decode()),
                    vim.option.OptionValue(key="guestinfo.userdata.encoding", value="base64")]
        spec = vim.vm.ConfigSpec(deviceChange=[change], extraConfig=userdata)
        # an edit of the CD-ROM and of two keys: the same again ends the same, so a lost answer
        # is met by sending it again
        tasks.run(self.session, lambda: vm.ReconfigVM_Task(spec=spec), f"agent settings of {vm_cid}",
                  done=lambda: None)

    def _discard(self, vm: Any, vm_cid: str) -> None:
        """Destroy a VM create_vm could not finish (logged; a failure to is logged too, and
        the VM is then left for delete_vm to find by its name)."""
        try:
            self._destroy(vm, vm_cid, nsx_required=False)
        except Exception as exc:  # noqa: BLE001 - the creation's own failure is what the call reports
            log.error("create_vm: the unfinished VM %s could not be deleted (%s); delete_vm %s removes it",
                      vm_cid, errors.describe(exc), vm_cid)

    # ------------------------------------------------------------ delete_vm

    def delete(self, vm_cid: str) -> None:
        vm = self.place.find_vm(vm_cid)
        if vm is None:
            log.info("delete_vm: %s is not there (deleted before?)", vm_cid)
            return
        with self.lock(vm_cid):
            self._destroy(vm, vm_cid)

    def _destroy(self, vm: Any, vm_cid: str, nsx_required: bool = True) -> None:
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

    def reboot(self, vm_cid: str) -> None:
        vm = self.require(vm_cid)
        tasks.wait(self.session, vm.ResetVM_Task(), f"reset of {vm_cid}")

    def set_metadata(self, vm_cid: str, values: dict[str, str]) -> None:
        vm = self.require(vm_cid)
        metadata.set_values(self.session, vm, values)
        manager = self._nsxt()
        if manager is not None:  # the VM's NSX ports carry them too, for NSX's firewall rules
            manager.tag(vm, vm_cid, values)

    def disks(self, vm_cid: str) -> list[str]:
        return sorted(self.persistent(self.require(vm_cid))[0])

    def persistent(self, vm: Any) -> tuple[dict[str, Any], dict[int, Any]]:
        """The VM's persistent disks by cid, as the official CPI tells them (in disk_path, or
        named by the VM's records: devices.persistent), and those records (records.of)."""
        recorded = records.of(vm)
        found = devices.persistent(list(vm.config.hardware.device), self.place.config.disk_path,
                                   records.labels(recorded))
        return found, recorded

    def detach(self, vm: Any, vm_cid: str, disks: dict[str, Any], recorded: dict[int, Any]) -> None:
        """Detach `disks` (cid → device) in one reconfiguration that also removes their
        records (records.py), so that no record outlives its disk's attachment to name a
        device key vSphere gives again; then a disk vSphere has moved since it was recorded
        goes back to the recorded path, as the official CPI moves it back."""
        from pyVmomi import vim

        back = {cid: records.moved_from(disk, recorded) for cid, disk in disks.items()}
        keys = {disk.key for disk in disks.values()}
        spec = vim.vm.ConfigSpec(deviceChange=[devices.remove(disk) for disk in disks.values()],
                                 vAppConfig=records.forget(sorted(keys & set(recorded))))
        tasks.run(self.session, lambda: vm.ReconfigVM_Task(spec=spec), f"detaching {', '.join(sorted(disks))} from "
                  f"{vm_cid}", done=lambda: None if keys & {d.key for d in devices.disks(
                      list(vm.config.hardware.device))} else True)
        for cid, destination in back.items():
            if destination is not None:
                self._move_back(cid, devices.file_of(disks[cid]), destination)

    def _move_back(self, cid: str, source: str, destination: str) -> None:
        from pyVmomi import vim

        manager = self.session.content.virtualDiskManager
        datacenter = self.place.datacenter

        def there() -> bool | None:
            try:
                manager.QueryVirtualDiskUuid(name=destination, datacenter=datacenter)
                return True
            except vim.fault.FileNotFound:
                return None

        if there():
            log.warning("detach: %s is at %s, not at %s where it was recorded, which holds a disk: left where it is",
                        cid, source, destination)
            return
        log.warning("detach: %s is at %s since it was recorded (a storage move): moving it back to %s", cid, source,
                    destination)
        tasks.run(self.session, lambda: manager.MoveVirtualDisk_Task(
            sourceName=source, sourceDatacenter=datacenter, destName=destination, destDatacenter=datacenter,
            force=False), f"moving {cid} back to {destination}", done=there)

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
