"""What bosh-aws-cpi does with a VM, disk, snapshot or stemcell it did not make: the EC2
calls and lookups of its methods, made here with botocore, for the tests of a rollback
(tests/aws/test_switching.py).

Read from cloudfoundry/bosh-aws-cpi-release (f8ae83b), src/bosh_aws_cpi/lib/cloud/aws/:
cloud_v1.rb, cloud_v2.rb, cloud_core.rb, instance.rb, stemcell_finder.rb, stemcell.rb,
light_stemcell.rb, block_device_manager.rb, instance_type_info.rb,
sdk_helpers/volume_manager.rb; not run (it needs Ruby gems this machine cannot install).
In short:

- a VM, disk or snapshot is found by its cid alone (the instance, volume or snapshot ID),
  with no tag; a stemcell cid ending in " light" names an AMI it must not delete;
- attach_disk takes the first of /dev/sdf../dev/sdp that no block device mapping of the
  instance names, and hands the agent that device, or on an instance type whose EBS
  volumes are NVMe only (DescribeInstanceTypes: NvmeSupport `required`) the volume's
  /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol... path;
- detach_disk finds the volume among the instance's block device mappings;
- delete_vm terminates the instance and waits: what it leaves is what EC2 does not delete
  with the instance (volumes and interfaces not marked DeleteOnTermination);
- delete_stemcell deregisters the AMI, waits, and deletes the snapshots its block device
  mappings name;
- snapshot_disk tags the snapshot with the director's metadata, `director`,
  `instance_index`, `instance_name` (job/instance_id), `device` and `Name`;
- set_vm_metadata tags the instance with the director's metadata (`name` becomes `Name`;
  without it `job/index`, or `compiling/<job>`) and every EBS volume of the instance (root,
  ephemeral and attached persistent disks) with the same; set_disk_metadata tags the volume
  as given; create_vm and create_disk tag with the manifest's tags only (env.bosh.tags and
  the vm_type's or disk_type's), never with the director's UUID or the agent's id.
"""

from __future__ import annotations

import time
from typing import Any

NVME_BY_ID = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_"
DEVICE_LETTERS = "fghijklmnop"


