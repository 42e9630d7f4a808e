"""The aws cloud's config section (`cloud.properties.aws`) and its cloud_properties models.

Every key a user can write is here, with a description and its constraints; a bad value
fails the call with an error naming the key and what is allowed (cpi.validation.parse).
docs/aws.md is generated from these models (`cpi props aws`, through cpi.operator.reference) and
a test keeps the two in step, so the docs cannot drift from what the code accepts.

Limits AWS changes over time (gp3 IOPS ceilings, instance-type names) are left for EC2
to check: the models check shape and combinations, EC2 checks numbers.

No boto3/botocore here: `info` imports this module.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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

from cpi import private
from cpi.models import StrictModel as _Strict

if TYPE_CHECKING:
    from cpi.transitions import History

#: The setting that chooses the lock directory, as errors name it.
LOCK_DIR_SETTING = "cloud.properties.aws.lock_dir"

VolumeType = Literal["gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"]
#: Volume types whose IOPS can be provisioned, and those that need it.
IOPS_TYPES = ("gp3", "io1", "io2")
IOPS_REQUIRED = ("io1", "io2")


def _with_scheme(url: str | None) -> str | None:
    if url and "://" not in url:
        return f"https://{url}"
    return url


# ---------------------------------------------------------------- shared pieces


class MetadataOptions(_Strict):
    """Instance metadata service (IMDS) options, as RunInstances' MetadataOptions.
    `http_tokens: required` turns off IMDSv1 (aws-cpi #156)."""

    http_tokens: Literal["required", "optional"] | None = Field(
        None, description="`required`: IMDSv2 only (session tokens); `optional`: IMDSv1 allowed too."
    )
    http_put_response_hop_limit: StrictInt | None = Field(
        None, ge=1, le=64, description="How many network hops an IMDSv2 token response may travel."
    )
    http_endpoint: Literal["enabled", "disabled"] | None = Field(
        None, description="Turn the metadata endpoint off entirely (the agent needs it: leave enabled)."
    )
    http_protocol_ipv6: Literal["enabled", "disabled"] | None = Field(
        None, description="Serve IMDS on its IPv6 address too."
    )
    instance_metadata_tags: Literal["enabled", "disabled"] | None = Field(
        None, description="Expose the instance's tags through IMDS."
    )

    def to_api(self) -> dict[str, Any]:
        names = {
            "http_tokens": "HttpTokens",
            "http_put_response_hop_limit": "HttpPutResponseHopLimit",
            "http_endpoint": "HttpEndpoint",
            "http_protocol_ipv6": "HttpProtocolIpv6",
            "instance_metadata_tags": "InstanceMetadataTags",
        }
        return {names[k]: v for k, v in self.model_dump(exclude_none=True).items()}

    def over(self, base: MetadataOptions | None) -> MetadataOptions:
        """These options with `base`'s filling the keys this one leaves unset."""
        merged = (base.model_dump(exclude_none=True) if base else {}) | self.model_dump(exclude_none=True)
        return MetadataOptions.model_validate(merged)


Tags = dict[str, str]
#: Tags as stemcell cloud_properties may write them (YAML numbers and booleans become text).
LooseTags = dict[str, str | int | float | bool]


def _check_iops_throughput(kind: str, type_: str | None, iops: int | None, throughput: int | None) -> None:
    volume_type = type_ or "gp3"
    if iops is not None and volume_type not in IOPS_TYPES:
        raise ValueError(f"{kind}: iops applies to {', '.join(IOPS_TYPES)} volumes only, not {volume_type}")
    if iops is None and volume_type in IOPS_REQUIRED:
        raise ValueError(f"{kind}: type {volume_type} needs iops")
    if throughput is not None and volume_type != "gp3":
        raise ValueError(f"{kind}: throughput applies to gp3 volumes only, not {volume_type}")


# ---------------------------------------------------------------- cpi.json: cloud.properties.aws


class ConnectionOptions(_Strict):
    """`connection_options` as the official AWS CPI's job takes it."""

    ca_cert: str | None = Field(
        None, description="PEM text of the CA certificate(s) that sign the endpoints' TLS certificates; the CPI "
        "keeps it in a private file of its cache (~/.cache/bosh-cpi/ca/) to hand to botocore. The same as "
        "`ca_cert_file`, given as text: set one of them.")


class StemcellDefaults(_Strict):
    """`stemcell` in cpi.json, as the official AWS CPI's job writes it: keys over every
    stemcell's cloud_properties."""

    kernel_id: str | None = Field(
        None, description="The official CPI's kernel for paravirtual images. No effect: no current instance type "
        "runs paravirtual images, and a heavy stemcell asking for one is refused, saying so.")
    tags: LooseTags | None = Field(
        None, description="Tags for every stemcell, in place of the stemcell cloud_properties' `tags` (the official "
        "CPI merges this section over a stemcell's cloud_properties, so these replace its `tags` whole); "
        "create_stemcell's env tags still apply beneath them.")


class AwsProperties(_Strict):
    """`cloud.properties.aws` in cpi.json. Request `context` keys with these names override
    the file for one call (a director cpi-config)."""

    # -- where
    region: str | None = Field(
        None,
        pattern=r"^[a-z0-9-]+$",
        description="AWS region, e.g. `us-east-1`. Required unless `ec2_endpoint` is set "
        "(then it is the signing region, default `us-east-1`).",
    )
    ec2_endpoint: str | None = Field(
        None, description="EC2 API URL for an EC2-compatible cloud or a test server; "
                          "`https://` is added when no scheme is given."
    )
    elb_endpoint: str | None = Field(
        None, description="Elastic Load Balancing API URL (classic `elbs` and `lb_target_groups`).")
    sts_endpoint: str | None = Field(None, description="STS API URL, used with `role_arn`.")
    ebs_endpoint: str | None = Field(None, description="EBS direct API URL, used to upload heavy stemcells.")
    dualstack: StrictBool = Field(False, description="Use the dual-stack (IPv4 and IPv6) AWS endpoints.")
    ca_cert_file: str | None = Field(
        None, description="PEM bundle to verify the endpoints' TLS certificates with (private EC2-compatible clouds)."
    )

    # -- who
    credentials_source: Literal["static", "env_or_profile"] = Field(
        "static",
        description="`static`: the keys below. `env_or_profile`: the SDK's chain (environment, "
        "shared config, container or instance profile); the keys below must then be unset.",
    )
    access_key_id: str | None = Field(None, description="Access key ID (with `credentials_source: static`).")
    secret_access_key: SecretStr | None = Field(
        None, description="Secret access key (with `credentials_source: static`). Never logged."
    )
    session_token: SecretStr | None = Field(
        None, description="Session token of temporary credentials (optional). Never logged."
    )
    role_arn: str | None = Field(
        None,
        pattern=r"^arn:[a-z-]+:iam::\d{12}:role/.+$",
        description="Assume this IAM role (STS AssumeRole) with the credentials above.",
    )
    role_session_name: str = Field(
        "bosh-cpi", min_length=2, max_length=64, description="Session name for `role_arn` (shows in CloudTrail)."
    )
    role_external_id: str | None = Field(None, description="External ID the role's trust policy demands, if any.")

    # -- defaults for VMs and disks
    default_key_name: str | None = Field(None, description="EC2 key pair for VMs whose vm_type names none.")
    default_security_groups: list[str] = Field(
        default_factory=list,
        description="Security groups (IDs or names) for VMs when neither vm_type nor the network names any. "
        "Empty: the VPC's default group.",
    )
    default_iam_instance_profile: str | None = Field(
        None, description="IAM instance profile (name or ARN) for VMs whose vm_type names none."
    )
    default_availability_zone: str | None = Field(
        None, description="Where create_disk puts a disk that is created without a VM."
    )
    encrypted: StrictBool = Field(
        False,
        description="Encrypt persistent and ephemeral disks and copy light stemcells encrypted, unless "
        "cloud_properties say otherwise.",
    )
    kms_key_arn: str | None = Field(
        None, description="KMS key for encryption (default: the account's EBS default key)."
    )
    metadata_options: MetadataOptions | None = Field(
        None, description="IMDS options for every VM (vm_type `metadata_options` override key by key)."
    )
    instance_type_families: list[str] = Field(
        default_factory=lambda: ["m6i", "c6i", "r6i", "m5", "c5", "r5"],
        min_length=1,
        description="Families calculate_vm_cloud_properties chooses from, most preferred first; it "
        "returns the smallest type (memory, then vCPUs) that fits.",
    )
    stemcell: StemcellDefaults | None = Field(
        None, description="The official CPI's `stemcell` section: `kernel_id`, and `tags` for every stemcell.")
    connection_options: ConnectionOptions | None = Field(
        None, description="The official CPI's `connection_options.ca_cert` (PEM text): the same as `ca_cert_file`.")
    fast_path_delete: StrictBool = Field(
        False, description="delete_vm returns once EC2 has taken the TerminateInstances request, naming the instance "
        "`to be deleted`, without waiting until it is terminated (as the official CPI's key): quicker, but the "
        "persistent disks it held and its IP are freed a little later.")
    enable_describe_instance_types: StrictBool = Field(
        True, description="Ask EC2 (DescribeInstanceTypes) whether an instance type exposes EBS volumes as NVMe, "
        "for attach_disk's disk hint; false: decide from the type's family name, with no such request (an "
        "account whose policy lacks ec2:DescribeInstanceTypes). A vm_type asking for instance storage "
        "(`ephemeral_disk.use_instance_storage`, `raw_instance_storage`) is asked of EC2 either way: no name tells "
        "how many instance-store volumes a type has.")

    # -- retries and waits
    max_retries: StrictInt = Field(
        8,
        ge=0,
        le=1000,
        description="Most retries of one throttled or failed request; with `retry_budget_seconds`, whichever "
        "runs out first ends the retries. 8, the official CPI's default: while EC2 throttles, backoff of up to "
        "about two minutes in all.",
    )
    retry_budget_seconds: float = Field(
        600.0,
        gt=0,
        description="How long one request keeps being retried while AWS throttles (RequestLimitExceeded) or "
        "fails transiently; backoff is exponential with full jitter.",
    )
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to open a connection to an endpoint.")
    read_timeout: float = Field(60.0, gt=0, description="Seconds to wait for a response, all of it however slowly "
                                "it trickles in, from the request being sent.")
    vm_wait_timeout: float = Field(
        900.0, gt=0, description="Seconds to wait for an instance to be running or terminated."
    )
    volume_wait_timeout: float = Field(
        600.0, gt=0, description="Seconds to wait for a volume to be created, attached, detached or resized."
    )
    volume_in_use_timeout: float = Field(
        600.0,
        gt=0,
        description="Seconds attach_disk/delete_disk keep retrying while a volume is still held by a "
        "VM that is going away (VolumeInUse).",
    )
    image_wait_timeout: float = Field(
        3600.0, gt=0, description="Seconds to wait for stemcell snapshots and images to be ready."
    )
    lock_dir: str | None = Field(
        None,
        description="Directory for the lock files that keep two CPI processes on this host from "
        "attaching or detaching disks of the same VM at once: a directory of the CPI's user, created 0700 "
        "and refused if anyone else owns it or can write to it. "
        "Default: `~/.cache/bosh-cpi/aws-locks` in the CPI user's home.",
    )
    slim_models: StrictBool = Field(
        True,
        description="Load only the part of botocore's EC2 API model the CPI uses (faster start-up of every "
        "call); false loads botocore's full model.",
    )

    @field_validator("ec2_endpoint", "elb_endpoint", "sts_endpoint", "ebs_endpoint")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        return _with_scheme(value)

    @model_validator(mode="after")
    def _consistent(self) -> AwsProperties:
        if self.ca_cert_file and self.connection_options and self.connection_options.ca_cert:
            raise ValueError("give the CA as ca_cert_file or as connection_options.ca_cert, not both")
        if not self.region and not self.ec2_endpoint:
            raise ValueError("region is required (or ec2_endpoint for an EC2-compatible cloud)")
        if self.credentials_source == "static":
            missing = [k for k in ("access_key_id", "secret_access_key") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"credentials_source static needs {' and '.join(missing)}")
        else:
            given = [k for k in ("access_key_id", "secret_access_key", "session_token") if getattr(self, k) is not None]
            if given:
                raise ValueError(
                    "credentials_source env_or_profile takes its credentials from the environment; "
                    f"remove {', '.join(given)}"
                )
        return self

    @property
    def signing_region(self) -> str:
        return self.region or "us-east-1"

    def history(self, kind: str) -> History:
        """How long `kind` of transition ("volume attached") took lately against this EC2
        endpoint and region (cpi.transitions): its waits look when it is about to end.
        Imported here, not at the top: `info` reads this module and needs none of it."""
        from cpi.transitions import History

        return History(f"aws {self.ec2_endpoint or '-'} {self.signing_region} {kind}")

    def lock_directory(self) -> Path:
        """The lock directory, created or checked private to the CPI's user (cpi.private):
        never a fixed name in a shared temp dir, where another local user could make it
        first and plant links in it."""
        chosen = self.lock_dir or private.cache_dir("aws-locks", LOCK_DIR_SETTING)
        return private.private_dir(chosen, LOCK_DIR_SETTING)


# ---------------------------------------------------------------- vm_type cloud_properties


class EphemeralDisk(_Strict):
    """The VM's ephemeral disk (the agent's /dev/sdb, mounted on /var/vcap/data)."""

    size: StrictInt | None = Field(None, ge=1, description="Size in MiB, rounded up to whole GiB. Default 10 GiB.")
    type: VolumeType | None = Field(None, description="EBS volume type. Default gp3.")
    iops: StrictInt | None = Field(None, ge=1, description="Provisioned IOPS (gp3, io1, io2).")
    throughput: StrictInt | None = Field(None, ge=1, description="Throughput in MiB/s (gp3).")
    encrypted: StrictBool | None = Field(None, description="Encrypt it. Default: the global `encrypted`.")
    kms_key_arn: str | None = Field(None, description="KMS key. Default: the global `kms_key_arn`.")
    use_instance_storage: StrictBool = Field(
        False,
        description="Use the instance type's first instance-store volume instead of EBS; combines with no other key.",
    )
    use_root_disk: StrictBool = Field(
        False,
        description="No separate ephemeral disk: the agent puts /var/vcap/data on the root disk (give it room with "
        "`root_disk.size`). The other keys here are then ignored, and said so in the log; "
        "`raw_instance_storage` still applies.",
    )

    @model_validator(mode="after")
    def _combination(self) -> EphemeralDisk:
        if self.use_root_disk and self.use_instance_storage:
            raise ValueError("use_root_disk and use_instance_storage cannot both be true (the ephemeral disk is "
                             "either the root disk or an instance-store volume)")
        if self.use_instance_storage:
            others = [k for k in ("size", "type", "iops", "throughput", "encrypted", "kms_key_arn")
                      if getattr(self, k) is not None]
            if others:
                raise ValueError(f"use_instance_storage cannot be combined with {', '.join(others)}")
        else:
            _check_iops_throughput("ephemeral_disk", self.type, self.iops, self.throughput)
        return self


class RootDisk(_Strict):
    """The VM's root (system) volume, made from the stemcell's snapshot."""

    size: StrictInt | None = Field(None, ge=1,
                                   description="Size in MiB, rounded up to whole GiB. Default: the stemcell's.")
    type: VolumeType | None = Field(None, description="EBS volume type. Default gp3.")
    iops: StrictInt | None = Field(None, ge=1, description="Provisioned IOPS (gp3, io1, io2).")
    throughput: StrictInt | None = Field(None, ge=1, description="Throughput in MiB/s (gp3).")

    @model_validator(mode="after")
    def _combination(self) -> RootDisk:
        _check_iops_throughput("root_disk", self.type, self.iops, self.throughput)
        return self


class AdvertisedRoute(_Strict):
    """One route the VM takes over once it runs (a NAT, VPN or router VM)."""

    table_id: str = Field(..., pattern=r"^rtb-[0-9a-zA-Z]+$",
                          description="Route table ID (`rtb-...`), in the VPC of the VM's subnet.")
    destination: str = Field(
        ..., description="Destination CIDR block whose traffic goes to the VM, e.g. `0.0.0.0/0` (IPv6 too): "
        "added to the table, or taken over when the table already routes it elsewhere.")

    @field_validator("destination")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"'{value}' is not a CIDR block (e.g. 10.10.0.0/16)") from None
        if "/" not in value:
            raise ValueError(f"'{value}' is not a CIDR block: give its prefix length (e.g. {value}/32)")
        return value


