"""The AWS account as an operator sees it: read-only describes, filtered to what a BOSH
CPI made (instances carry the `agent_id` tag from their create request; volumes,
snapshots and images made by a CPI carry BOSH tags or the director's metadata)."""

from __future__ import annotations

from typing import Any

from cpi.clouds.inventory import Offer, Resource, read_so_far

from .lookups import GONE


def _tags(doc: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in doc.get("Tags") or []}


def _when(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else (str(value) if value else None)


def _pages(aws, operation: str, key: str, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        response = aws.ec2(operation, **params)
        found.extend(response.get(key) or [])
        read_so_far(key, len(found))
        token = response.get("NextToken")
        if not token:
            return found
        params["NextToken"] = token


def inventory(aws, kind: str) -> list[Resource]:
    if kind == "vms":
        reservations = _pages(aws, "DescribeInstances", "Reservations",
                              Filters=[{"Name": "tag-key", "Values": ["agent_id"]}])
        return [Resource("vm", i["InstanceId"], i["State"]["Name"], _when(i.get("LaunchTime")), _tags(i),
                         {"instance_type": i.get("InstanceType"), "image": i.get("ImageId"),
                          "zone": (i.get("Placement") or {}).get("AvailabilityZone"),
                          "private_ip": i.get("PrivateIpAddress"), "subnet": i.get("SubnetId")})
                for r in reservations for i in r.get("Instances") or [] if i["State"]["Name"] not in GONE]
    if kind == "disks":
        return [Resource("disk", v["VolumeId"], v.get("State", "?"), _when(v.get("CreateTime")), _tags(v),
                         {"size_gib": v.get("Size"), "type": v.get("VolumeType"), "zone": v.get("AvailabilityZone"),
                          "attached_to": next((a.get("InstanceId") for a in v.get("Attachments") or []), None)})
                for v in _pages(aws, "DescribeVolumes", "Volumes") if v.get("State") not in ("deleting", "deleted")]
    if kind == "snapshots":
        return [Resource("snapshot", s["SnapshotId"], s.get("State", "?"), _when(s.get("StartTime")), _tags(s),
                         {"volume": s.get("VolumeId"), "size_gib": s.get("VolumeSize"),
                          "description": s.get("Description")})
                for s in _pages(aws, "DescribeSnapshots", "Snapshots", OwnerIds=["self"])]
    return [Resource("stemcell", i["ImageId"], i.get("State", "?"), i.get("CreationDate"), _tags(i),
                     {"name": i.get("Name"), "architecture": i.get("Architecture")})
            for i in aws.ec2("DescribeImages", Owners=["self"]).get("Images") or []]


def light_stemcell(aws, stemcell_cid: str) -> Resource | None:
    """A light stemcell's cid ("ami-... light", as create_stemcell returns it): the AMI it
    names, someone else's (not in the owned images `inventory` lists)."""
    from . import lookups

    image_id = stemcell_cid.removesuffix(" light")
    found = lookups.image(aws, image_id)
    if found is None:
        return None
    return Resource("stemcell", stemcell_cid, found.get("State", "?"), found.get("CreationDate"), _tags(found),
                    {"light": True, "image": image_id, "name": found.get("Name"),
                     "architecture": found.get("Architecture"), "owner": found.get("OwnerId")})


def available(aws, offer: str) -> list[Offer]:
    if offer == "images":
        return [Offer("image", i.get("Name") or i["ImageId"], i["ImageId"], {"state": i.get("State")})
                for i in aws.ec2("DescribeImages", Owners=["self"]).get("Images") or []]
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
