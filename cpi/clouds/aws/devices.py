"""A new VM's block devices: what RunInstances maps, and what the agent is told of them.

The root volume overrides the AMI's root mapping. The ephemeral disk is an EBS volume or
the first instance-store volume at /dev/sdb; with `use_root_disk` there is none, and the
agent settings name none (the agent then keeps its data on the root disk).
`raw_instance_storage` adds every instance-store volume of the type as `ephemeral<N>` and
lists them in the agent's `disks.raw_ephemeral`, whose count is what makes the agent set
them up. Where a type's instance storage is NVMe, EC2 attaches it whether mapped or not,
in an order of its own: those volumes are not mapped, and the paths the agent gets
(/dev/nvme<N>n1) are only hints (the agent finds them by leaving out the EBS volumes).

How many instance-store volumes a type has, and how they are named, comes from
DescribeInstanceTypes: one request, only when a vm_type asks for instance storage.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from cpi.errors import VMCreationFailed
from cpi.models import gib

from . import errors
from .job_config import AwsProperties
from .props import VMCloudProperties
from .session import Aws

log = logging.getLogger("cpi.clouds.aws")

EPHEMERAL_DEVICE = "/dev/sdb"
DEFAULT_EPHEMERAL_GIB = 10
#: NvmeSupport values of InstanceStorageInfo whose volumes show up as /dev/nvme<N>n1.
NVME_INSTANCE_STORAGE = ("required", "supported")


@dataclass(frozen=True)
class InstanceStorage:
    """What an instance type has of instance storage (count 0: none)."""

    count: int
    nvme: bool


@dataclass
class Layout:
    """The block device mappings of RunInstances and the agent settings' disks."""

    mappings: list[dict[str, Any]]
    ephemeral: str | None
    raw_ephemeral: list[dict[str, str]] = field(default_factory=list)
    #: what the vm_type asked for that this layout leaves out, for the caller to log once
    ignored: list[str] = field(default_factory=list)


class InstanceTypes:
    """DescribeInstanceTypes answers, asked once per type and call."""

    def __init__(self, aws: Aws):
        self.aws = aws
        self._storage: dict[str, InstanceStorage] = {}

    def storage(self, instance_type: str, wanted_by: str) -> InstanceStorage:
        """The type's instance storage; `wanted_by` (the key that needs it) goes in errors.
        Asked even with enable_describe_instance_types false: no name tells the count."""
        if instance_type not in self._storage:
            self._storage[instance_type] = self._ask(instance_type, wanted_by)
        return self._storage[instance_type]

    def _ask(self, instance_type: str, wanted_by: str) -> InstanceStorage:
        try:
            response = self.aws.ec2("DescribeInstanceTypes", InstanceTypes=[instance_type])
        except Exception as exc:
            error_code = errors.code(exc)
            if error_code in ("InvalidInstanceType", "InvalidParameterValue"):
                raise VMCreationFailed(f"{wanted_by}: EC2 does not know instance type {instance_type} "
                                       f"({errors.summary(exc)})", ok_to_retry=False) from None
            if error_code in errors.PERMISSION_CODES:
                raise VMCreationFailed(f"{wanted_by}: counting the instance-store volumes of {instance_type} "
                                       f"needs ec2:DescribeInstanceTypes ({errors.summary(exc)})",
                                       ok_to_retry=False) from None
            raise
        found = (response.get("InstanceTypes") or [{}])[0]
        info = found.get("InstanceStorageInfo") or {}
        count = sum(int(disk.get("Count") or 0) for disk in info.get("Disks") or [])
        if not found.get("InstanceStorageSupported"):
            count = 0
        storage = InstanceStorage(count=count, nvme=info.get("NvmeSupport") in NVME_INSTANCE_STORAGE)
        log.info("instance type %s: %d instance-store volume(s)%s", instance_type, storage.count,
                 " (NVMe)" if storage.nvme and storage.count else "")
        return storage


def needs_instance_types(props: VMCloudProperties) -> bool:
    return props.ephemeral_disk.use_instance_storage or props.raw_instance_storage


