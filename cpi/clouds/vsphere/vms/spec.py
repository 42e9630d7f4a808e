"""What create_vm decides from its arguments before it asks the vCenter anything: the
vm_type's and the networks' cloud_properties read through their models, the VM's name,
whose it is, its advanced configuration and whether all its memory is reserved. One typed
object (VmSpec), built once here and handed to the clone (clone.py) and what follows it
(finish.py), as the official CPI carries its vm_config along."""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpi.cids import AgentId, StemcellCid, VmCid
from cpi.errors import VMCreationFailed
from cpi.validation import parse

from ..names import ORIGIN_KEYS
from ..nsx import nsxt_refusal
from ..props import NetworkCloudProperties, VMCloudProperties

if TYPE_CHECKING:
    from cpi.models import CallContext, Network

    from ..job_config import VsphereProperties

log = logging.getLogger("cpi.clouds.vsphere")


@dataclass(frozen=True)
class VmSpec:
    agent_id: AgentId
    stemcell_cid: StemcellCid
    vm_cid: VmCid
    props: VMCloudProperties
    #: the director's networks by name, in its order (the NICs are made in it)
    networks: dict[str, Network]
    #: each network's cloud_properties, in the same order
    network_props: tuple[NetworkCloudProperties, ...]
    env: dict[str, Any]
    #: the VM's `bosh.*` extraConfig keys: its agent and director (`cpi list`, `cpi orphans`)
    origin: dict[str, str]
    #: cpi.json's vmx_options with the vm_type's over them, key by key
    vmx_options: dict[str, Any]
    reserve_all_memory: bool

    @property
    def need_mib(self) -> int:
        """What the VM's datastore must take: the ephemeral disk, and the memory's swap file
        unless all the memory is reserved."""
        return self.props.disk + (0 if self.reserve_all_memory else self.props.ram)

    @classmethod
    def decide(cls, properties: VsphereProperties, context: CallContext, agent_id: AgentId,
               stemcell_cid: StemcellCid, cloud_properties: dict[str, Any], nets: dict[str, Network],
               env: dict[str, Any]) -> VmSpec:
        """The spec, or a CpiError (VMCreationFailed) for a vm_type or network create_vm cannot
        make a VM of, before anything is made."""
        props = parse(VMCloudProperties, cloud_properties, "vm_type cloud_properties", strict=context.strict)
        if props.nsxt:
            refused = nsxt_refusal(properties)
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
                                       f"network '{name}' cloud_properties", strict=context.strict))
        origin: dict[str, str] = {ORIGIN_KEYS["agent_id"]: agent_id}
        if context.director_uuid:
            origin[ORIGIN_KEYS["director_uuid"]] = context.director_uuid
        return cls(agent_id=agent_id, stemcell_cid=stemcell_cid, vm_cid=_name(properties, env), props=props,
                   networks=nets, network_props=tuple(network_props), env=env, origin=origin,
                   vmx_options={**properties.vmx_options, **(props.vmx_options or {})},
                   reserve_all_memory=_reserve_all_memory(properties, props))


def _name(properties: VsphereProperties, env: dict[str, Any]) -> VmCid:
    """`vm-<uuid>`, or with `enable_human_readable_name` `<instance group>_<deployment>_<12
    hex digits>` (at most 80 characters) when the director sent those names in ASCII."""
    unique = uuid.uuid4()
    groups = ((env or {}).get("bosh") or {}).get("groups") or []
    if properties.enable_human_readable_name and len(groups) >= 3:
        _, deployment, instance_group = (str(g) for g in groups[:3])
        readable = f"{instance_group}_{deployment}"
        if readable.isascii() and re.fullmatch(r"[A-Za-z0-9_.-]+", readable):
            return VmCid(f"{readable[:80 - 13]}_{unique.hex[:12]}")
        log.info("create_vm: the instance group or deployment name is not plain ASCII: the VM is vm-<uuid>")
    return VmCid(f"vm-{unique}")


def _reserve_all_memory(properties: VsphereProperties, props: VMCloudProperties) -> bool:
    if props.asks_passthrough:
        return True  # vSphere requires it of a VM with passthrough devices
    if props.memory_reservation_locked_to_max is not None:
        return props.memory_reservation_locked_to_max
    return properties.memory_reservation_locked_to_max
