"""The vsphere cloud's config section, `cloud.properties.vsphere` of cpi.json (the job's
global properties: the vCenter, its datacenter and clusters, NSX, timeouts), under the names
and with the meanings of the official vSphere CPI (cloudfoundry/bosh-vsphere-cpi-release: its
`vsphere_cpi` job spec, its cpi.json template and the Ruby code that reads them). The
cloud_properties models (vm_type, disk_type, network) are cpi/clouds/vsphere/props.py, which
builds its placement on this module's cluster settings.

Every key a user can write is here, with a description and its constraints; a bad value
fails with an error naming the key and what is allowed (cpi.validation). A key no model knows
is ignored with a warning on the wire and is an error for `cpi validate`, as on the other
clouds. What a simulated vCenter cannot show (NSX-V, NSX-T) is accepted with its meaning; the
cloud refuses a request that needs it only when the vCenter lacks it, saying so.

The cloud class that acts on them is cpi/clouds/vsphere/cloud.py (`VsphereCloud`), registered
as the built-in plugin `vsphere` in cpi/clouds/__init__.py. The release's job takes the official
job's `vcenter.*` properties under their names and renders them as this section
(jobs/cpi/templates/cpi.json.erb; its `vsphere_cpi` alias is the official job's name); the
reference docs/vsphere.md is generated from these models. Every key is acted on with its
meaning; where the cloud does more or less than the official CPI, the model's description
says so, and docs/migrating.md key by key.

No pyvmomi here: `info` of the cloud will import this module.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    Field,
    SecretStr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from cpi.clouds.base import CloudProperties
from cpi.clouds.vsphere.patterns import compile_pattern
from cpi.models import StrictModel as _Strict

log = logging.getLogger(__name__)

#: A vmx option's value keeps its type: vSphere tells `true` from `"true"`, `1234` from `"1234"`.
VmxValue = StrictStr | StrictInt | StrictFloat | StrictBool


# ---------------------------------------------------------------- placement, shared with vm_types


class HostGroup(_Strict):
    """A cluster's host group, as a map (the official CPI also takes a bare name: then the
    rule is MUST)."""

    name: str = Field(..., min_length=1, description="Name of the host group (a DRS host group of the cluster).")
    drs_rule: str = Field(
        "SHOULD", description="`MUST` or `SHOULD` (any case): whether the VM-host affinity rule binds. Anything "
        "but MUST means SHOULD, as in the official CPI (a misspelling is logged).")

    @field_validator("drs_rule")
    @classmethod
    def _rule(cls, value: str) -> str:
        rule = value.strip().upper()
        if rule not in ("MUST", "SHOULD"):
            log.warning("host_group.drs_rule '%s' is neither MUST nor SHOULD: SHOULD, as the official CPI takes it",
                        value)
            return "SHOULD"
        return rule


class ClusterProperties(_Strict):
    """Where in a cluster VMs go (cpi.json's `datacenters[0].clusters`)."""

    resource_pool: str | None = Field(
        None, description="Resource pool of the cluster to put VMs in: a path below the cluster's root pool "
        "(`parent/child`), or a pool's name found anywhere below it. Unset: the cluster's root pool. A cluster with a "
        "resource pool in cpi.json turns `use_sub_folder` on.")
    host_group: str | HostGroup | None = Field(
        None, description="Keep the cluster's VMs on the hosts of this DRS host group: the CPI puts each VM in a VM "
        "group named after the host group and ties it to the hosts by a VM-host affinity rule, which it deletes "
        "with the last VM. A bare name means a MUST rule; a map `{name, drs_rule}` chooses MUST or SHOULD.")

    @property
    def host_group_name(self) -> str | None:
        return self.host_group if isinstance(self.host_group, str) or self.host_group is None else self.host_group.name

    @property
    def host_group_rule(self) -> Literal["MUST", "SHOULD"] | None:
        if self.host_group is None:
            return None
        return "MUST" if isinstance(self.host_group, str) or self.host_group.drs_rule == "MUST" else "SHOULD"


def split_clusters(value: Any) -> Any:
    """A cluster given by its name alone is that cluster with no settings, and a map of
    several clusters is several entries, as the official job template splits it."""
    if not isinstance(value, list):
        return value
    out: list[Any] = []
    for item in value:
        if isinstance(item, str):
            out.append({item: {}})
        elif isinstance(item, dict) and len(item) > 1:
            out.extend({name: settings} for name, settings in item.items())
        else:
            out.append(item)
    return out



# ---------------------------------------------------------------- cpi.json: cloud.properties.vsphere


class Datacenter(_Strict):
    """The one datacenter the CPI works in (cpi.json's `datacenters[0]`)."""

    name: str = Field(..., min_length=1, description="Name of the datacenter (at the root of the inventory).")
    vm_folder: str = Field("BOSH_VMs", description="Folder of the datacenter's VMs (a path) the VMs go in; "
                           "created when missing.")
    template_folder: str = Field("BOSH_Templates", description="Folder (a path) stemcells are uploaded to; "
                                 "created when missing.")
    disk_path: str = Field("BOSH_Disks", description="Directory on each datastore that holds persistent disks; "
                           "created when missing.")
    datastore_pattern: str | None = Field(
        None, description="Regular expression (Ruby's syntax, as in the official CPI) of the datastores for ephemeral "
        "disks and stemcells; it may match anywhere in a name (`^...$` for a whole one). This or "
        "`datastore_cluster_pattern` is required.")
    datastore_cluster_pattern: str | None = Field(
        None, description="Regular expression of the datastore clusters (their paths below the datastore folder) "
        "whose datastores take ephemeral disks and stemcells, with `datastore_pattern`'s datastores; clusters whose "
        "Storage DRS is off are left out (logged). Matching no cluster with Storage DRS on is an error when "
        "`datastore_pattern` is not set.")
    persistent_datastore_pattern: str | None = Field(
        None, description="Regular expression of the datastores for persistent disks. This or "
        "`persistent_datastore_cluster_pattern` is required.")
    persistent_datastore_cluster_pattern: str | None = Field(
        None, description="Regular expression of the datastore clusters whose datastores take persistent disks, with "
        "`persistent_datastore_pattern`'s datastores; clusters whose Storage DRS is off are left out (logged). "
        "Matching no cluster with Storage DRS on is an error when `persistent_datastore_pattern` is not set.")
    allow_mixed_datastores: StrictBool = Field(
        True, description="No effect, as in the official CPI, which no longer reads it: give the same pattern to "
        "`datastore_pattern` and `persistent_datastore_pattern` to mix ephemeral and persistent disks.")
    use_sub_folder: StrictBool = Field(
        False, description="Put VMs and stemcells in a subfolder of `vm_folder` and `template_folder` named by the "
        "director's UUID (always, when a cluster here names a resource pool), so directors sharing the folders keep "
        "apart.")
    clusters: Annotated[list[dict[str, ClusterProperties]], BeforeValidator(split_clusters)] = Field(
        ..., description="The clusters VMs may go in, each a name or `{NAME: {resource_pool, host_group}}`. May be "
        "empty when every AZ (or vm_type) names its clusters in its own `datacenters`.")

    @field_validator("datastore_pattern", "datastore_cluster_pattern", "persistent_datastore_pattern",
                     "persistent_datastore_cluster_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value:
            compile_pattern(value)
        return value

    @model_validator(mode="after")
    def _patterns(self) -> Datacenter:
        if not (self.datastore_pattern or self.datastore_cluster_pattern):
            raise ValueError("set datastore_pattern or datastore_cluster_pattern (where ephemeral disks and "
                             "stemcells go)")
        if not (self.persistent_datastore_pattern or self.persistent_datastore_cluster_pattern):
            raise ValueError("set persistent_datastore_pattern or persistent_datastore_cluster_pattern (where "
                             "persistent disks go)")
        return self

    @property
    def cluster_settings(self) -> dict[str, ClusterProperties]:
        """Each cluster by name, with its settings."""
        return {name: settings for entry in self.clusters for name, settings in entry.items()}


class ConnectionOptions(_Strict):
    """`connection_options` of the vCenter, as the official job writes it."""

    ca_cert: str | None = Field(
        None, description="PEM text of the CA certificate(s) that sign the vCenter's TLS certificate; the vCenter's "
        "certificate is then verified. Unset: it is not verified, as in the official CPI (see `ssl_verify`).")
    ca_cert_file: str | None = Field(
        None, description="Path of a PEM file of those CA certificates: the same as `ca_cert` (the official CPI "
        "writes `ca_cert` to such a file and reads this name).")

    @model_validator(mode="after")
    def _one(self) -> ConnectionOptions:
        if self.ca_cert and self.ca_cert_file:
            raise ValueError("give ca_cert or ca_cert_file, not both")
        return self


class Nsx(_Strict):
    """NSX-V (NSX for vSphere), for vm_types' `nsx`. NSX-V is past its end of support; the
    keys keep their meaning. With it, as with the official CPI, every new VM joins the
    security groups of its director's `env.bosh.groups` (director, deployment, instance
    group...), whether or not its vm_type sets `nsx`."""

    address: str = Field(..., min_length=1, description="Address of the NSX manager (host name or IP, a port may "
                         "follow), reached over HTTPS.")
    user: str = Field(..., min_length=1, description="User to log in to the NSX manager as (HTTP Basic "
                      "authentication).")
    password: SecretStr = Field(..., description="That user's password. Never logged.")
    ca_cert: str | None = Field(
        None, description="PEM text of the CA certificate(s) of the NSX manager's TLS certificate, which is then "
        "verified (unless `ssl_verify` is false). Unset: not verified, as in the official CPI, unless `ssl_verify` "
        "is true (then against the system's CAs).")
    ca_cert_file: str | None = Field(None, description="Path of a PEM file of those CA certificates: the same as "
                                     "`ca_cert`.")


class Nsxt(_Strict):
    """NSX-T: the CPI adds each VM to the groups and load balancer pools its vm_type's `nsxt`
    names, through the Manager API (the default) or the Policy API, gives its NSX ports the
    VIF type and the director's metadata (set_vm_metadata), and makes managed networks
    (create_network) through the Manager API."""

    host: str = Field(..., min_length=1, description="Address of the NSX-T manager (host name or IP, a port may "
                      "follow).")
    username: str | None = Field(None, description="User to log in as (with `password`); without it, "
                                 "`auth_certificate` and `auth_private_key` authenticate.")
    password: SecretStr | None = Field(None, description="That user's password. Never logged.")
    remote_auth: StrictBool = Field(False, description="The NSX-T manager authenticates users through VMware "
                                    "Identity Manager (vIDM): send the credentials as remote authentication.")
    auth_certificate: str | None = Field(
        None, description="PEM client certificate for certificate-based authentication, which wins over "
        "username/password when both are given.")
    auth_private_key: SecretStr | None = Field(None, description="PEM private key of `auth_certificate`. Never "
                                               "logged.")
    ca_cert: str | None = Field(
        None, description="PEM text of the CA certificate(s) of the NSX-T manager's TLS certificate, which is then "
        "verified (unless `ssl_verify` is false). Unset: not verified, as in the official CPI, unless `ssl_verify` "
        "is true (then against the system's CAs).")
    ca_cert_file: str | None = Field(None, description="Path of a PEM file of those CA certificates: the same as "
                                     "`ca_cert`.")
    default_vif_type: Literal["PARENT", "CHILD"] | None = Field(
        None, description="VIF type set on the logical ports of every new VM on an NSX network (through the Manager "
        "API, also in migration mode; the Policy API sets none, as in the official CPI) unless its vm_type's "
        "`nsxt.vif_type` says otherwise: `PARENT` for hosts of containers.")
    use_policy_api: StrictBool = Field(
        False, description="Use the NSX-T Policy API (NSX-T 3.0 and later) instead of the Manager API: VMs join "
        "Policy groups and server pools, and their segment ports get the director's metadata as `bosh/<key>` tags "
        "(the instance id hashed with SHA-1). Without it, the Manager API: the VMs' logical ports join NSGroups, "
        "the VMs server pools, and the ports get the VIF type and the `bosh/id` tag.")
    policy_api_migration_mode: StrictBool = Field(
        False, description="While moving from the Manager API to the Policy API: add VMs, and tag their ports, "
        "through both; the Manager API's groups and pools must exist, the Policy API's are taken where they are "
        "(those missing are logged). For migration scripts only.")
    allow_overwrite: StrictBool = Field(
        True, description="Send `X-Allow-Overwrite: true` with NSX-T's Manager API requests, so they may change "
        "objects the Policy API made (true by default, as in the official CPI; never with Policy API requests).")
    tag_nsx_vm_objects: StrictBool = Field(
        False, description="Also tag the VM's record in NSX's inventory (its fabric virtual machine, through the "
        "Manager API) with the director's metadata as `bosh/<key>`, on set_vm_metadata.")

    @model_validator(mode="after")
    def _auth(self) -> Nsxt:
        if self.username is None:
            missing = [k for k in ("auth_certificate", "auth_private_key") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"nsxt needs username and password, or auth_certificate and auth_private_key "
                                 f"(missing {' and '.join(missing)})")
        elif self.password is None:
            raise ValueError("nsxt.username needs nsxt.password")
        if self.ca_cert and self.ca_cert_file:
            raise ValueError("give nsxt.ca_cert or nsxt.ca_cert_file, not both")
        return self


class VsphereProperties(CloudProperties, _Strict):
    """`cloud.properties.vsphere` in cpi.json: the job spec's `vcenter.*` properties under
    their names without `vcenter.` (`host`, `user`, `password`, `datacenters`, ...). The
    official CPI's own cpi.json shape is taken too: `{"vcenters": [{...}], "plugins": {}}`,
    its one vCenter's keys then being these; keys beside `vcenters` (and a request's context,
    a director's cpi-config) override the vCenter's, as the official CPI merges its context
    into `vcenters[0]`. That shape is taken where the official vsphere_cpi job renders it
    too, as keys of `cloud.properties` itself beside `agent` (`official_keys`)."""

    #: the keys of `cloud.properties` that are this section in the official job's cpi.json
    official_keys: ClassVar[tuple[str, ...]] = ("vcenters", "plugins")

    # -- where and who
    host: str | None = Field(None, description="Address of the vCenter (host name or IP, a port may follow). This or "
                             "`address` is required.")
    address: str | None = Field(None, description="The vCenter's address when `host` is not set (the official job's "
                                "other name for it).")
    user: str = Field(..., min_length=1, description="User to log in to the vCenter as.")
    password: SecretStr = Field(..., description="That user's password. Never logged.")
    connection_options: ConnectionOptions | None = Field(
        None, description="The vCenter's TLS: `ca_cert` (PEM text) or `ca_cert_file`. Not a context (cpi-config) "
        "key.")
    ssl_verify: StrictBool | None = Field(
        None, description="For the vCenter and every NSX manager alike. Unset: as the official CPI, verify each "
        "one's certificate against its `ca_cert` when one is given, and not at all otherwise (each call then logs a "
        "warning that the vCenter's is not checked). true: always verify, each against its own `ca_cert`, or the "
        "system's CAs when it has none. false: never verify (test vCenters only; also warned of).")
    datacenters: list[Datacenter] = Field(
        ..., min_length=1, max_length=1, description="The one datacenter to work in (a list of one, as the official "
        "CPI takes it): its folders, datastore patterns and clusters.")

    # -- how VMs and disks are made
    default_disk_type: Literal["thin", "preallocated"] = Field(
        "preallocated", description="How ephemeral disks, persistent disks (unless a disk_type says `type`) and "
        "stemcells are provisioned: `preallocated` (space reserved at creation, zeroed on first use) or `thin` "
        "(allocated as used).")
    default_scsi_controller_type: Literal["paravirtual", "lsi_logic", "lsi_logic_sas"] = Field(
        "paravirtual", description="SCSI controller of new VMs: `paravirtual` (up to 63 disks), `lsi_logic` or "
        "`lsi_logic_sas`; a stemcell's controller of another type is replaced in the clone, as in the official CPI, "
        "its disks staying on it.")
    enable_auto_anti_affinity_drs_rules: StrictBool = Field(
        False, description="Make a DRS anti-affinity rule for the VMs of each instance group of each deployment, "
        "named after the director, deployment and instance group, so they run on different hosts (DRS must be "
        "fully automated; with more VMs than hosts, some cannot power on). A vm_type's own `drs_rules` win.")
    cpu_reserve_full_mhz: StrictBool = Field(
        False, description="Reserve for each VM its vCPUs times the clock (MHz) of the fastest connected host of its "
        "cluster (or host group). A vm_type's `cpu_reserve_full_mhz` wins.")
    memory_reservation_locked_to_max: StrictBool = Field(
        False, description="Reserve all of each VM's memory (the reservation follows the memory size); it may leave "
        "hosts' memory unused. A vm_type's `memory_reservation_locked_to_max` wins.")
    upgrade_hw_version: StrictBool = Field(
        False, description="Upgrade new VMs to the newest virtual hardware version their host supports, instead of "
        "`default_hw_version`. A vm_type's `upgrade_hw_version` wins.")
    default_hw_version: StrictInt = Field(
        17, ge=4, description="Virtual hardware version new VMs are upgraded to (17: vSphere 7.0 and later), unless "
        "`upgrade_hw_version`.")
    vm_storage_policy_name: str | None = Field(
        None, description="Storage policy (SPBM) given to VMs, their system and their ephemeral disks, whose "
        "datastores are then those compatible with it, unless a vm_type names `storage_policy` or `datastores`. A "
        "policy the vCenter lacks refuses create_vm before anything is made.")
    enable_human_readable_name: StrictBool = Field(
        False, description="Name VMs `<instance group>_<deployment>_<12 hex digits>` (at most 80 characters) instead "
        "of `vm-<uuid>`, when the director sends those names and they are ASCII.")
    vmx_options: dict[str, VmxValue] = Field(
        default_factory=dict, description="VM advanced configuration (extraConfig) for every VM, e.g. "
        "`{\"disk.enableUUID\": \"1\"}` (with it, persistent disks are found by their UUID); a vm_type's "
        "`vmx_options` win key by key. Values keep their type: `true` and `\"true\"` differ to vSphere.")
    ensure_no_ip_conflicts: StrictBool = Field(
        True, description="Before making a VM, ask the vCenter whether a VM on the same port group already has one of "
        "its IP addresses, and refuse the VM if so (a VM without VMware Tools is not seen).")
    http_logging: StrictBool = Field(
        False, description="Log every request to the vCenter in the call's log: its method, and how long it took "
        "or how it failed (never a body, a secret or a session cookie).")

    # -- NSX
    nsx: Nsx | None = Field(None, description="The NSX-V manager, for vm_types' `nsx`. Not a context key.")
    nsxt: Nsxt | None = Field(None, description="The NSX-T manager, for vm_types' `nsxt`. Not a context key.")

    # -- the official CPI's Ruby plug-ins
    plugins: dict[str, Any] = Field(
        default_factory=dict, description="The official CPI's Ruby plug-ins to load, by name, with their settings. "
        "This CPI runs no Ruby: empty (the default) is accepted, and a config naming a plug-in is refused, saying "
        "so, rather than run without the hooks it expects.")

    # -- this CPI's own: what --timeout lowers on every cloud
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to open a connection to the vCenter.")
    read_timeout: float = Field(120.0, gt=0, description="Seconds one request to the vCenter or an NSX manager may "
                                "take in all: connecting, sending and its whole answer, however slowly it trickles in. "
                                "An upload of a stemcell's disk is bounded by stalls instead (each MiB sent within it),"
                                " then its answer by this.")
    retry_budget_seconds: float = Field(
        300.0, gt=0, description="How long one request keeps being retried while the vCenter is busy or drops "
        "connections; one whose connection cannot be opened (refused, unknown host) gives up within 10 s, or this if "
        "less. The waits are logged.")
    task_timeout: float = Field(
        3600.0, gt=0, description="Seconds a vCenter task (a clone, an import, a disk copy or move) may run before "
        "the call gives up on it, cancels it and fails with the task's progress; every task's wait is logged.")

    @classmethod
    def official_shape(cls, section: Any) -> Any:
        """`section` in this model's flat shape: the official cpi.json's `{"vcenters": [V],
        ...}` becomes V's keys with the others over them (the context merged into
        `vcenters[0]`, as the official CPI merges it). cpi.config calls this before it merges
        a context and looks for unknown keys, so their locations are those of the flat shape."""
        if not isinstance(section, dict) or "vcenters" not in section:
            return section
        vcenters = section["vcenters"]
        if not isinstance(vcenters, list) or len(vcenters) != 1 or not isinstance(vcenters[0], dict):
            raise ValueError("vcenters must be a list of one vCenter (an object): the CPI works with a single vCenter")
        return {**vcenters[0], **{k: v for k, v in section.items() if k != "vcenters"}}

    @model_validator(mode="before")
    @classmethod
    def _official(cls, data: Any) -> Any:
        return cls.official_shape(data)

    @model_validator(mode="after")
    def _consistent(self) -> VsphereProperties:
        if not (self.host or self.address):
            raise ValueError("host (or address) is required: the vCenter's address")
        if self.plugins:
            raise ValueError(f"plugins names the official CPI's Ruby plug-ins ({', '.join(sorted(self.plugins))}), "
                             "which this CPI cannot load: remove them, or keep the official CPI for this director")
        return self

    @property
    def vcenter_host(self) -> str:
        """The vCenter's address: `host`, else `address` (as the official job template)."""
        return self.host or self.address or ""

    @property
    def datacenter(self) -> Datacenter:
        return self.datacenters[0]

    def lock_directory(self) -> Path:
        """Where this CPI's processes take their locks on a VM, a stemcell's copy on a
        datastore or a DRS rule: private to the CPI's user (cpi.private), never a fixed
        name in a shared temp dir."""
        from cpi import private

        return private.private_dir(private.cache_dir("vsphere-locks", "HOME"), "the vsphere cloud's lock directory")


#: What a request's context (a director's cpi-config) may override, as the official CPI
#: merges it: everything but TLS (a cpi-config writer could turn certificate checks off or
#: trust their own CA), the NSX managers (whose sections carry their CAs), and the Ruby
#: plug-ins. The cloud class declares these as its `context_overrides`.
CONTEXT_OVERRIDES = frozenset(VsphereProperties.model_fields) - {
    "connection_options", "ssl_verify", "nsx", "nsxt", "plugins", "http_logging"}
#: Context keys that send the call's requests elsewhere: only with the context's own password.
CONTEXT_ENDPOINTS = frozenset({"host", "address"})
CONTEXT_SECRETS = frozenset({"password"})
