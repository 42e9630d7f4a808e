"""The AWS account as an operator sees it: read-only describes, filtered to what BOSH made
(cpi/clouds/inventory.py's BOSH_TAGS: this CPI's `agent_id` and `director_uuid`, the
director's `director`, which set_vm_metadata gives the official CPI's VMs too), and one
resource by its id whatever its tags (`cpi show`, as has_vm finds it).

Disks are every volume, each with its role: a VM's root and ephemeral volumes (deleted with
it) apart from persistent disks. Snapshots are the director's (snapshot_disk's, tagged with
its metadata), never those behind the account's own AMIs (a stemcell's, 1,302 of them in one
account)."""

from __future__ import annotations

from typing import Any

from cpi.cids import DiskCid, StemcellCid, VmCid
from cpi.clouds.inventory import BOSH_TAGS, Offer, Resource, is_bosh, read_so_far

from . import errors, lookups
from .lookups import GONE
from .session import Aws

#: Ids an EC2 filter takes at once (its limit is 200 values).
FILTER_VALUES = 200


def _tags(doc: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in doc.get("Tags") or []}


def _when(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else (str(value) if value else None)


def _pages(aws: Aws, operation: str, key: str, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        response = aws.ec2(operation, **params)
        found.extend(response.get(key) or [])
        read_so_far(key, len(found))
        token = response.get("NextToken")
        if not token:
            return found
        params["NextToken"] = token


def _vm(i: dict[str, Any]) -> Resource:
    return Resource("vm", i["InstanceId"], i["State"]["Name"], _when(i.get("LaunchTime")), _tags(i),
                    {"instance_type": i.get("InstanceType"), "image": i.get("ImageId"),
                     "zone": (i.get("Placement") or {}).get("AvailabilityZone"),
                     "private_ip": i.get("PrivateIpAddress"), "subnet": i.get("SubnetId")})


def _roles(aws: Aws, volumes: list[dict[str, Any]]) -> dict[str, str]:
    """The role (cpi.clouds.inventory.ROLES) of each attached volume, as get_disks tells
    them, from the block device mappings of the instances they are attached to (a page of
    ids at a time): the volume at the instance's root device is its root, one deleted with
    the instance its ephemeral disk, the rest persistent disks. A volume in no mapping
    (detached) is a persistent disk."""
    ids = sorted({a["InstanceId"] for v in volumes for a in [lookups.attachment(v)] if a and a.get("InstanceId")})
    found: dict[str, str] = {}
    for start in range(0, len(ids), FILTER_VALUES):
        for reservation in _pages(aws, "DescribeInstances", "Reservations",
                                  Filters=[{"Name": "instance-id", "Values": ids[start:start + FILTER_VALUES]}]):
            for i in reservation.get("Instances") or []:
                root = i.get("RootDeviceName") or ""
                for m in i.get("BlockDeviceMappings") or []:
                    # `mapped`, not `ebs`: a name of a service is read as its client by tests/release/test_lean.py
                    mapped, device = m.get("Ebs") or {}, m.get("DeviceName") or "\0"
                    if mapped.get("VolumeId"):
                        found[mapped["VolumeId"]] = ("root" if root and (device == root or root.startswith(device))
                                                     else "ephemeral" if mapped.get("DeleteOnTermination")
                                                     else "persistent")
    return found


def _disk(v: dict[str, Any], roles: dict[str, str]) -> Resource:
    return Resource("disk", v["VolumeId"], v.get("State", "?"), _when(v.get("CreateTime")), _tags(v),
                    {"role": roles.get(v["VolumeId"], "persistent"), "size_gib": v.get("Size"),
                     "type": v.get("VolumeType"), "zone": v.get("AvailabilityZone"),
                     "attached_to": next((a.get("InstanceId") for a in v.get("Attachments") or []), None)})


def _snapshot(s: dict[str, Any]) -> Resource:
    return Resource("snapshot", s["SnapshotId"], s.get("State", "?"), _when(s.get("StartTime")), _tags(s),
                    {"volume": s.get("VolumeId"), "size_gib": s.get("VolumeSize"), "description": s.get("Description")})


def _stemcell(i: dict[str, Any]) -> Resource:
    return Resource("stemcell", i["ImageId"], i.get("State", "?"), i.get("CreationDate"), _tags(i),
                    {"name": i.get("Name"), "architecture": i.get("Architecture")})


def _owned_images(aws: Aws) -> list[dict[str, Any]]:
    return aws.ec2("DescribeImages", Owners=["self"]).get("Images") or []


def inventory(aws: Aws, kind: str) -> list[Resource]:
    bosh = [{"Name": "tag-key", "Values": list(BOSH_TAGS)}]
    if kind == "vms":
        reservations = _pages(aws, "DescribeInstances", "Reservations", Filters=bosh)
        return [_vm(i) for r in reservations for i in r.get("Instances") or [] if i["State"]["Name"] not in GONE]
    if kind == "disks":
        volumes = [v for v in _pages(aws, "DescribeVolumes", "Volumes")
                   if v.get("State") not in ("deleting", "deleted")]
        roles = _roles(aws, volumes)
        return [_disk(v, roles) for v in volumes]
    if kind == "snapshots":
        behind_images = {m["Ebs"]["SnapshotId"] for i in _owned_images(aws) for m in i.get("BlockDeviceMappings") or []
                         if (m.get("Ebs") or {}).get("SnapshotId")}
        return [_snapshot(s) for s in _pages(aws, "DescribeSnapshots", "Snapshots", OwnerIds=["self"], Filters=bosh)
                if s["SnapshotId"] not in behind_images and is_bosh(_tags(s))]
    return [_stemcell(i) for i in _owned_images(aws)]


def show(aws: Aws, kind: str, cid: str) -> Resource | None:
    """One resource by its id, whoever made it and however it is tagged (None: not there)."""
    if kind == "vms":
        found = lookups.instance(aws, VmCid(cid), missing_ok=True)
        return _vm(found) if found else None
    if kind == "disks":
        volume = lookups.volume(aws, DiskCid(cid), missing_ok=True)
        return _disk(volume, _roles(aws, [volume])) if volume else None
    if kind == "snapshots":
        try:
            snapshots = aws.ec2("DescribeSnapshots", SnapshotIds=[cid]).get("Snapshots") or []
        except Exception as exc:
            if errors.is_not_found(exc):
                return None
            raise
        return _snapshot(snapshots[0]) if snapshots else None
    if cid.endswith(" light"):
        return light_stemcell(aws, StemcellCid(cid))
    image = lookups.image(aws, cid)
    return _stemcell(image) if image else None


def light_stemcell(aws: Aws, stemcell_cid: StemcellCid) -> Resource | None:
    """A light stemcell's cid ("ami-... light", as create_stemcell returns it): the AMI it
    names, someone else's (not in the owned images `inventory` lists)."""
    image_id = stemcell_cid.removesuffix(" light")
    found = lookups.image(aws, image_id)
    if found is None:
        return None
    return Resource("stemcell", stemcell_cid, found.get("State", "?"), found.get("CreationDate"), _tags(found),
                    {"light": True, "image": image_id, "name": found.get("Name"),
                     "architecture": found.get("Architecture"), "owner": found.get("OwnerId")})


def available(aws: Aws, offer: str) -> list[Offer]:
    if offer == "images":
        return [Offer("image", i.get("Name") or i["ImageId"], i["ImageId"], {"state": i.get("State")})
                for i in _owned_images(aws)]
    if offer == "sizes":
        return sorted((Offer("size", t["InstanceType"], None,
                             {"vcpus": (t.get("VCpuInfo") or {}).get("DefaultVCpus"),
                              "memory_mib": (t.get("MemoryInfo") or {}).get("SizeInMiB")})
                       for t in _pages(aws, "DescribeInstanceTypes", "InstanceTypes")), key=lambda o: o.name)
    if offer == "zones":
        return [Offer("zone", z["ZoneName"], z.get("ZoneId"), {"state": z.get("State")})
                for z in aws.ec2("DescribeAvailabilityZones").get("AvailabilityZones") or []]
    return [Offer("network", _tags(s).get("Name") or s["SubnetId"], s["SubnetId"],
                  {"cidr": s.get("CidrBlock"), "zone": s.get("AvailabilityZone"), "vpc": s.get("VpcId")})
            for s in _pages(aws, "DescribeSubnets", "Subnets")]
