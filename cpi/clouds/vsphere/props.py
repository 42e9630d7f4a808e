"""The vsphere cloud's cloud_properties models: vm_type (and vm_extension, AZ), disk_type
and network, under the names and with the meanings of the official vSphere CPI
(cloudfoundry/bosh-vsphere-cpi-release: the Ruby code that reads them). The job's config,
cpi.json's `cloud.properties.vsphere`, is cpi/clouds/vsphere/job_config.py; a vm_type's
`datacenters` refine its clusters with the same settings.

Every key a user can write is here, with a description and its constraints; a bad value
fails with an error naming the key and what is allowed (cpi.validation). A key no model knows
is ignored with a warning on the wire and is an error for `cpi validate`, as on the other
clouds. What a simulated vCenter cannot show (NSX-V, NSX-T, vGPUs, PCI passthrough, device
groups, storage policies) is accepted with its meaning; the cloud refuses a request that needs
it only when the vCenter lacks it, saying so. The reference docs/vsphere.md is generated from
these models (cpi/clouds/vsphere/cloud.py lists them).

No pyvmomi here: `info` of the cloud will import this module.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StrictBool, StrictInt

from cpi.clouds.vsphere.job_config import ClusterProperties, VmxValue, split_clusters
from cpi.models import StrictModel as _Strict

DiskType = Literal["thin", "preallocated", "thick", "eagerZeroedThick"]


# ---------------------------------------------------------------- placement and storage


class DrsRule(_Strict):
    """A DRS rule the CPI makes for the VMs of a vm_type (or AZ) in a cluster."""

    name: str = Field(..., min_length=1, description="Name of the rule; the CPI creates it when it is missing.")
    type: Literal["separate_vms"] = Field(
        ..., description="`separate_vms` (the only kind): keep the rule's VMs on different hosts.")


class PlacementClusterProperties(ClusterProperties):
    """A cluster of a vm_type's (or AZ's) `datacenters`: cpi.json's cluster settings, and
    `drs_rules`."""

    drs_rules: list[DrsRule] | None = Field(
        None, max_length=1, description="At most one DRS rule for the VMs placed in this cluster.")


class DatastoreClusters(_Strict):
    """The datastore clusters entry of a `datastores` list: `{clusters: [{NAME: {}}, ...]}`."""

    clusters: list[dict[str, dict[str, Any]]] = Field(
        ..., min_length=1, description="Datastore clusters by name, each as `{NAME: {}}`: their datastores are "
        "candidates, the CPI picking one by free space (it does not ask Storage DRS); those whose Storage DRS is off "
        "are left out (logged). A name may be a path through folders below the datacenter's datastore folder "
        "(`folder/cluster`); one that is not there fails the call, naming it.")

    @property
    def names(self) -> list[str]:
        return [name for entry in self.clusters for name in entry]


def _one_clusters_entry(value: list[str | DatastoreClusters]) -> list[str | DatastoreClusters]:
    if sum(isinstance(entry, DatastoreClusters) for entry in value) > 1:
        raise ValueError("name every datastore cluster in one {clusters: [...]} entry: the official CPI reads only "
                         "the first such entry, and would leave the others' clusters out without a word")
    return value


#: `datastores` of a vm_type or disk_type: datastore names (exact, not patterns), and at most
#: one entry naming datastore clusters.
Storage = Annotated[list[str | DatastoreClusters], AfterValidator(_one_clusters_entry)]


def _storage_description(what: str, instead_of: str, more: str = "") -> str:
    return (f"Datastores for {what}, by exact name (not a pattern), instead of the global `{instead_of}`; an entry "
            "`{clusters: [{NAME: {}}]}` adds the datastores of those datastore clusters whose Storage DRS is on; "
            "names and clusters that leave no datastore fail the call before anything is made."
            + (f" {more}" if more else ""))


# ---------------------------------------------------------------- vm_type cloud_properties


class PlacementDatacenter(_Strict):
    """A vm_type's (or AZ's) `datacenters` entry: which clusters of the datacenter its VMs go in."""

    name: str | None = Field(None, description="The datacenter: the one of cpi.json (there is only one).")
    clusters: Annotated[list[dict[str, PlacementClusterProperties]], BeforeValidator(split_clusters)] = Field(
        ..., description="Clusters for these VMs instead of cpi.json's, each a name or "
        "`{NAME: {resource_pool, host_group, drs_rules}}`.")


class StoragePolicy(_Strict):
    """A vm_type's storage policy."""

    name: str | None = Field(None, description="Storage policy (SPBM) given to the VM, its system and its ephemeral "
                             "disk, which go on a datastore compatible with it; a policy the vCenter lacks refuses "
                             "create_vm before anything is made.")