class VMCloudProperties(_Strict):
    """vm_type (and vm_extension, AZ) cloud_properties: what create_vm makes."""

    instance_type: str = Field(
        ..., pattern=r"^[a-z0-9-]+\.[a-z0-9-]+$", description="EC2 instance type, e.g. `m6i.large`."
    )
    availability_zone: str | None = Field(
        None, description="AZ; must match the subnet's (usually set in the cloud-config AZ)."
    )
    key_name: str | None = Field(None, description="EC2 key pair. Default: the global `default_key_name`.")
    security_groups: list[str] | None = Field(
        None,
        description="Security group IDs or names. Precedence: this, then the networks' "
        "`security_groups`, then the global `default_security_groups`.",
    )
    iam_instance_profile: str | None = Field(
        None, description="IAM instance profile name or ARN. Default: the global `default_iam_instance_profile`."
    )
    placement_group: str | None = Field(None, description="Placement group name.")
    tenancy: Literal["default", "dedicated", "host"] = Field("default", description="Instance tenancy.")
    ephemeral_disk: EphemeralDisk = Field(
        default_factory=EphemeralDisk,
        description="The ephemeral disk (/dev/sdb): an EBS volume deleted with the VM, or instance storage, or "
        "none (the root disk).")
    root_disk: RootDisk = Field(default_factory=RootDisk,
                                description="The root volume: size and type over the stemcell's.")
    spot_bid_price: float | None = Field(
        None, gt=0, description="Launch as a one-time spot instance with this maximum price (USD per hour)."
    )
    spot_ondemand_fallback: StrictBool = Field(
        False, description="When no spot capacity is available at that price, launch on-demand instead."
    )
    elbs: list[str] = Field(default_factory=list, description="Classic load balancers to register the VM with.")
    lb_target_groups: list[str] = Field(
        default_factory=list, description="ALB/NLB target group names (or ARNs) to register the VM with."
    )
    auto_assign_public_ip: StrictBool | None = Field(
        None, description="Give the VM a public IPv4 address. Default: the subnet's setting."
    )
    source_dest_check: StrictBool = Field(
        True, description="false lets the VM route traffic not addressed to it (NAT, VPN)."
    )
    metadata_options: MetadataOptions | None = Field(
        None, description="IMDS options; override the global `metadata_options` key by key."
    )
    tags: Tags = Field(default_factory=dict, description="Tags for the instance and its volumes, over env.bosh.tags.")
    raw_instance_storage: StrictBool = Field(
        False,
        description="Give the VM every instance-store volume of its instance type (`ephemeral0`, `ephemeral1`, ...) "
        "and list them in the agent settings' `disks.raw_ephemeral`, for jobs that use raw local disks; the "
        "ephemeral disk stays what `ephemeral_disk` says. Where the type's instance storage is NVMe, EC2 attaches "
        "it by itself and the agent finds it. Needs an instance type with instance storage (asked of EC2: "
        "ec2:DescribeInstanceTypes) and cannot be combined with `ephemeral_disk.use_instance_storage`.",
    )

    advertised_routes: list[AdvertisedRoute] = Field(
        default_factory=list,
        description="Routes to point at the VM once it runs (EC2 CreateRoute, or ReplaceRoute where the table "
        "already has the destination), e.g. a NAT VM as `0.0.0.0/0` of private subnets' tables. Usually with "
        "`source_dest_check: false`. A route EC2 refuses fails create_vm, and the VM is deleted.",
    )

    @model_validator(mode="after")
    def _spot(self) -> VMCloudProperties:
        if self.spot_ondemand_fallback and self.spot_bid_price is None:
            raise ValueError("spot_ondemand_fallback needs spot_bid_price")
        return self

    @model_validator(mode="after")
    def _instance_storage(self) -> VMCloudProperties:
        if self.raw_instance_storage and self.ephemeral_disk.use_instance_storage:
            raise ValueError("raw_instance_storage and ephemeral_disk.use_instance_storage cannot both be true "
                             "(the first instance-store volume cannot be both the ephemeral disk and a raw one)")
        return self


