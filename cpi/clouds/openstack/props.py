"""The openstack cloud's config section (`cloud.properties.openstack`) and its
cloud_properties models.

Every key a user can write is here, with a description and its constraints; a bad value
fails the call with an error naming the key and what is allowed (cpi.validation.parse).
docs/openstack.md is generated from these models (`python -m cpi.cli props openstack`).

No openstacksdk or keystoneauth1 here: `info` imports this module.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from cpi.models import StrictModel as _Strict

_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")

#: The service types `endpoint_overrides` may name (catalog types and their aliases).
SERVICE_TYPES = ("identity", "compute", "network", "image", "block-storage", "load-balancer")
_SERVICE_ALIASES = {"volumev3": "block-storage", "volume": "block-storage", "volumev2": "block-storage",
                    "block-store": "block-storage", "octavia": "load-balancer"}
#: endpoint_type as the Ruby CPI spells it → keystoneauth interface.
_INTERFACES = {"publicurl": "public", "public": "public", "internalurl": "internal", "internal": "internal",
               "adminurl": "admin", "admin": "admin"}


def looks_like_uuid(value: str) -> bool:
    return bool(_UUID.match(value))


# ---------------------------------------------------------------- cpi.json: cloud.properties.openstack


class ConnectionOptions(_Strict):
    """`connection_options` as the official OpenStack CPI takes it (its HTTP library's
    options; bosh-deployment's openstack/custom-ca.yml sets `ca_cert`): the options with a
    meaning here map onto this CPI's own settings, which say the same thing."""

    ca_cert: str | None = Field(None, description="PEM text of the CA certificate(s): the same as `ca_cert`.")
    ssl_ca_file: str | None = Field(None, description="Path of a PEM file of CA certificates: the same as `ca_cert`.")
    ssl_verify_peer: StrictBool | None = Field(None, description="The same as `ssl_verify`.")
    connect_timeout: float | None = Field(None, gt=0, description="The same as `connect_timeout`.")
    read_timeout: float | None = Field(None, gt=0, description="The same as `read_timeout`.")


class OpenStackProperties(BaseModel):
    """`cloud.properties.openstack` in cpi.json. Request `context` keys with these names
    override the file for one call (a director cpi-config)."""

    model_config = ConfigDict(extra="forbid")

    # -- where and who
    auth_url: str = Field(
        ...,
        description="Keystone v3 URL, e.g. `https://keystone.example.com:5000/v3` (`/v3` is added when the URL "
        "has no version).",
    )
    username: str | None = Field(None, description="User name (password auth, with `api_key`).")
    api_key: SecretStr | None = Field(None, description="The user's password. Never logged.")
    user_domain_name: str | None = Field(None, description="Domain of `username`. Default: `domain`.")
    project_domain_name: str | None = Field(None, description="Domain of `project`. Default: `domain`.")
    project: str | None = Field(None, description="Project (tenant) name to work in (password auth).")
    project_id: str | None = Field(None, description="Project ID, instead of `project` and its domain.")
    domain: str | None = Field(
        None, description="Domain of both the user and the project when they share one (e.g. `Default`)."
    )
    application_credential_id: str | None = Field(
        None, description="Application credential ID (instead of `username`/`api_key`; it carries its project)."
    )
    application_credential_secret: SecretStr | None = Field(
        None, description="Application credential secret. Never logged."
    )
    region: str | None = Field(None, description="Region of the service catalog to use. Default: the only one.")
    endpoint_type: str = Field(
        "publicURL",
        description="Service catalog interface: `publicURL`, `internalURL` or `adminURL` (or `public`, "
        "`internal`, `admin`).",
    )
    endpoint_overrides: dict[str, str] = Field(
        default_factory=dict,
        description="Service URL to use instead of the catalog's, by service type (`compute`, `network`, `image`, "
        "`block-storage` (or `volumev3`), `load-balancer`), e.g. to go through a proxy.",
    )
    ca_cert: str | None = Field(
        None,
        description="CA certificate(s) to verify the APIs' TLS certificates: PEM text, or the path of a PEM file.",
    )
    ssl_verify: StrictBool = Field(True, description="Verify TLS certificates (false: do not; for test clouds only).")
    connection_options: ConnectionOptions | None = Field(
        None, description="The official OpenStack CPI's name for TLS and timeout settings: `ca_cert` (PEM), "
        "`ssl_ca_file`, `ssl_verify_peer`, `connect_timeout`, `read_timeout` set the settings of the same meaning "
        "here; a setting given both ways must agree.")
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to open a connection to an API.")
    read_timeout: float = Field(120.0, gt=0, description="Seconds to wait for an API's response, all of it however "
                                "slowly it trickles in, from the request being sent.")

    token_cache: StrictBool = Field(
        True,
        description="Keep the Keystone token between calls (each CPI call is a process; a kept token saves "
        "the token request). Kept like the password: a 0600 file in a 0700 directory of the CPI's user, named "
        "by an HMAC of the identity and its secret. false: authenticate on every call.",
    )
    token_cache_dir: str | None = Field(
        None,
        description="Where kept tokens live: a directory of the CPI's user, created 0700 and refused if anyone "
        "else owns it or can write to it. Default: `~/.cache/bosh-cpi/openstack-tokens` in the CPI user's home.",
    )

    # -- defaults for VMs and disks
    default_key_name: str | None = Field(None, description="Nova key pair for VMs whose vm_type names none.")
    default_security_groups: list[str] = Field(
        default_factory=list,
        description="Security groups (names or IDs) for VMs when neither the vm_type nor the network names any. "
        "Empty: the project's `default` group.",
    )
    default_volume_type: str | None = Field(
        None, description="Cinder volume type for disks whose disk_type names none. Unset: Cinder's default."
    )
    boot_from_volume: StrictBool = Field(
        False,
        description="Boot VMs from a Cinder volume made from the stemcell (vm_type `boot_from_volume` overrides).",
    )
    config_drive: Literal["cdrom", "disk"] | None = Field(
        None,
        description="Also hand the agent its settings on a config drive, attached as `cdrom` or `disk` (a disk "
        "takes a device letter). Unset: the metadata service only.",
    )
    use_dhcp: StrictBool = Field(
        True, description="Tell the agent to configure manual networks by DHCP (false: statically, from the settings)."
    )
    human_readable_vm_names: StrictBool = Field(
        False, description="set_vm_metadata renames the server to the instance's `name` (or `job/index`)."
    )
    # -- the official CPI's keys for what OpenStack no longer has: accepted, refused only
    # -- where a request would need what is gone
    tenant: str | None = Field(
        None, description="Keystone v2's project. Keystone v2 is gone from OpenStack (removed in Queens): with no "
        "`project`, the config is refused, saying to set `project` and `domain` (Keystone v3); beside them, unused.")
    use_nova_networking: StrictBool = Field(
        False, description="Nova networking is gone from OpenStack (removed in Rocky): true refuses create_vm, "
        "saying so; this CPI always uses Neutron.")
    enable_auto_anti_affinity: StrictBool | None = Field(
        None, description="No effect, as in the official CPI, which no longer supports it either.")
    ignore_server_availability_zone: StrictBool = Field(
        False,
        description="create_disk does not put the disk in its VM's availability zone (for clouds whose Nova and "
        "Cinder zones differ).",
    )
    stemcell_public_visibility: StrictBool = Field(
        False, description="Upload heavy stemcells as `public` images (default `private`)."
    )

    # -- waits and retries
    state_timeout: float = Field(
        300.0, gt=0, description="Seconds to wait for a server, volume, snapshot or image to reach a state."
    )
    wait_resource_poll_interval: float = Field(
        5.0,
        gt=0,
        description="Longest pause between two looks at a resource while waiting. The first look comes after "
        "0.25 s and the pauses grow by half each time up to this, so a call returns soon after OpenStack.",
    )
    retry_budget_seconds: float = Field(
        300.0,
        gt=0,
        description="How long one request keeps being retried while OpenStack throttles (429, 413 with "
        "Retry-After) or is unavailable (503); the wait honours Retry-After and is logged.",
    )
    max_retries: StrictInt = Field(
        30, ge=0, le=1000,
        description="Most retries of one request (with `retry_budget_seconds`, whichever ends first).",
    )

    @field_validator("auth_url")
    @classmethod
    def _auth_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", url):
            raise ValueError("must be an http:// or https:// URL")
        if re.search(r"/v2(\.0)?$", url):
            raise ValueError("Keystone v2 is not supported: use the v3 URL (ending in /v3)")
        if not re.search(r"/v3$", url):
            url += "/v3"
        return url

    @field_validator("endpoint_type")
    @classmethod
    def _endpoint_type(cls, value: str) -> str:
        if value.lower() not in _INTERFACES:
            raise ValueError("must be publicURL, internalURL or adminURL (or public, internal, admin)")
        return value

    @field_validator("endpoint_overrides")
    @classmethod
    def _overrides(cls, value: dict[str, str]) -> dict[str, str]:
        out = {}
        for key, url in value.items():
            service = _SERVICE_ALIASES.get(key, key)
            if service not in SERVICE_TYPES:
                raise ValueError(f"unknown service type '{key}' (one of {', '.join(SERVICE_TYPES)})")
            if not re.match(r"^https?://", url):
                raise ValueError(f"{key}: '{url}' is not an http(s) URL")
            out[service] = url.rstrip("/")
        return out

    @model_validator(mode="after")
    def _connection_options(self) -> OpenStackProperties:
        """connection_options onto this CPI's own settings; set both ways, they must agree."""
        options = self.connection_options
        if options is None:
            return self
        if options.ca_cert is not None and options.ssl_ca_file is not None:
            raise ValueError("connection_options: give ca_cert or ssl_ca_file, not both")
        pairs = [("ca_cert", options.ca_cert if options.ca_cert is not None else options.ssl_ca_file),
                 ("ssl_verify", options.ssl_verify_peer), ("connect_timeout", options.connect_timeout),
                 ("read_timeout", options.read_timeout)]
        for name, value in pairs:
            if value is None:
                continue
            if name in self.model_fields_set and getattr(self, name) != value:
                raise ValueError(f"{name} and connection_options say different things: keep one")
            setattr(self, name, value)
        return self

    @model_validator(mode="after")
    def _auth(self) -> OpenStackProperties:
        password = self.username is not None or self.api_key is not None
        appcred = self.application_credential_id is not None or self.application_credential_secret is not None
        if password and appcred:
            raise ValueError(
                "give either username and api_key, or application_credential_id and application_credential_secret, "
                "not both"
            )
        if appcred:
            missing = [k for k in ("application_credential_id", "application_credential_secret")
                       if getattr(self, k) is None]
            if missing:
                raise ValueError(f"application credential auth needs {' and '.join(missing)}")
            return self
        missing = [k for k in ("username", "api_key") if getattr(self, k) is None]
        if missing:
            raise ValueError(
                f"password auth needs {' and '.join(missing)} (or use application_credential_id and "
                "application_credential_secret)"
            )
        if self.tenant is not None and not (self.project or self.project_id):
            raise ValueError("tenant is Keystone v2's project, and Keystone v2 is gone from OpenStack (removed in "
                             "Queens): set project and domain, for Keystone v3, instead")
        if not (self.user_domain_name or self.domain):
            raise ValueError("username needs its domain: set user_domain_name or domain (often `Default`)")
        if not (self.project or self.project_id):
            raise ValueError("password auth needs the project to work in: set project or project_id")
        if self.project and not self.project_id and not (self.project_domain_name or self.domain):
            raise ValueError("project needs its domain: set project_domain_name or domain (often `Default`)")
        return self

    @property
    def interface(self) -> str:
        return _INTERFACES[self.endpoint_type.lower()]

    def describe_identity(self) -> str:
        """Who we authenticate as, for error messages (never a secret)."""
        if self.application_credential_id:
            return f"application credential {self.application_credential_id}"
        user_domain = self.user_domain_name or self.domain
        if self.project_id:
            project = f"project id {self.project_id}"
        else:
            project = f"project '{self.project}' (domain '{self.project_domain_name or self.domain}')"
        return f"user '{self.username}' (domain '{user_domain}') in {project}"


# ---------------------------------------------------------------- vm_type cloud_properties


class RootDisk(_Strict):
    """The size of the VM's root disk: the boot volume's size when booting from a volume."""

    size: StrictInt = Field(..., ge=1, description="Root disk size in GiB.")


class LoadBalancerPool(_Strict):
    """An Octavia (LBaaS v2) pool the VM becomes a member of."""

    name: str = Field(..., min_length=1, description="Pool name.")
    port: StrictInt = Field(..., ge=1, le=65535, description="Port the member receives traffic on.")
    monitoring_port: StrictInt | None = Field(
        None, ge=1, le=65535, description="Port the pool's health monitor checks (default: `port`)."
    )


class VMCloudProperties(_Strict):
    """vm_type (and vm_extension, AZ) cloud_properties: what create_vm makes. Each manual
    network (and a dynamic one with a net_id) gets a Neutron port made before the server,
    with the fixed IP, the security groups and the address pairs; a port no device uses that
    still holds the IP is deleted first. A vip network's floating IP is moved to the server
    once it is ACTIVE. The agent's settings go in user_data (and on the config drive): system
    disk /dev/sda, ephemeral disk /dev/sdb when the flavor has one (at least twice the RAM).
    A create that fails deletes the server and the ports it made and raises VMCreationFailed
    with Nova's fault text. delete_vm removes the load balancer memberships, the server (waiting
    until it is gone, so its disks are free) and its ports; a VM that is gone is success."""

    instance_type: str = Field(..., min_length=1, description="Nova flavor name (a flavor ID works too).")
    availability_zone: str | None = Field(None, description="Availability zone for the server.")
    availability_zones: list[str] | None = Field(
        None,
        min_length=1,
        description="Several zones: one is picked at random, and the next is tried when Nova finds no valid host. "
        "Needs `ignore_server_availability_zone` (disks cannot follow the VM across zones).",
    )
    key_name: str | None = Field(None, description="Nova key pair. Default: the global `default_key_name`.")
    security_groups: list[str] | None = Field(
        None,
        description="Security group names or IDs. Precedence: this, then the networks' `security_groups`, then "
        "the global `default_security_groups`.",
    )
    scheduler_hints: dict[str, Any] | None = Field(
        None, description="Nova scheduler hints (`os:scheduler_hints`), e.g. `{\"group\": \"<server group id>\"}`."
    )
    boot_from_volume: StrictBool | None = Field(
        None, description="Boot from a Cinder volume. Default: the global `boot_from_volume`."
    )
    root_disk: RootDisk | None = Field(
        None,
        description="Root disk size. Used for the boot volume; required when the flavor's disk is 0 (the VM then "
        "boots from a volume of this size).",
    )
    loadbalancer_pools: list[LoadBalancerPool] = Field(
        default_factory=list, description="Octavia pools to add the VM to (removed again by delete_vm)."
    )
    allowed_address_pairs: str | list[str] | None = Field(
        None,
        description="IP address(es) the VM may also answer for (e.g. a VRRP address), set on its manual "
        "networks' ports.",
    )

    @model_validator(mode="after")
    def _zones(self) -> VMCloudProperties:
        if self.availability_zone and self.availability_zones:
            raise ValueError("give availability_zone or availability_zones, not both")
        return self

    @property
    def address_pairs(self) -> list[str]:
        if self.allowed_address_pairs is None:
            return []
        if isinstance(self.allowed_address_pairs, str):
            return [self.allowed_address_pairs]
        return list(self.allowed_address_pairs)


# ---------------------------------------------------------------- disk_type cloud_properties


class DiskCloudProperties(_Strict):
    """disk_type cloud_properties: what create_disk makes. Sizes are rounded up to whole GiB
    (at least 1); a disk made for a VM goes in that VM's availability zone unless
    `ignore_server_availability_zone`. attach_disk answers `/dev/sdX`, the first free letter
    from b after those of the flavor's ephemeral and swap disks and of a config drive attached
    as a disk; a disk already attached answers its own. resize_disk grows (shrinking is
    NotSupported). Deleting what is gone (VM, disk, snapshot, stemcell) succeeds; detaching a
    disk that is gone succeeds, one that is not attached to the VM is DiskNotAttached. A
    detach returns once both Cinder and Nova have let go of the disk (Nova drops its record of
    the attachment a moment after Cinder says `available`); an attach that finds only such a
    departing record waits for it to go rather than answer that the disk is attached."""

    type: str | None = Field(
        None, description="Cinder volume type. Precedence: this, then the global `default_volume_type`, then Cinder's."
    )
    name: str | None = Field(None, description="Set by the director for dynamic disks; becomes the volume name.")


# ---------------------------------------------------------------- network cloud_properties


class NetworkCloudProperties(_Strict):
    """A manual or dynamic network's cloud_properties (cloud-config subnets)."""

    net_id: str | None = Field(
        None,
        description="Neutron network ID. Required for manual networks; without it a dynamic network lets Nova "
        "pick the project's network.",
    )
    security_groups: list[str] | None = Field(
        None, description="Security group names or IDs for VMs on this network (unless the vm_type names some)."
    )
    vrrp_port_check: StrictBool = Field(
        True, description="Before a manual network's port gets the vm_type's `allowed_address_pairs`, check that a "
        "port holding each of those addresses (the VRRP port) exists, and refuse create_vm when one does not "
        "(as the official CPI); false skips the check.")


class VipCloudProperties(_Strict):
    """A vip network's cloud_properties: nothing to set; the network's `ip` is a floating IP already
    allocated to the project, moved to the new VM from wherever it is."""


# ---------------------------------------------------------------- stemcell cloud_properties


class StemcellCloudProperties(BaseModel):
    """stemcell.MF cloud_properties (create_stemcell's second argument). Stemcell builders
    add keys over time, so unknown keys are kept: strings, numbers and booleans become Glance
    image properties (heavy stemcells), anything else is ignored and logged. The image
    properties bosh-openstack-cpi sets are named below, with their types."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    #: Keys that become the image property of the same name (`hypervisor` is `hypervisor_type`).
    IMAGE_PROPERTIES: ClassVar[tuple[str, ...]] = (
        "os_type", "os_distro", "architecture", "auto_disk_config", "hw_vif_model", "hw_disk_bus",
        "hw_disk_bus_model", "hw_scsi_model", "hw_vif_multiqueue_enabled", "vmware_adaptertype", "vmware_disktype",
        "vmware_linked_clone", "vmware_ostype")

    name: str | None = Field(None, description="Stemcell name; the image is named `<name>/<version>`.")
    version: str | int | float | None = Field(None, description="Stemcell version.")
    image_id: str | None = Field(
        None,
        description="Light stemcell: the Glance image to use (must be `active`); the cid is `\"<image_id> light\"`.",
    )
    disk_format: str = Field("qcow2", description="Heavy: Glance disk format of the root image (`qcow2`, `raw`, ...).")
    container_format: str = Field("bare", description="Heavy: Glance container format.")
    os_type: str | None = Field(None, description="Heavy: image property `os_type` (e.g. `linux`).")
    os_distro: str | None = Field(None, description="Heavy: image property `os_distro` (e.g. `ubuntu`).")
    architecture: str | None = Field(None, description="Heavy: image property `architecture` (e.g. `x86_64`).")
    hypervisor: str | None = Field(None, description="Heavy: image property `hypervisor_type` (e.g. `kvm`).")
    auto_disk_config: StrictBool | None = Field(None, description="Heavy: image property `auto_disk_config`.")
    hw_vif_model: str | None = Field(None, description="Heavy: image property `hw_vif_model` (e.g. `virtio`).")
    hw_disk_bus: str | None = Field(None, description="Heavy: image property `hw_disk_bus` (e.g. `scsi`).")
    hw_disk_bus_model: str | None = Field(None, description="Heavy: image property `hw_disk_bus_model`.")
    hw_scsi_model: str | None = Field(None, description="Heavy: image property `hw_scsi_model` (e.g. `virtio-scsi`).")
    hw_vif_multiqueue_enabled: StrictBool | None = Field(
        None, description="Heavy: image property `hw_vif_multiqueue_enabled`.")
    vmware_adaptertype: str | None = Field(None, description="Heavy: image property `vmware_adaptertype`.")
    vmware_disktype: str | None = Field(None, description="Heavy: image property `vmware_disktype`.")
    vmware_linked_clone: StrictBool | None = Field(None, description="Heavy: image property `vmware_linked_clone`.")
    vmware_ostype: str | None = Field(None, description="Heavy: image property `vmware_ostype`.")
    infrastructure: str | None = Field(None, description="Informational (`openstack`).")

    @property
    def is_light(self) -> bool:
        return bool(self.image_id)