class NsxLoadBalancer(_Strict):
    """An NSX-V edge load balancer pool the VM's security group joins (as a member named
    `BOSH-<group id>-<port>-<monitor port>`, as the official CPI names it)."""

    edge_name: str = Field(..., min_length=1, description="Name of the NSX edge (it must exist).")
    pool_name: str = Field(..., min_length=1, description="Name of the edge's server pool (it must exist).")
    security_group: str = Field(
        ..., min_length=1, description="Security group the pool targets: the VM is added to it (the group is created "
        "when missing) and the group to the pool.")
    port: StrictInt = Field(..., ge=1, le=65535, description="Port the VM's service listens on.")
    monitor_port: StrictInt | None = Field(None, ge=1, le=65535, description="Port the pool's health check uses. "
                                           "Default: `port`.")


class NsxVmProperties(_Strict):
    """What NSX-V does for the VM (needs cpi.json's `nsx`), once it is on: it joins, by its
    managed object id, these security groups, its director's `env.bosh.groups` and its load
    balancers' groups (made in scope globalroot-0 when missing), and each load balancer's
    group joins its pool. Edges and pools are looked up before anything is made: one that
    is not there refuses create_vm. delete_vm leaves NSX-V alone (it drops a deleted VM
    from its groups itself), as the official CPI does; groups made stay."""

    security_groups: list[str] | None = Field(
        None, description="Security groups to add the VM to (created when missing), with those of the director's "
        "`env.bosh.groups` and of `lbs`.")
    lbs: list[NsxLoadBalancer] | None = Field(None, description="Edge load balancer pools to add the VM's "
                                              "security group to (once: a pool that has it on the same ports is "
                                              "left as it is).")


class NsxtServerPool(_Strict):
    """An NSX-T load balancer server pool the VM joins."""

    name: str = Field(..., min_length=1, description="Name of the server pool (it must exist). A static pool gets "
                      "the VM as a member; for a dynamic one, the VM joins the pool's group.")
    port: StrictInt | None = Field(None, ge=1, le=65535, description="Port the pool sends traffic to on the VM. "
                                   "Unset: the port the client connected to.")


class NsxtLoadBalancer(_Strict):
    """NSX-T load balancing of the VM."""

    server_pools: list[NsxtServerPool] | None = Field(None, description="Server pools to add the VM to.")


class NsxtVmProperties(_Strict):
    """What NSX-T does for the VM (needs cpi.json's `nsxt`): it joins the groups and server
    pools named once it is on, through the API cpi.json's `nsxt` chooses, and leaves them when
    deleted; a group or pool that is not there refuses create_vm before anything is made. A
    pool member is the VM's address on its manual network (the default gateway's first);
    a VM on dynamic networks only is added once VMware Tools report its address (at most 5
    minutes). Under the Manager API, groups and VIF types apply to the VM's NICs on NSX
    networks; a VM with none is left out of them, as by the official CPI."""

    ns_groups: list[str] | None = Field(None, description="Groups to add the VM to, by display name: NSGroups "
                                        "(Manager API) or groups of domain `default` (Policy API); they must exist.")
    vif_type: Literal["PARENT", "CHILD"] | None = Field(
        None, description="VIF type of the VM's logical ports (Manager API), over the global `default_vif_type`; "
        "null sets none. The Policy API sets none, as in the official CPI.")
    lb: NsxtLoadBalancer | None = Field(None, description="NSX-T load balancer pools to add the VM to.")


class PciPassthrough(_Strict):
    """A PCI device given to the VM through Dynamic DirectPath I/O (vSphere 7.0 and later)."""

    vendor_id: StrictInt = Field(..., ge=0, le=0xFFFF, description="PCI vendor ID, e.g. `0x10de` (NVIDIA).")
    device_id: StrictInt = Field(..., ge=0, le=0xFFFF, description="PCI device ID, e.g. `0x1eb8` (Tesla T4).")