def _wait(check, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"official CPI: {what} did not happen within {timeout} s"
        time.sleep(0.1)


def _code(exc: Exception) -> str:
    return getattr(exc, "response", {}).get("Error", {}).get("Code", "")


class OfficialAwsCpi:
    """The official CPI's calls, on a botocore EC2 client."""

    def __init__(self, ec2):
        self.ec2 = ec2

    # -- lookups by cid
    def instance(self, vm_cid: str) -> dict[str, Any] | None:
        try:
            reservations = self.ec2.describe_instances(InstanceIds=[vm_cid])["Reservations"]
        except Exception as exc:
            if _code(exc).startswith("InvalidInstanceID"):
                return None
            raise
        return next((i for r in reservations for i in r["Instances"]), None)

    def has_vm(self, vm_cid: str) -> bool:
        found = self.instance(vm_cid)
        return found is not None and found["State"]["Name"] != "terminated"

    def volume(self, disk_cid: str) -> dict[str, Any] | None:
        try:
            return self.ec2.describe_volumes(VolumeIds=[disk_cid])["Volumes"][0]
        except Exception as exc:
            if _code(exc).startswith("InvalidVolume"):
                return None
            raise

    def has_disk(self, disk_cid: str) -> bool:
        return self.volume(disk_cid) is not None

    def get_disks(self, vm_cid: str) -> list[str]:
        """Every EBS volume of the instance (root and ephemeral included, as there)."""
        instance = self.instance(vm_cid)
        assert instance is not None
        return [m["Ebs"]["VolumeId"] for m in instance.get("BlockDeviceMappings", []) if m.get("Ebs")]

    def stemcell_image(self, stemcell_cid: str) -> dict[str, Any]:
        """StemcellFinder: " light" stripped, the AMI must exist (create_vm and
        delete_stemcell both start here)."""
        image_id = stemcell_cid.removesuffix(" light") if stemcell_cid.endswith(" light") else stemcell_cid
        images = self.ec2.describe_images(Filters=[{"Name": "image-id", "Values": [image_id]}])["Images"]
        assert images, f"official CPI: could not find AMI '{image_id}' (stemcell '{stemcell_cid}')"
        return images[0]

    # -- disks
    def requires_nvme(self, instance_type: str) -> bool:
        found = self.ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"]
        return bool(found) and found[0].get("EbsInfo", {}).get("NvmeSupport") == "required"

    def device_path(self, device_name: str, instance_type: str, volume_id: str) -> str:
        """The hint attach_disk hands the agent for a volume at `device_name`."""
        if self.requires_nvme(instance_type):
            return NVME_BY_ID + volume_id.replace("-", "", 1)
        return device_name

    def attach_disk(self, vm_cid: str, disk_cid: str) -> str:
        instance = self.instance(vm_cid)
        assert instance is not None, f"official CPI: instance {vm_cid} not found"
        names = {m.get("DeviceName") for m in instance.get("BlockDeviceMappings", [])}
        device = next((f"/dev/sd{c}" for c in DEVICE_LETTERS if f"/dev/sd{c}" not in names), None)
        assert device, "official CPI: Instance has too many disks attached"
        self.ec2.attach_volume(InstanceId=vm_cid, VolumeId=disk_cid, Device=device)
        attached = _wait(lambda: next((a for a in (self.volume(disk_cid) or {}).get("Attachments", [])
                                       if a["InstanceId"] == vm_cid and a["State"] == "attached"), None),
                         f"volume {disk_cid} attached to {vm_cid}")
        return self.device_path(attached["Device"], instance["InstanceType"], disk_cid)

    def detach_disk(self, vm_cid: str, disk_cid: str) -> None:
        if not self.has_disk(disk_cid):
            return  # "Disk not found while trying to detach it": logged, not raised
        instance = self.instance(vm_cid)
        assert instance is not None, f"official CPI: instance {vm_cid} not found"
        mapping = next((m for m in instance.get("BlockDeviceMappings", [])
                        if m.get("Ebs", {}).get("VolumeId") == disk_cid), None)
        assert mapping is not None, f"official CPI: DiskNotAttached: {disk_cid} is not attached to {vm_cid}"
        self.ec2.detach_volume(InstanceId=vm_cid, VolumeId=disk_cid, Device=mapping["DeviceName"], Force=False)
        _wait(lambda: not any(a["InstanceId"] == vm_cid and a["State"] != "detached"
                              for a in (self.volume(disk_cid) or {}).get("Attachments", [])),
              f"volume {disk_cid} detached from {vm_cid}")

    def delete_disk(self, disk_cid: str) -> None:
        self.ec2.delete_volume(VolumeId=disk_cid)
        _wait(lambda: self.volume(disk_cid) is None or self.volume(disk_cid)["State"] == "deleted",
              f"volume {disk_cid} deleted")

    @staticmethod
    def _api_tags(tags: dict[str, Any]) -> list[dict[str, str]]:
        """TagManager.format_tags: nil keys and values dropped, keys to 127 and values to 255."""
        return [{"Key": str(k)[:127], "Value": str(v)[:255]} for k, v in tags.items()
                if k is not None and v is not None]

    def set_vm_metadata(self, vm_cid: str, metadata: dict[str, Any]) -> None:
        tags = {str(k): v for k, v in metadata.items()}
        if tags.get("name"):
            tags["Name"] = tags.pop("name")
        elif tags.get("job") and tags.get("index") is not None:
            tags["Name"] = f"{tags['job']}/{tags['index']}"
        elif tags.get("compiling"):
            tags["Name"] = f"compiling/{tags['compiling']}"
        self.ec2.create_tags(Resources=[vm_cid], Tags=self._api_tags(tags))
        for volume_id in self.get_disks(vm_cid):
            self.ec2.create_tags(Resources=[volume_id], Tags=self._api_tags(tags))

    def set_disk_metadata(self, disk_cid: str, metadata: dict[str, Any]) -> None:
        self.ec2.create_tags(Resources=[disk_cid], Tags=self._api_tags(metadata))

    def snapshot_disk(self, disk_cid: str, metadata: dict[str, Any]) -> str:
        volume = self.volume(disk_cid)
        assert volume is not None, f"official CPI: volume {disk_cid} not found"
        device = next((a["Device"] for a in volume.get("Attachments") or []), None)
        tags = self.snapshot_tags(metadata, device)
        snapshot = self.ec2.create_snapshot(VolumeId=disk_cid, Description=tags["Name"], TagSpecifications=[
            {"ResourceType": "snapshot", "Tags": self._api_tags(tags)}])
        return snapshot["SnapshotId"]

    @staticmethod
    def snapshot_tags(metadata: dict[str, Any], device: str | None) -> dict[str, str]:
        """The tags snapshot_disk gives a snapshot of a volume attached at `device`."""
        tags = {str(k): v for k, v in metadata.items()}
        name = "/".join(str(metadata.get(k, "")) for k in ("deployment", "job", "index"))
        if device:
            name += "/" + device.rsplit("/", 1)[-1]
            tags["device"] = device
        tags.update({"director": metadata.get("director_name"), "instance_index": str(metadata.get("index")),
                     "instance_name": f"{metadata['job']}/{metadata['instance_id']}", "Name": name})
        for dropped in ("director_name", "index", "job"):
            tags.pop(dropped)
        return {k[:127]: str(v)[:255] for k, v in tags.items() if v is not None}

    def delete_snapshot(self, snapshot_cid: str) -> None:
        try:
            self.ec2.delete_snapshot(SnapshotId=snapshot_cid)
        except Exception as exc:
            if _code(exc) != "InvalidSnapshot.NotFound":
                raise

    # -- VMs and stemcells
    def delete_vm(self, vm_cid: str) -> None:
        self.ec2.terminate_instances(InstanceIds=[vm_cid])
        _wait(lambda: not self.has_vm(vm_cid), f"instance {vm_cid} terminated")

    def delete_stemcell(self, stemcell_cid: str) -> None:
        image = self.stemcell_image(stemcell_cid)
        if stemcell_cid.endswith(" light"):
            return  # LightStemcell#delete: nothing
        snapshots = [m["Ebs"]["SnapshotId"] for m in image.get("BlockDeviceMappings", [])
                     if m.get("Ebs", {}).get("SnapshotId")]
        self.ec2.deregister_image(ImageId=image["ImageId"])
        _wait(lambda: not self.ec2.describe_images(
            Filters=[{"Name": "image-id", "Values": [image["ImageId"]]}])["Images"], f"image {image['ImageId']} gone")
        for snapshot_id in snapshots:
            self.ec2.delete_snapshot(SnapshotId=snapshot_id)
