"""The aws cloud's cloud_properties models: vm_type, disk_type, network and stemcell
(the job's config, `cloud.properties.aws`, is cpi.clouds.aws.job_config).

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
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from cpi.models import StrictModel as _Strict

from .job_config import LooseTags, MetadataOptions, Tags

VolumeType = Literal["gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"]
#: Volume types whose IOPS can be provisioned, and those that need it.
IOPS_TYPES = ("gp3", "io1", "io2")
IOPS_REQUIRED = ("io1", "io2")


def _check_iops_throughput(kind: str, type_: str | None, iops: int | None, throughput: int | None) -> None:
    volume_type = type_ or "gp3"
    if iops is not None and volume_type not in IOPS_TYPES:
        raise ValueError(f"{kind}: iops applies to {', '.join(IOPS_TYPES)} volumes only, not {volume_type}")
    if iops is None and volume_type in IOPS_REQUIRED:
        raise ValueError(f"{kind}: type {volume_type} needs iops")
    if throughput is not None and volume_type != "gp3":
        raise ValueError(f"{kind}: throughput applies to gp3 volumes only, not {volume_type}")


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