# ---------------------------------------------------------------- disk_type cloud_properties


class DiskCloudProperties(_Strict):
    """disk_type cloud_properties: what create_disk makes (and update_disk changes)."""

    type: VolumeType = Field("gp3", description="EBS volume type.")
    iops: StrictInt | None = Field(None, ge=1, description="Provisioned IOPS (gp3, io1, io2).")
    throughput: StrictInt | None = Field(None, ge=1, description="Throughput in MiB/s (gp3).")
    encrypted: StrictBool | None = Field(None, description="Encrypt the disk. Default: the global `encrypted`.")
    kms_key_arn: str | None = Field(None, description="KMS key. Default: the global `kms_key_arn`.")
    tags: Tags = Field(default_factory=dict, description="Tags set when the volume is created.")
    name: str | None = Field(None, description="Set by the director for dynamic disks; becomes the `Name` tag.")

    @model_validator(mode="after")
    def _combination(self) -> DiskCloudProperties:
        _check_iops_throughput("disk", self.type, self.iops, self.throughput)
        return self


# ---------------------------------------------------------------- network cloud_properties


class NetworkCloudProperties(_Strict):
    """A manual or dynamic network's cloud_properties (cloud-config subnets)."""

    subnet: str = Field(..., pattern=r"^subnet-[0-9a-zA-Z]+$", description="VPC subnet ID the VM's interface is in.")
    security_groups: list[str] | None = Field(
        None, description="Security group IDs or names for VMs on this network (unless the vm_type names some)."
    )


