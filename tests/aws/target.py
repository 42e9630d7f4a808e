"""The aws cloud as a lifecycle target, against a moto_server started for the session.

Checks look at EC2 itself (through boto3 in the test process), never at what the CPI says.
tests/aws/real_target.py runs the same target against a real account.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

from tests.aws import moto_env
from tests.lifecycle.targets import Target
from tests.support.runner import Cpi, Response


class _WatchingCpi(Cpi):
    """Notes the volumes that appear while create_stemcell runs: moto's StartSnapshot makes
    a backing EC2 volume that real EBS direct does not (real EBS-direct snapshots have
    VolumeId vol-ffffffff), and those volumes are moto's, not a CPI leak."""

    def __init__(self, config_path: Path, target: AwsTarget):
        super().__init__(config_path)
        self._target = target

    def call(self, method: str, *arguments: Any, **kw: Any) -> Response:
        if method != "create_stemcell" or not self._target.emulated:
            return super().call(method, *arguments, **kw)
        before = self._target.volume_ids()
        try:
            return super().call(method, *arguments, **kw)
        finally:
            for volume in self._target.ec2.describe_volumes()["Volumes"]:
                if volume["VolumeId"] not in before and not volume.get("Attachments") and not volume.get("Tags"):
                    self._target.emulator_volumes.add(volume["VolumeId"])