class Tag(_Strict):
    """A vCenter tag to attach to the VM."""

    category: str = Field(..., min_length=1, description="Name of the tag's category (associable with VMs).")
    tag: str = Field(..., min_length=1, description="Name of the tag; it must exist in the category.")


#: the vm_type keys that ask for passthrough devices (passthrough.py drives them)
PASSTHROUGH_KEYS = ("vgpus", "pci_passthroughs", "device_groups")


class VMCloudProperties(_Strict):
    """vm_type (and vm_extension, AZ) cloud_properties: what create_vm makes. The VM is a
    linked clone of the stemcell (a full clone when `root_disk_size_gb` grows its root disk)
    in a cluster and datastore with room for its memory and disks, near its persistent disks,
    with an ephemeral disk of `disk` MiB; the agent's settings reach it on a CD-ROM image.
    `vgpus`, `pci_passthroughs` and `device_groups` go only in a cluster with a host that
    offers them all; create_vm refuses them, before it makes anything, when none does.
    A vm_type's `nsxt` is driven through NSX-T's Manager or Policy API (cpi.json's `nsxt`);
    its `nsx` through NSX-V's REST API. Either without its manager in cpi.json refuses
    create_vm (VMCreationFailed) before anything is made."""

    cpu: StrictInt = Field(..., ge=1, description="Number of vCPUs.")
    ram: StrictInt = Field(..., ge=1, description="Memory in MiB.")
    disk: StrictInt = Field(..., ge=1, description="Ephemeral disk size in MiB.")
    datastores: Storage | None = Field(None, description=_storage_description(
        "the VM and its ephemeral disk", "datastore_pattern", "One of them must be reachable from the VM's "
        "clusters; a `storage_policy` wins."))
    datacenters: list[PlacementDatacenter] | None = Field(
        None, max_length=1, description="The clusters (and resource pools, host groups, DRS rules) for these VMs, "
        "instead of cpi.json's: a list of one datacenter, cpi.json's.")
    storage_policy: StoragePolicy | None = Field(
        None, description="Storage policy for the VM and its ephemeral disk, over `datastores` and the global "
        "`vm_storage_policy_name`.")
    vmx_options: dict[str, VmxValue] | None = Field(
        None, description="VM advanced configuration (extraConfig), over the global `vmx_options` key by key.")
    cpu_hot_add_enabled: StrictBool = Field(False, description="Allow adding vCPUs while the VM runs.")
    memory_hot_add_enabled: StrictBool = Field(False, description="Allow adding memory while the VM runs.")
    nested_hardware_virtualization: StrictBool = Field(
        False, description="Expose hardware-assisted virtualization to the VM (to run hypervisors in it).")
    cpu_reserve_full_mhz: StrictBool | None = Field(
        None, description="Reserve the VM's vCPUs times the clock of the fastest host of its cluster. Default: the "
        "global `cpu_reserve_full_mhz`.")
    memory_reservation_locked_to_max: StrictBool | None = Field(
        None, description="Reserve all of the VM's memory. Default: the global setting; always so with `vgpus`, "
        "`pci_passthroughs` or `device_groups`.")
    upgrade_hw_version: StrictBool | None = Field(
        None, description="Upgrade the VM to the newest virtual hardware version its host supports. Default: the "
        "global `upgrade_hw_version`; always so with `vgpus`, `pci_passthroughs` or `device_groups`.")
    root_disk_size_gb: StrictInt | None = Field(
        None, ge=0, description="Grow the root disk to this many GiB (then a full clone, which takes that space on "
        "the datastore). Unset or 0: the stemcell's size, as a linked clone.")
    vm_group: str | None = Field(None, description="DRS VM group of the cluster to add the VM to (created when "
                                 "missing; the CPI deletes it when its last VM goes).")
    disable_drs: StrictBool = Field(False, description="Turn DRS off for the VM: it is not moved between hosts.")
    tags: list[Tag] | None = Field(None, description="vCenter tags to attach to the VM (vCenter 6.5 and later); "
                                   "the categories and tags must exist. Unrelated to the manifest's `tags`.")
    vgpus: list[str] | None = Field(
        None, description="NVIDIA GRID vGPU profiles to give the VM, one device each (e.g. `grid_t4-16q`), added "
        "after the hardware upgrade. A usable host of the VM's cluster must offer them all (its "
        "`config.sharedPassthruGpuTypes`); the VM goes only in such a cluster, and create_vm is refused, naming "
        "what the hosts offer, when there is none.")
    pci_passthroughs: list[PciPassthrough] | None = Field(
        None, description="PCI devices to give the VM by Dynamic DirectPath I/O (vSphere 7.0 and later), one device "
        "each. A usable host of the VM's cluster must have each, ready for passthrough; the VM goes only in such a "
        "cluster, and create_vm is refused, naming what the hosts offer, when there is none (or the vCenter is "
        "older than 7.0).")
    device_groups: list[str] | None = Field(
        None, description="Vendor device groups (vSphere 8.0 and later) to give the VM by name, e.g. "
        "`Nvidia:2@nvidia_h100l-94c%NVLink`: their vGPUs, linked. A usable host of the VM's cluster must offer them "
        "(as its AssignableHardwareManager lists them); create_vm is refused, naming what the hosts offer, when none "
        "does or the vCenter is older than 8.0.")
    nsx: NsxVmProperties | None = Field(None, description="NSX-V security groups and edge load balancer pools of "
                                        "the VM (needs cpi.json's `nsx`).")
    nsxt: NsxtVmProperties | None = Field(None, description="NSX-T groups, VIF type and load balancer pools of the "
                                          "VM.")
    plugins: dict[str, Any] | None = Field(
        None, description="Settings for the official CPI's Ruby plug-ins, by plug-in name. This CPI loads none "
        "(cpi.json's `plugins` must be empty), so they have no effect.")

    @property
    def asks_passthrough(self) -> bool:
        """Whether the vm_type asks for any of PASSTHROUGH_KEYS (then the hardware is upgraded
        to the newest version and all memory reserved, as vSphere requires of passthrough)."""
        return any(getattr(self, key) for key in PASSTHROUGH_KEYS)


