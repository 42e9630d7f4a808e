"""The one clone task's spec create_vm sends: the stemcell's NICs replaced by one a network,
its SCSI controller of the configured type, the ephemeral disk, the system disk grown when
asked, CPU, memory and their reservations, the advanced configuration and whose the VM is,
its storage policy, and a linked clone of the stemcell's snapshot unless the system disk
grows. Built from the typed spec (spec.py) and placement (placement/choose.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpi.errors import VMCreationFailed

from .. import collector, extension, lookups
from . import devices

if TYPE_CHECKING:
    from pyVmomi import vim

    from ..placement.chosen import Placement
    from ..placement.place import Place
    from ..templates import Template
    from ..vcenter.session import Session
    from .spec import VmSpec


def backings(session: Session, place: Place, spec: VmSpec) -> list[Any]:
    """Each network's NIC backing, in the networks' order: a network not found refuses the VM
    before the clone."""
    return [devices.nic_backing(session, lookups.network(session, place.config.name, net.name))
            for net in spec.network_props]


def clone_spec(session: Session, place: Place, spec: VmSpec, placement: Placement, template: Template,
               nic_backings: list[Any]) -> Any:
    """The vim.vm.CloneSpec of the VM (not powered on, not a template)."""
    from pyVmomi import vim

    props, properties, datastore, policy = spec.props, place.properties, placement.datastore, placement.policy
    template_devices = list(template.ref.config.hardware.device)
    changes = [devices.remove(nic) for nic in devices.nics(template_devices)]
    changes += [devices.add(devices.nic(backing, key=-100 - i)) for i, backing in enumerate(nic_backings)]
    controller = devices.scsi_controller(template_devices)
    if controller is None:
        raise VMCreationFailed(f"stemcell {template.name} has no SCSI controller for the ephemeral disk",
                               ok_to_retry=False)
    retyped = devices.retyped_controller(controller, properties.default_scsi_controller_type)
    if retyped is not None:  # the disks on it keep its key, so the ephemeral disk is added to it the same
        changes.append(devices.edit(retyped))
        controller = retyped
    thin = properties.default_disk_type == "thin"
    ephemeral = devices.new_disk(controller, devices.free_unit(template_devices, controller),
                                 f"[{datastore.name}] {spec.vm_cid}/{devices.EPHEMERAL_FILE}", props.disk, thin)
    ephemeral_change = devices.add(ephemeral, create_file=True)
    changes.append(ephemeral_change)
    linked = not props.root_disk_size_gb
    system = devices.system(template_devices, place.config.disk_path)
    if props.root_disk_size_gb and system is not None:
        system.capacityInKB = props.root_disk_size_gb * 1024 * 1024
        changes.append(devices.edit(system))
    config = vim.vm.ConfigSpec(
        numCPUs=props.cpu, memoryMB=props.ram, deviceChange=changes,
        cpuHotAddEnabled=props.cpu_hot_add_enabled, memoryHotAddEnabled=props.memory_hot_add_enabled,
        nestedHVEnabled=props.nested_hardware_virtualization or None,
        extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in spec.vmx_options.items()])
    if spec.reserve_all_memory:
        config.memoryReservationLockedToMax = True
    config.managedBy = extension.managed_by(session)  # "managed by BOSH" in the vSphere client
    if policy is not None:  # the VM's home and the ephemeral disk; the system disk below
        config.vmProfile = [policy.spec()]
        ephemeral_change.profile = [policy.spec()]
    location = vim.vm.RelocateSpec(datastore=datastore.ref, pool=placement.pool)
    if linked:
        location.diskMoveType = "createNewChildDiskBacking"
    if policy is not None and system is not None:
        # the template's disk as the clone gets it: where it goes, how, and its policy
        location.disk = [vim.vm.RelocateSpec.DiskLocator(diskId=system.key, datastore=datastore.ref,
                                                         diskMoveType=location.diskMoveType,
                                                         profile=[policy.spec()])]
    clone = vim.vm.CloneSpec(location=location, powerOn=False, template=False, config=config,
                             snapshot=template.snapshot if linked else None)
    reserve = properties.cpu_reserve_full_mhz if props.cpu_reserve_full_mhz is None else props.cpu_reserve_full_mhz
    if reserve:
        config.cpuAllocation = vim.ResourceAllocationInfo(reservation=props.cpu * _host_mhz(
            session, placement.cluster))
    # whose it is, from the clone on: a VM left by a create_vm killed half-way is attributed
    config.extraConfig += [vim.option.OptionValue(key=key, value=value) for key, value in spec.origin.items()]
    return clone


def _host_mhz(session: Session, cluster: vim.ComputeResource) -> int:
    """The clock of the fastest connected host of the cluster (cpu_reserve_full_mhz)."""
    from pyVmomi import vim

    clocks = [values.get("summary.hardware.cpuMhz") or 0
              for _, values in collector.of(session, list(cluster.host), vim.HostSystem,
                                            ["summary.hardware.cpuMhz", "runtime.connectionState"])
              if str(values.get("runtime.connectionState")) == "connected"]
    if not clocks:
        raise VMCreationFailed("cpu_reserve_full_mhz: the cluster has no connected host to take the clock of")
    return max(clocks)