class AwsTarget(Target):
    name = "aws"
    supports_manual_ips = True

    def __init__(self, config_path: Path, *, ec2, subnet_id: str, subnet_cidr: str, zone: str, region: str,
                 ami_id: str, instance_type: str = "m5.large", emulated: bool = True, first_ip_offset: int = 10,
                 dns: list[str] | None = None):
        super().__init__(config_path)
        self.ec2 = ec2
        self.subnet_id = subnet_id
        self.subnet = ipaddress.ip_network(subnet_cidr)
        self.zone = zone
        self.region = region
        self.ami_id = ami_id
        self.instance_type = instance_type
        self.emulated = emulated
        self.first_ip_offset = first_ip_offset
        self.dns = dns or [str(self.subnet.network_address + 2)]
        self.emulator_volumes: set[str] = set()
        self.baseline = moto_env.inventory(ec2)
        self.cpi = _WatchingCpi(config_path, self)
        self.server: moto_env.MotoServer | None = None

    # -- inputs
    def stemcell_args(self) -> list[Any]:
        return ["", {"name": moto_env.STEMCELL_NAME, "version": "1.0", "infrastructure": "aws",
                     "ami": {self.region: self.ami_id}}]

    def vm_cloud_properties(self) -> dict[str, Any]:
        return {"instance_type": self.instance_type, "availability_zone": self.zone,
                "ephemeral_disk": {"size": 1024}}

    def disk_cloud_properties(self) -> dict[str, Any]:
        return {}

    def manual_network(self, index: int) -> dict[str, Any]:
        ip = self.subnet.network_address + self.first_ip_offset + index
        assert ip in self.subnet and ip != self.subnet.broadcast_address, f"index {index} is outside {self.subnet}"
        return {
            "default": {
                "type": "manual",
                "ip": str(ip),
                "netmask": str(self.subnet.netmask),
                "gateway": str(self.subnet.network_address + 1),
                "dns": self.dns,
                "default": ["dns", "gateway"],
                "cloud_properties": {"subnet": self.subnet_id},
            }
        }

    def dynamic_network(self) -> dict[str, Any]:
        return {
            "default": {
                "type": "dynamic",
                "dns": self.dns,
                "default": ["dns", "gateway"],
                "cloud_properties": {"subnet": self.subnet_id},
            }
        }

    # -- checks against EC2
    def instance(self, vm_cid: str) -> dict | None:
        reservations = self.ec2.describe_instances(
            Filters=[{"Name": "instance-id", "Values": [vm_cid]}]
        )["Reservations"]
        return next((i for r in reservations for i in r["Instances"]), None)

    def volume(self, disk_cid: str) -> dict | None:
        found = self.ec2.describe_volumes(Filters=[{"Name": "volume-id", "Values": [disk_cid]}])["Volumes"]
        return found[0] if found else None

    def volume_ids(self) -> set[str]:
        return {v["VolumeId"] for v in self.ec2.describe_volumes()["Volumes"]}

    def disk_size_mib(self, disk_cid: str) -> int:
        return self.volume(disk_cid)["Size"] * 1024

    def vm_exists(self, vm_cid: str) -> bool:
        instance = self.instance(vm_cid)
        return instance is not None and instance["State"]["Name"] not in ("terminated", "shutting-down")

    def disk_attached_to(self, disk_cid: str) -> str | None:
        volume = self.volume(disk_cid)
        for attachment in (volume or {}).get("Attachments") or []:
            if attachment.get("State") in ("attached", "attaching"):
                return attachment["InstanceId"]
        return None

    @property
    def tags_stemcells(self) -> bool:  # type: ignore[override]
        """stemcell_args() is a light stemcell: its AMI is tagged, as the official CPI tags it,
        only when this account owns it (moto's seeded one; a real account's public AMI not)."""
        owned = self.ec2.describe_images(Owners=["self"])["Images"]
        return any(image["ImageId"] == self.ami_id for image in owned)

    def stemcell_tags(self, stemcell_cid: str) -> dict[str, str]:
        image_id = stemcell_cid.removesuffix(" light")
        image = self.ec2.describe_images(ImageIds=[image_id])["Images"][0]
        return {tag["Key"]: tag["Value"] for tag in image.get("Tags") or []}

    def offered_resources(self, vm_cloud_properties: dict[str, Any]) -> dict[str, int]:
        (described,) = self.ec2.describe_instance_types(InstanceTypes=[vm_cloud_properties["instance_type"]])[
            "InstanceTypes"]
        return {"cpu": described["VCpuInfo"]["DefaultVCpus"], "ram": described["MemoryInfo"]["SizeInMiB"],
                "ephemeral_disk": vm_cloud_properties["ephemeral_disk"]["size"]}

    def settings(self, vm_cid: str) -> dict:
        """The agent settings the VM boots with (its user-data)."""
        import base64

        data = self.ec2.describe_instance_attribute(InstanceId=vm_cid, Attribute="userData")["UserData"]["Value"]
        return json.loads(base64.b64decode(data))

    def leftovers(self) -> dict[str, list[str]]:
        now = moto_env.inventory(self.ec2)
        found = {}
        for kind, ids in now.items():
            extra = ids - self.baseline.get(kind, set())
            if kind == "volumes":
                extra -= self.emulator_volumes
            if extra:
                found[kind] = sorted(extra)
        return found

    def cleanup(self) -> None:
        try:
            left = self.leftovers()
            if left.get("instances"):
                self.ec2.terminate_instances(InstanceIds=left["instances"])
            for image_id in left.get("images", []):
                self.ec2.deregister_image(ImageId=image_id)
            for snapshot_id in left.get("snapshots", []):
                self.ec2.delete_snapshot(SnapshotId=snapshot_id)
            for volume_id in left.get("volumes", []):
                volume = self.volume(volume_id)
                if volume and volume.get("State") == "available":
                    self.ec2.delete_volume(VolumeId=volume_id)
        finally:
            if self.server is not None:
                self.server.stop()


def make(tmp_path_factory) -> AwsTarget:
    workdir = tmp_path_factory.mktemp("aws-moto")
    server = moto_env.MotoServer(workdir / "moto_server.log")
    try:
        account = moto_env.seed(server.url)
        config_path = account.write_config(workdir / "cpi.json")
        target = AwsTarget(
            config_path,
            ec2=account.ec2(),
            subnet_id=account.subnet_id,
            subnet_cidr=moto_env.SUBNET_CIDR,
            zone=moto_env.ZONE,
            region=moto_env.REGION,
            ami_id=account.ami_id,
        )
    except BaseException:
        server.stop()
        raise
    target.server = server
    target.account = account
    return target
