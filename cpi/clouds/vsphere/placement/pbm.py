"""Storage policies (SPBM): a vm_type's `storage_policy` and the global
`vm_storage_policy_name`, through the vCenter's storage policy service (SOAP at /pbm, the
vim25 session's cookie).

A policy is looked up by name and its compatible datastores asked of the service's placement
solver before anything is made, so that a policy the vCenter lacks, or one no datastore
satisfies, refuses create_vm with nothing to clean up; the VM, its system disk and its
ephemeral disk are then given the policy in the clone itself (vms/clone.py), so that no VM exists
without it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpi.errors import VMCreationFailed

if TYPE_CHECKING:
    from pyVmomi import vim

    from ..vcenter.session import Session

log = logging.getLogger("cpi.clouds.vsphere")

PATH = "/pbm"
#: vSphere 6.5's storage policy API: every vCenter this CPI speaks to serves it, and it has
#: what is used here (profile queries and PbmCheckRequirements)
VERSION = "pbm.version.version11"


@dataclass(frozen=True)
class Policy:
    name: str
    profile_id: str
    #: the managed object ids of the datastores the placement solver finds compatible
    datastores: frozenset[str]

    def spec(self) -> vim.vm.DefinedProfileSpec:
        """The profile spec a VM or a disk is given the policy with."""
        from pyVmomi import vim

        return vim.vm.DefinedProfileSpec(profileId=self.profile_id)


def find(session: Session, name: str, key: str, datastores: list[Any]) -> Policy:
    """The storage policy `name` and which of `datastores` (the datacenter's) are compatible
    with it: VMCreationFailed naming `key` (the setting that asked for it) when the vCenter
    has no such policy or none of them satisfies it. Four requests."""
    from pyVmomi import pbm

    stub = session.service_stub(PATH, VERSION)
    try:
        content = pbm.ServiceInstance("ServiceInstance", stub).RetrieveContent()
        manager = content.profileManager
        ids = manager.QueryProfile(resourceType=pbm.profile.ResourceType(resourceType="STORAGE"),
                                   profileCategory="REQUIREMENT")
        profiles = manager.RetrieveContent(profileIds=ids) if ids else []
        named = [profile for profile in profiles if profile.name == name]
        if not named:
            offered = ", ".join(sorted(f"'{profile.name}'" for profile in profiles)) or "none"
            raise VMCreationFailed(f"{key}: the vCenter has no storage policy '{name}' (it has {offered})",
                                   ok_to_retry=False)
        profile_id = named[0].profileId.uniqueId
        requirement = pbm.placement.CapabilityProfileRequirement(profileId=pbm.profile.ProfileId(uniqueId=profile_id))
        hubs = [pbm.placement.PlacementHub(hubType="Datastore", hubId=ref._moId) for ref in datastores]
        results = content.placementSolver.CheckRequirements(hubsToSearch=hubs, placementSubjectRef=None,
                                                            placementSubjectRequirement=[requirement])
    finally:
        stub.DropConnections()
    compatible = frozenset(result.hub.hubId for result in results or []
                           if result.hub.hubType == "Datastore" and not result.error)
    if not compatible:
        raise VMCreationFailed(f"{key}: no datastore of the datacenter satisfies storage policy '{name}'",
                               ok_to_retry=False)
    log.info("create_vm: storage policy '%s' (%s): %d compatible datastore(s)", name, profile_id, len(compatible))
    return Policy(name=name, profile_id=profile_id, datastores=compatible)