# ---------------------------------------------------------------- disk_type cloud_properties


class DiskCloudProperties(_Strict):
    """disk_type cloud_properties: what create_disk makes, a VMDK in `disk_path` of a
    datastore reachable from the VM it is for."""

    type: DiskType | None = Field(
        None, description="How the disk is provisioned: `thin`, `preallocated`, `thick` or `eagerZeroedThick`. "
        "Default: the global `default_disk_type`.")
    datastores: Storage | None = Field(None, description=_storage_description(
        "the disk", "persistent_datastore_pattern"))
    name: str | None = Field(None, min_length=1, description="The disk's name, and so its cid, instead of "
                             "`disk-<uuid>` (set by the director for dynamic disks).")


# ---------------------------------------------------------------- network cloud_properties


class NetworkCloudProperties(_Strict):
    """A manual network's cloud_properties (cloud-config subnets). The official CPI has no
    dynamic or vip networks."""

    name: str = Field(..., min_length=1, description="The vSphere network (port group, distributed port group or "
                      "NSX segment) to put the VM's NIC on; a path (`folder/name`) if names repeat.")


class ManagedNetworkCloudProperties(_Strict):
    """A managed network's cloud_properties (create_network, for a director with
    `networks.enable_cpi_management`): made through NSX-T's Manager API, as by the official
    CPI: a tier-1 router on the tier-0 router's edge cluster, linked to it and advertising
    its connected routes, and a logical switch (overlay, MTEP replication) in the transport
    zone, on a router port at the subnet's gateway. Without the definition's `range`, the
    subnet (`netmask_bits`, 24 by default) is allocated from the IP block `ip_block_id` and
    released by delete_network. The network's cid is the switch's id; the VMs' network
    `name` is the switch's display name."""

    t0_router_id: str = Field(..., min_length=1, description="Id of the tier-0 logical router to link the network's "
                              "tier-1 router to; it must have an edge cluster.")
    transport_zone_id: str = Field(..., min_length=1, description="Id of the transport zone of the logical switch.")
    ip_block_id: str | None = Field(None, description="Id of the IP block to allocate the subnet from "
                                    "when the network definition gives no `range` (then it gives no `gateway`: the "
                                    "subnet's first address is).")
    switch_name: str | None = Field(None, description="Display name of the logical switch (unique: an existing one "
                                    "refuses create_network). Default: NSX names it after its id.")
    t1_name: str | None = Field(None, description="Display name of the tier-1 router.")


# The official CPI reads nothing of a stemcell's cloud_properties (its create_stemcell takes
# the OVF in the image alone), so there is no stemcell model: whatever stemcell.MF says is
# ignored, as there.
