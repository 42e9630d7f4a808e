"""A VM's virtual hardware as the CPI reads and changes it: its disks (system, ephemeral,
persistent), SCSI controller, CD-ROM and NICs, and the device specs that add, edit or
remove them.

A persistent disk is any disk whose file is in the datacenter's `disk_path` on a datastore
(`[ds] BOSH_Disks/disk-<uuid>.vmdk`), its cid the file's name without `.vmdk`, or one the
VM's "BOSH Persistent Disks" records name (records.py), as the official CPI tells them apart.
The ephemeral disk is the one named `ephemeral_disk.vmdk`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpi.cids import DiskCid

if TYPE_CHECKING:  # pyVmomi's own stubs; the SDK itself loads on the first request
    from pyVmomi import vim

    Device = vim.vm.device.VirtualDevice
    Disk = vim.vm.device.VirtualDisk
    Controller = vim.vm.device.VirtualController
    DeviceSpec = vim.vm.device.VirtualDeviceSpec

EPHEMERAL_FILE = "ephemeral_disk.vmdk"
#: SCSI unit 7 is the controller's own
CONTROLLER_UNIT = 7


def _vim() -> Any:
    from pyVmomi import vim

    return vim


def disks(devices: list[Device]) -> list[Disk]:
    from pyVmomi import vim

    return [d for d in devices if isinstance(d, vim.vm.device.VirtualDisk)]


def file_of(device: Device) -> str:
    return getattr(device.backing, "fileName", "") or ""


def persistent(devices: list[Device], disk_path: str,
               recorded: dict[int, DiskCid] | None = None) -> dict[DiskCid, Disk]:
    """The persistent disks among `devices`, by disk cid: those in disk_path, and those the
    VM's records name (`recorded`: device key → cid, records.labels), wherever vSphere has
    moved them since (Storage vMotion moves them into the VM's folder)."""
    marker = f"] {disk_path.strip('/')}/"
    found: dict[DiskCid, Disk] = {}
    for disk in disks(devices):
        name = file_of(disk)
        if recorded and disk.key in recorded:
            found[recorded[disk.key]] = disk
        elif marker in name and name.endswith(".vmdk"):
            found[DiskCid(name.rsplit("/", 1)[-1][: -len(".vmdk")])] = disk
    return found


def ephemeral(devices: list[Device]) -> Any:
    return next((d for d in disks(devices) if file_of(d).endswith(f"/{EPHEMERAL_FILE}")), None)


def system(devices: list[Device], disk_path: str) -> Any:
    others = {id(ephemeral(devices))} | {id(d) for d in persistent(devices, disk_path).values()}
    return next((d for d in disks(devices) if id(d) not in others), None)


def uuid_enabled(extra_config: dict[str, Any]) -> bool:
    """Whether the VM's extraConfig (vmx options) sets `disk.enableUUID`: the agent then finds
    disks by UUID, as the official CPI hands them over."""
    return str(extra_config.get("disk.enableUUID", "")).upper() in ("TRUE", "1")


def scsi_controller(devices: list[Device]) -> Any:
    return next((d for d in devices if isinstance(d, _vim().vm.device.VirtualSCSIController)), None)


#: `default_scsi_controller_type` -> the class of vSphere's device, as the official CPI maps them
SCSI_CONTROLLER_CLASSES = {"paravirtual": "ParaVirtualSCSIController", "lsi_logic": "VirtualLsiLogicController",
                           "lsi_logic_sas": "VirtualLsiLogicSASController"}


def retyped_controller(controller: Any, kind: str) -> Controller | None:
    """`controller` as a SCSI controller of `kind` (a SCSI_CONTROLLER_CLASSES key), or None
    when it is one already. The official CPI's way to change a stemcell's controller in the
    clone spec: a device of the new class with the old one's key, bus, slot and disks, sent
    as an edit, so the disks on it stay where they are (no re-keying, no unit changes)."""
    wanted = getattr(_vim().vm.device, SCSI_CONTROLLER_CLASSES[kind])
    if isinstance(controller, wanted):
        return None
    return wanted(key=controller.key, controllerKey=controller.controllerKey, unitNumber=controller.unitNumber,
                  busNumber=controller.busNumber, device=list(controller.device or []), slotInfo=controller.slotInfo,
                  sharedBus=controller.sharedBus, scsiCtlrUnitNumber=controller.scsiCtlrUnitNumber,
                  hotAddRemove=controller.hotAddRemove)


def free_unit(devices: list[Device], controller: Device, taken: set[int] | None = None) -> int:
    """The lowest unit number of `controller` no device uses (and not in `taken`)."""
    used = {d.unitNumber for d in devices if d.controllerKey == controller.key} | (taken or set())
    limit = 64 if isinstance(controller, _vim().vm.device.ParaVirtualSCSIController) else 16
    for unit in range(limit):
        if unit != CONTROLLER_UNIT and unit not in used:
            return unit
    raise LookupError(f"the VM's SCSI controller has no free unit (all {limit - 1} are taken)")


def cdrom(devices: list[Device]) -> Any:
    return next((d for d in devices if isinstance(d, _vim().vm.device.VirtualCdrom)), None)


def nics(devices: list[Device]) -> list[Any]:
    return [d for d in devices if isinstance(d, _vim().vm.device.VirtualEthernetCard)]


def add(device: Device, create_file: bool = False) -> DeviceSpec:
    vim = _vim()
    spec = vim.vm.device.VirtualDeviceSpec(operation=vim.vm.device.VirtualDeviceSpec.Operation.add, device=device)
    if create_file:
        spec.fileOperation = vim.vm.device.VirtualDeviceSpec.FileOperation.create
    return spec


def edit(device: Device) -> DeviceSpec:
    vim = _vim()
    return vim.vm.device.VirtualDeviceSpec(operation=vim.vm.device.VirtualDeviceSpec.Operation.edit, device=device)


def remove(device: Device) -> DeviceSpec:
    """Remove `device` from the VM; a disk's files stay where they are."""
    vim = _vim()
    return vim.vm.device.VirtualDeviceSpec(operation=vim.vm.device.VirtualDeviceSpec.Operation.remove, device=device)


def new_disk(controller: Device, unit: int, file_name: str, size_mib: int, thin: bool, key: int = -1) -> Disk:
    vim = _vim()
    backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(fileName=file_name, diskMode="independent_persistent",
                                                            thinProvisioned=thin)
    return vim.vm.device.VirtualDisk(key=key, controllerKey=controller.key, unitNumber=unit,
                                     capacityInKB=size_mib * 1024, backing=backing)


def existing_disk(controller: Device, unit: int, file_name: str, key: int = -1) -> Disk:
    vim = _vim()
    backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(fileName=file_name, diskMode="independent_persistent")
    return vim.vm.device.VirtualDisk(key=key, controllerKey=controller.key, unitNumber=unit, backing=backing)


def iso_cdrom(device: Any, file_name: str, datastore: Any) -> Any:
    """`device` (the VM's CD-ROM) loaded with the ISO `file_name`, connected at power on."""
    vim = _vim()
    device.backing = vim.vm.device.VirtualCdrom.IsoBackingInfo(fileName=file_name, datastore=datastore)
    device.connectable = vim.vm.device.VirtualDevice.ConnectInfo(startConnected=True, connected=True,
                                                                 allowGuestControl=False)
    return device


def new_cdrom(devices: list[Device], file_name: str, datastore: Any) -> Any:
    """A CD-ROM with the ISO, on the VM's first IDE controller (for a stemcell without one)."""
    vim = _vim()
    ide = next((d for d in devices if isinstance(d, vim.vm.device.VirtualIDEController)
                and len(d.device or []) < 2), None)
    if ide is None:
        raise LookupError("the VM has no CD-ROM and no IDE controller with room for one")
    used = {d.unitNumber for d in devices if d.controllerKey == ide.key}
    device = vim.vm.device.VirtualCdrom(key=-200, controllerKey=ide.key, unitNumber=min({0, 1} - used))
    return iso_cdrom(device, file_name, datastore)


def nic(backing: Any, key: int) -> Device:
    vim = _vim()
    return vim.vm.device.VirtualVmxnet3(
        key=key, backing=backing, addressType="generated",
        connectable=vim.vm.device.VirtualDevice.ConnectInfo(startConnected=True, connected=True,
                                                            allowGuestControl=True))


def nic_backing(session: Any, network: Any) -> Any:
    """How a NIC connects to `network`: a distributed port group by its key and switch, an
    NSX (opaque) network by its id, a standard port group by name. Two or three requests
    for the first two (the port group's key and switch), none for the last."""
    vim = _vim()
    card = vim.vm.device.VirtualEthernetCard
    if isinstance(network, vim.dvs.DistributedVirtualPortgroup):
        switch = network.config.distributedVirtualSwitch
        return card.DistributedVirtualPortBackingInfo(
            port=vim.dvs.PortConnection(portgroupKey=network.key, switchUuid=switch.uuid))
    if isinstance(network, vim.OpaqueNetwork):
        summary = network.summary
        return card.OpaqueNetworkBackingInfo(opaqueNetworkId=summary.opaqueNetworkId,
                                             opaqueNetworkType=summary.opaqueNetworkType)
    return card.NetworkBackingInfo(deviceName=network.name, network=network)