class VipCloudProperties(_Strict):
    """A vip network's cloud_properties: nothing to set; the network's `ip` is the Elastic IP."""


# ---------------------------------------------------------------- stemcell cloud_properties


class StemcellCloudProperties(BaseModel):
    """stemcell.MF cloud_properties (create_stemcell's second argument). Stemcell builders
    add keys over time, so unknown keys are kept and ignored (logged), not refused."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    name: str | None = Field(None, description="Stemcell name (becomes the image description).")
    version: str | int | float | None = Field(None, description="Stemcell version.")
    ami: dict[str, str] | None = Field(
        None,
        description="Light stemcell: AMI ID per region, e.g. `{\"us-east-1\": \"ami-...\"}`; the configured "
        "region's is used and the stemcell cid is `\"<ami> light\"`.",
    )
    encrypted: StrictBool | None = Field(
        None,
        description="Light: copy the AMI encrypted (CopyImage). Heavy: encrypt the uploaded snapshot. "
        "Default: the global `encrypted`.",
    )
    kms_key_arn: str | None = Field(None, description="KMS key for that encryption. Default: the global `kms_key_arn`.")
    architecture: Literal["x86_64", "arm64", "i386"] = Field(
        "x86_64", description="Heavy: the image's CPU architecture.")
    virtualization_type: Literal["hvm", "paravirtual"] = Field(
        "hvm", description="Heavy: `hvm`. `paravirtual` is accepted as the official CPI's key, and a heavy "
        "stemcell asking for it is refused, saying why: no current instance type runs paravirtual images."
    )
    kernel_id: str | None = Field(
        None, description="Heavy, paravirtual: the official CPI's kernel. Accepted, no effect: a paravirtual "
        "stemcell is refused (see `virtualization_type`).")
    root_device_name: str = Field(
        "/dev/xvda", pattern=r"^/dev/[a-z0-9]+$", description="Heavy: the image's root device."
    )
    boot_mode: Literal["legacy-bios", "uefi", "uefi-preferred"] | None = Field(
        None, description="Heavy: firmware the image boots with. Default: EC2's for the architecture."
    )
    disk: StrictInt = Field(
        2048, ge=1, description="Heavy: minimum root volume size in MiB (the image size wins when larger)."
    )
    disk_format: str | None = Field(None, description="Informational (`raw`).")
    container_format: str | None = Field(None, description="Informational (`bare`).")
    infrastructure: str | None = Field(None, description="Informational (`aws`).")
    os_type: str | None = Field(None, description="Informational (`linux`).")
    os_distro: str | None = Field(None, description="Informational (e.g. `ubuntu`).")
    hypervisor: str | None = Field(None, description="Informational (`xen`).")
    tags: LooseTags = Field(
        default_factory=dict,
        description="Tags for what create_stemcell makes, over create_stemcell's env tags: a heavy stemcell's "
        "snapshot and image, an encrypted light stemcell's image copy and its snapshots. A light stemcell that is "
        "not copied tags its AMI only when this account owns it (a shared or public AMI is left alone, with a log "
        "line). The global `stemcell.tags` replace these.",
    )

    @field_validator("ami")
    @classmethod
    def _amis(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for region, ami in (value or {}).items():
            if not re.fullmatch(r"ami-[0-9a-f]+", ami):
                raise ValueError(f"ami.{region}: '{ami}' is not an AMI ID (ami-...)")
        return value

    @property
    def is_light(self) -> bool:
        return bool(self.ami)

    @property
    def unknown_keys(self) -> list[str]:
        return sorted(self.model_extra or {})