def layout(props: VMCloudProperties, image: dict[str, Any], properties: AwsProperties,
           storage: InstanceStorage | None) -> Layout:
    """The devices of a VM of `props` from `image`; `storage` is the type's instance
    storage when needs_instance_types(props), else None."""
    eph = props.ephemeral_disk
    if needs_instance_types(props) and (storage is None or storage.count == 0):
        key = "raw_instance_storage" if props.raw_instance_storage else "ephemeral_disk.use_instance_storage"
        raise VMCreationFailed(f"{key}: instance type {props.instance_type} has no instance storage",
                               ok_to_retry=False)
    result = Layout(mappings=[_root(props, image)], ephemeral=EPHEMERAL_DEVICE)
    if eph.use_root_disk:
        result.ephemeral = None
        result.ignored = [f"ephemeral_disk.{k}" for k in ("size", "type", "iops", "throughput", "encrypted",
                                                          "kms_key_arn") if getattr(eph, k) is not None]
    elif eph.use_instance_storage:
        result.mappings.append({"DeviceName": EPHEMERAL_DEVICE, "VirtualName": "ephemeral0"})
    else:
        result.mappings.append({"DeviceName": EPHEMERAL_DEVICE, "Ebs": _ephemeral_ebs(props, properties)})
    if props.raw_instance_storage and storage is not None:
        _add_raw(result, storage, image.get("VirtualizationType") or "hvm")
    return result


def _add_raw(result: Layout, storage: InstanceStorage, virtualization: str) -> None:
    for index in range(storage.count):
        if storage.nvme:
            # EC2 attaches NVMe instance storage by itself; the agent finds it by leaving out
            # the EBS volumes, so the path is a hint and the count is what matters
            result.raw_ephemeral.append({"path": f"/dev/nvme{index}n1"})
            continue
        # the names the official CPI gives them, which its agents have always been told
        device = f"/dev/sd{chr(ord('c') + index)}" if virtualization == "paravirtual" \
            else f"/dev/xvdb{chr(ord('a') + index)}"
        result.mappings.append({"DeviceName": device, "VirtualName": f"ephemeral{index}"})
        result.raw_ephemeral.append({"path": device})


def _root(props: VMCloudProperties, image: dict[str, Any]) -> dict[str, Any]:
    root_name = root_mapping_name(image)
    root: dict[str, Any] = {"DeleteOnTermination": True, "VolumeType": props.root_disk.type or "gp3"}
    if props.root_disk.size is not None:
        root["VolumeSize"] = gib(props.root_disk.size)
    else:
        # the AMI's own size: EC2 would assume it, and EC2-compatible clouds (moto) want it
        image_size = next((m.get("Ebs", {}).get("VolumeSize") for m in image.get("BlockDeviceMappings", [])
                           if m.get("DeviceName") == root_name), None)
        if image_size:
            root["VolumeSize"] = image_size
    if props.root_disk.iops is not None:
        root["Iops"] = props.root_disk.iops
    if props.root_disk.throughput is not None:
        root["Throughput"] = props.root_disk.throughput
    return {"DeviceName": root_name, "Ebs": root}


def _ephemeral_ebs(props: VMCloudProperties, properties: AwsProperties) -> dict[str, Any]:
    eph = props.ephemeral_disk
    ebs: dict[str, Any] = {
        "DeleteOnTermination": True,
        "VolumeSize": gib(eph.size) if eph.size is not None else DEFAULT_EPHEMERAL_GIB,
        "VolumeType": eph.type or "gp3",
    }
    if eph.iops is not None:
        ebs["Iops"] = eph.iops
    if eph.throughput is not None:
        ebs["Throughput"] = eph.throughput
    encrypted = properties.encrypted if eph.encrypted is None else eph.encrypted
    if encrypted:
        ebs["Encrypted"] = True
        kms = eph.kms_key_arn or properties.kms_key_arn
        if kms:
            ebs["KmsKeyId"] = kms
    return ebs


def root_mapping_name(image: dict[str, Any]) -> str:
    """The AMI's mapping that holds the root device: the same name, or the whole disk of a
    root partition (/dev/sda for /dev/sda1). Overriding any other name would add a disk."""
    root = image.get("RootDeviceName") or "/dev/xvda"
    names = [m.get("DeviceName") for m in image.get("BlockDeviceMappings", []) if m.get("DeviceName")]
    if root in names:
        return root
    return next((n for n in names if root.startswith(n)), root)
