"""What follows create_vm's clone: the agent's settings (as `env.iso` on the CD-ROM and
`guestinfo.userdata`), the DRS rules and groups, the hardware version, the passthrough
devices, and the power on. Whatever fails here fails create_vm, which then destroys the
VM (vms.py)."""

from __future__ import annotations

import base64
import json
import logging
from typing import TYPE_CHECKING, Any

from cpi import agent_env
from cpi.errors import VMCreationFailed
from cpi.models import AgentConfig, Network

from .. import passthrough
from ..placement import drs
from ..vcenter import tasks, transfer
from . import devices

if TYPE_CHECKING:
    from cpi.cids import VmCid

    from ..placement.chosen import Placement
    from ..placement.datastores import Datastore
    from ..placement.place import Place
    from ..props import VMCloudProperties
    from ..vcenter.session import Session
    from .spec import VmSpec

log = logging.getLogger("cpi.clouds.vsphere")


def finish(session: Session, place: Place, agent: AgentConfig, vm: Any, spec: VmSpec,
           placement: Placement) -> dict[str, Any]:
    """The clone's agent settings, DRS rules, hardware, passthrough devices and power: what
    follows the clone. The networks as create_vm answers them (each with its NIC's MAC)."""
    from pyVmomi import vim

    vm_cid, props, properties, cluster = spec.vm_cid, spec.props, place.properties, placement.cluster
    made = list(vm.config.hardware.device)
    cards = devices.nics(made)
    if len(cards) != len(spec.networks):
        raise VMCreationFailed(f"the vCenter made {vm_cid} with {len(cards)} NIC(s) for {len(spec.networks)} "
                               "network(s)")
    out = {}
    for (name, net), card in zip(spec.networks.items(), cards, strict=True):
        wired = net.wire()
        wired["mac"] = card.macAddress
        out[name] = wired
    uuid_disks = devices.uuid_enabled(spec.vmx_options)
    system = devices.system(made, place.config.disk_path)
    ephemeral = devices.ephemeral(made)
    settings = agent_env.settings(
        agent_id=spec.agent_id, vm_name=vm_cid, agent=agent,
        networks={name: Network.model_validate(wired) for name, wired in out.items()}, env=spec.env,
        system_disk=str(system.unitNumber) if system is not None else "0",
        ephemeral_disk=({"id": ephemeral.backing.uuid.lower()} if uuid_disks and ephemeral.backing.uuid
                        else str(ephemeral.unitNumber)))
    settings["vm"]["id"] = vm._moId
    document = json.dumps(settings).encode()
    _write_env(session, place, vm, vm_cid, placement.datastore, document, made)
    rules = getattr(placement.settings, "drs_rules", None) or []  # cpi.json's clusters have none
    for rule in rules:
        drs.add_to_anti_affinity_rule(session, properties, cluster, rule.name, vm)
    if not rules and properties.enable_auto_anti_affinity_drs_rules:
        group = ((spec.env or {}).get("bosh") or {}).get("group")
        if group:
            drs.add_to_anti_affinity_rule(session, properties, cluster, group, vm)
    if props.vm_group:
        drs.add_to_vm_group(session, properties, cluster, props.vm_group, vm)
    if placement.settings.host_group_name and placement.settings.host_group_rule:
        drs.tie_to_host_group(session, properties, cluster, placement.settings.host_group_name,
                              placement.settings.host_group_rule, vm)
    if props.disable_drs:
        drs.disable_drs(session, properties, cluster, vm)
    _hardware(session, place, vm, vm_cid, props)
    if placement.offered is not None:
        passthrough.attach(session, vm, vm_cid, props, placement.offered)
    try:
        tasks.wait(session, vm.PowerOnVM_Task(), f"power on of {vm_cid}")
    except vim.fault.InvalidPowerState:  # a power on whose answer was lost, sent again: on already
        if str(vm.runtime.powerState) != "poweredOn":
            raise
    return out


def _hardware(session: Session, place: Place, vm: Any, vm_cid: VmCid, props: VMCloudProperties) -> None:
    """`upgrade_hw_version`, or a vm_type with passthrough devices (a VM at the stemcell's
    version takes one vGPU): the newest hardware version the host supports; otherwise
    `default_hw_version` when the stemcell's is older (a VM is never downgraded)."""
    from pyVmomi import vim

    properties = place.properties
    newest = properties.upgrade_hw_version if props.upgrade_hw_version is None else props.upgrade_hw_version
    newest = newest or props.asks_passthrough
    wanted = None if newest else f"vmx-{properties.default_hw_version}"
    if wanted is not None:
        current = str(vm.config.version or "")
        if current.startswith("vmx-") and current[4:].isdigit() and int(current[4:]) >= \
                properties.default_hw_version:
            return
    what = f"hardware upgrade of {vm_cid} to {wanted or 'the newest version'}"
    try:
        tasks.wait(session, vm.UpgradeVM_Task(version=wanted) if wanted else vm.UpgradeVM_Task(), what)
    except vim.fault.AlreadyUpgraded:
        log.info("%s: it has that version already", what)


def _write_env(session: Session, place: Place, vm: Any, vm_cid: VmCid, datastore: Datastore, document: bytes,
               made: list[Any]) -> None:
    """The settings as `env.iso` (and `env.json`, for whoever debugs) in the VM's
    directory, on its CD-ROM, and as `guestinfo.userdata`: one upload each, one
    reconfiguration."""
    from pyVmomi import vim

    from .iso import env_iso

    dc = place.config.name
    for name, body in (("env.json", document), ("env.iso", env_iso(document))):
        transfer.request(session, "PUT", transfer.datastore_path(dc, datastore.name, f"{vm_cid}/{name}"),
                         body=body)
    iso = f"[{datastore.name}] {vm_cid}/env.iso"
    cdrom = devices.cdrom(made)
    change = (devices.edit(devices.iso_cdrom(cdrom, iso, datastore.ref)) if cdrom is not None
              else devices.add(devices.new_cdrom(made, iso, datastore.ref)))
    userdata = [vim.option.OptionValue(key="guestinfo.userdata", value=base64.b64encode(document).decode()),
                vim.option.OptionValue(key="guestinfo.userdata.encoding", value="base64")]
    config = vim.vm.ConfigSpec(deviceChange=[change], extraConfig=userdata)
    # an edit of the CD-ROM and of two keys: the same again ends the same, so a lost answer
    # is met by sending it again
    tasks.run(session, lambda: vm.ReconfigVM_Task(spec=config), f"agent settings of {vm_cid}", done=lambda: None)
