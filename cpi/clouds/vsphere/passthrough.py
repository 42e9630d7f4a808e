"""A vm_type's `vgpus`, `pci_passthroughs` and `device_groups`: the check, before anything is
made, that the vCenter and the hosts of the VM's clusters offer them, and the devices that
give them to the VM after its clone, as the official CPI makes them.

Why check first: the official CPI clones the VM, adds the devices and learns that no host
has such a GPU only when the power-on fails, after a clone, an upload and several
reconfigurations. Here the hosts of every cluster the VM may go in are read in one
PropertyCollector request (their vGPU profiles, their PCI devices and which of those are
ready for passthrough), and a cluster is kept only when one of its usable hosts (connected,
out of maintenance mode) offers all that is asked: the VM runs on one host. When no cluster
is left, create_vm fails with VMCreationFailed (not retryable) naming the key, the value,
each cluster and what its hosts offer, and nothing is made. The vCenter's API must know what
is asked too: pyVmomi sends an object the negotiated API version does not know as its
nearest older type, so a Dynamic DirectPath device sent to a vSphere 6.x vCenter would
arrive as a device without its allowed devices; such a vCenter is told apart and refused.

The devices, as the official CPI: each vGPU profile a VirtualPCIPassthrough backed by a
VmiopBackingInfo, all in one reconfiguration; each PCI device a VirtualPCIPassthrough backed
by a DynamicBackingInfo that allows its vendor and device id, one reconfiguration each (so
that several devices of the same ids can be added); each device group a VendorDeviceGroup in
the VM's deviceGroups with the group's vGPUs (its `nvidiaVgpu` components, as the host's
AssignableHardwareManager describes the group) linked to it by their deviceGroupInfo. They
are added after the hardware upgrade: a VM at the stemcell's hardware version takes one vGPU.

Device groups are vSphere 8's (RetrieveVendorDeviceGroupInfo): a host that answers it with
MethodNotFound, NotSupported or InvalidRequest (an older vCenter) offers none.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cpi.cids import VmCid
from cpi.errors import VMCreationFailed

from . import collector, errors, lookups
from .placement.chosen import Found
from .props import PASSTHROUGH_KEYS
from .vcenter import tasks

if TYPE_CHECKING:
    from .props import VMCloudProperties
    from .vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")

#: the component devices of a device group that are vGPUs, as vSphere names their type
VGPU_COMPONENT = "nvidiaVgpu"
#: how a vCenter without vendor device groups answers RetrieveVendorDeviceGroupInfo
_LACKS_METHOD = ("MethodNotFound", "NotSupported", "InvalidRequest")


def _pci(vendor_id: int, device_id: int) -> str:
    return f"{vendor_id & 0xFFFF:#06x}:{device_id & 0xFFFF:#06x}"


@dataclass
class Offer:
    """What one host offers: vGPU profiles, PCI devices ready for passthrough (by
    `vendor:device` in hex), and device groups (name → the vGPU profiles of its components)."""

    host: str
    profiles: set[str] = field(default_factory=set)
    devices: set[str] = field(default_factory=set)
    groups: dict[str, list[str]] = field(default_factory=dict)
    #: why the host offers no device groups, when it could not say (an older vCenter)
    groups_lacking: str = ""


def check(session: Session, datacenter: str, clusters: list[str], props: VMCloudProperties) -> Found:
    """The clusters of `clusters` (names) with a usable host that offers all the vm_type
    asks; VMCreationFailed, saying what each lacks, when none has one."""
    _check_api(session, props)
    refs = {name: lookups.cluster(session, datacenter, name) for name in clusters}
    by_cluster = _hosts(session, refs, props)
    kept: list[str] = []
    groups: dict[str, list[str]] = {}
    lacking: list[str] = []
    for name in clusters:
        hosts = by_cluster.get(refs[name]._moId, [])
        offers: list[Offer] = []
        for host, values in hosts:
            offer = _offer(values)
            if props.device_groups:
                _groups(host, values, offer)
            offers.append(offer)
            if _offers_all(offer, props):
                kept.append(name)
                groups.update({g: offer.groups[g] for g in props.device_groups or []})
                break
        else:
            lacking.append(_lacking(name, offers, props))
    if not kept:
        raise VMCreationFailed("; ".join(lacking), ok_to_retry=False)
    if lacking:
        log.info("create_vm: the VM goes in %s only: %s", ", ".join(kept), "; ".join(lacking))
    return Found(kept, groups)


def _api(session: Session) -> str:
    from pyVmomi.VmomiSupport import versionIdMap

    return versionIdMap.get(session.version, session.version)


def _check_api(session: Session, props: VMCloudProperties) -> None:
    """Refuse what the vCenter's API version cannot carry (see the module's docstring)."""
    from pyVmomi import VmomiSupport, vim

    needs: list[tuple[str, Any, str]] = []
    if props.pci_passthroughs:
        needs.append(("pci_passthroughs", vim.vm.device.VirtualPCIPassthrough.DynamicBackingInfo,
                      "Dynamic DirectPath I/O, which needs vSphere 7.0 or later"))
    if props.device_groups:
        needs.append(("device_groups", vim.vm.VirtualDeviceGroups, ("vendor device groups, which need vSphere 8.0 "
                      "or later")))
    for key, kind, what in needs:
        if not VmomiSupport.IsChildVersion(session.version, kind._version):
            raise VMCreationFailed(f"vm_type {key}: the vCenter at {session.address} (API {_api(session)}) lacks "
                                   f"{what}", ok_to_retry=False)


def _hosts(session: Session, clusters: dict[str, Any], props: VMCloudProperties) -> dict[str, list[tuple[Any, dict]]]:
    """The usable hosts of each cluster (by the cluster's moId), with the properties the
    vm_type's keys need: one PropertyCollector request whatever the number of hosts."""
    from pyVmomi import vim, vmodl

    spec = vmodl.query.PropertyCollector
    walk = spec.TraversalSpec(name="hosts", type=vim.ClusterComputeResource, path="host", skip=False)
    paths = ["name", "parent", "runtime.connectionState", "runtime.inMaintenanceMode"]
    if props.vgpus:
        paths.append("config.sharedPassthruGpuTypes")
    if props.pci_passthroughs:
        paths += ["hardware.pciDevice", "config.pciPassthruInfo"]
    if props.device_groups:
        paths.append("configManager.assignableHardwareManager")
    found: dict[str, list[tuple[Any, dict]]] = {}
    for host, values in collector.retrieve(session, [spec.ObjectSpec(obj=ref, skip=True, selectSet=[walk])
                                                     for ref in clusters.values()], vim.HostSystem, paths):
        if str(values.get("runtime.connectionState")) != "connected" or values.get("runtime.inMaintenanceMode"):
            continue
        parent = values.get("parent")
        if parent is not None:
            found.setdefault(parent._moId, []).append((host, values))
    for hosts in found.values():
        hosts.sort(key=lambda item: item[1].get("name") or "")
    return found


def _offer(values: dict[str, Any]) -> Offer:
    offer = Offer(host=values.get("name") or "?")
    offer.profiles = set(values.get("config.sharedPassthruGpuTypes") or [])
    ready = {info.id for info in values.get("config.pciPassthruInfo") or [] if info.passthruActive}
    offer.devices = {_pci(d.vendorId, d.deviceId) for d in values.get("hardware.pciDevice") or [] if d.id in ready}
    return offer


def _groups(host: Any, values: dict[str, Any], offer: Offer) -> None:
    """The device groups of `host` into `offer`: one RetrieveVendorDeviceGroupInfo."""
    manager = values.get("configManager.assignableHardwareManager")
    if manager is None:
        offer.groups_lacking = "no AssignableHardwareManager"
        return
    try:
        infos = manager.RetrieveVendorDeviceGroupInfo() or []
    except Exception as exc:  # noqa: BLE001 - a vCenter fault, told apart by its name and translated here
        if errors.fault_name(exc) in _LACKS_METHOD:
            offer.groups_lacking = f"RetrieveVendorDeviceGroupInfo answered {errors.describe(exc)}"
            return
        raise VMCreationFailed(f"vm_type device_groups: the device groups of host {offer.host} could not be read: "
                               f"{errors.describe(exc)}", ok_to_retry=False) from None
    for info in infos:
        profiles = [component.device.backing.vgpu for component in info.componentDeviceInfo or []
                    if component.type == VGPU_COMPONENT and getattr(component.device, "backing", None) is not None
                    and getattr(component.device.backing, "vgpu", None)]
        if profiles:
            offer.groups[info.deviceGroupName] = profiles
        else:
            log.info("create_vm: device group '%s' of host %s has no vGPU component: not usable", info.deviceGroupName,
                     offer.host)


def _offers_all(offer: Offer, props: VMCloudProperties) -> bool:
    return (set(props.vgpus or []) <= offer.profiles
            and {_pci(p.vendor_id, p.device_id) for p in props.pci_passthroughs or []} <= offer.devices
            and set(props.device_groups or []) <= set(offer.groups))


def _lacking(cluster: str, offers: list[Offer], props: VMCloudProperties) -> str:
    """Why no host of `cluster` will do: the first thing asked that none offers, or that no
    one host offers all of it."""
    if not offers:
        keys = ", ".join(k for k in PASSTHROUGH_KEYS if getattr(props, k))
        return f"vm_type {keys}: cluster {cluster} has no connected host out of maintenance mode"
    union = Offer(host="")
    for offer in offers:
        union.profiles |= offer.profiles
        union.devices |= offer.devices
        union.groups.update(offer.groups)

    def offered(names: set[str] | dict[str, Any], why: str = "") -> str:
        return ", ".join(sorted(names)) or ("none" + (f": {why}" if why else ""))

    for profile in props.vgpus or []:
        if profile not in union.profiles:
            return (f"vm_type vgpus: no host of cluster {cluster} offers vGPU profile '{profile}' (its hosts offer "
                    f"{offered(union.profiles)})")
    for device in props.pci_passthroughs or []:
        wanted = _pci(device.vendor_id, device.device_id)
        if wanted not in union.devices:
            return (f"vm_type pci_passthroughs: no host of cluster {cluster} offers PCI device {wanted} "
                    f"(vendor:device) ready for passthrough (its hosts offer {offered(union.devices)})")
    for group in props.device_groups or []:
        if group not in union.groups:
            why = "; ".join(sorted({f"{o.host}: {o.groups_lacking}" for o in offers if o.groups_lacking}))
            return (f"vm_type device_groups: no host of cluster {cluster} offers device group '{group}' (its hosts "
                    f"offer {offered(union.groups, why)})")
    each = "; ".join(f"{o.host}: vGPU profiles {offered(o.profiles)}, PCI devices {offered(o.devices)}, device groups "
                     f"{offered(o.groups)}" for o in offers)
    asked = ", ".join(k for k in PASSTHROUGH_KEYS if getattr(props, k))
    return f"vm_type {asked}: no one host of cluster {cluster} offers all that is asked together ({each})"


# ---------------------------------------------------------------- the devices


def attach(session: Session, vm: Any, vm_cid: VmCid, props: VMCloudProperties, found: Found) -> None:
    """Give the VM its vGPUs, PCI devices and device groups (after its hardware upgrade).
    Each reconfiguration whose answer was lost is looked for on the VM before it is sent
    again (tasks.run), so none is added twice."""
    from pyVmomi import vim

    backing = vim.vm.device.VirtualPCIPassthrough
    if props.vgpus:
        spec = vim.vm.ConfigSpec(deviceChange=[_add(backing.VmiopBackingInfo(vgpu=profile), key=-300 - i)
                                               for i, profile in enumerate(props.vgpus)])
        tasks.run(session, lambda: vm.ReconfigVM_Task(spec=spec), f"vGPUs of {vm_cid}",
                  done=lambda: True if len(_vgpus(vm)) >= len(props.vgpus or []) else None)
    for i, device in enumerate(props.pci_passthroughs or []):
        allowed = backing.AllowedDevice(vendorId=device.vendor_id, deviceId=device.device_id)
        spec = vim.vm.ConfigSpec(deviceChange=[_add(backing.DynamicBackingInfo(allowedDevice=[allowed]), key=-400)])
        tasks.run(session, functools.partial(vm.ReconfigVM_Task, spec=spec),
                  f"PCI device {_pci(device.vendor_id, device.device_id)} of {vm_cid}",
                  done=functools.partial(_present, vm, i + 1))
    if props.device_groups:
        declared: list[Any] = []
        changes: list[Any] = []
        for index, name in enumerate(props.device_groups):
            declared.append(vim.vm.VirtualDeviceGroups.VendorDeviceGroup(groupInstanceKey=index, deviceGroupName=name))
            for sequence, profile in enumerate(found.groups[name]):
                change = _add(backing.VmiopBackingInfo(vgpu=profile), key=-500 - len(changes))
                change.device.deviceGroupInfo = vim.vm.device.VirtualDevice.DeviceGroupInfo(
                    groupInstanceKey=index, sequenceId=sequence)
                changes.append(change)
        spec = vim.vm.ConfigSpec(deviceChange=changes, deviceGroups=vim.vm.VirtualDeviceGroups(deviceGroup=declared))
        tasks.run(session, lambda: vm.ReconfigVM_Task(spec=spec), f"device groups of {vm_cid}",
                  done=lambda: True if (vm.config.deviceGroups and vm.config.deviceGroups.deviceGroup) else None)


def _add(backing: Any, key: int) -> Any:
    from pyVmomi import vim

    from .vms import devices

    return devices.add(vim.vm.device.VirtualPCIPassthrough(key=key, backing=backing))


def _passthrough(vm: Any) -> list[Any]:
    from pyVmomi import vim

    return [d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualPCIPassthrough)]


def _vgpus(vm: Any) -> list[Any]:
    from pyVmomi import vim

    return [d for d in _passthrough(vm) if isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
            and getattr(d, "deviceGroupInfo", None) is None]


def _present(vm: Any, count: int) -> bool | None:
    """Whether the VM has `count` Dynamic DirectPath devices (a lost reconfiguration's look)."""
    return True if len(_dynamic(vm)) >= count else None


def _dynamic(vm: Any) -> list[Any]:
    from pyVmomi import vim

    return [d for d in _passthrough(vm)
            if isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.DynamicBackingInfo)]
