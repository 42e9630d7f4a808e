"""The audit lines of AWS requests (cpi.audit): every request goes through session.Aws._send,
which hands each successful mutating one here. What a line says of a request is read from
its parameters and its answer; a mutating operation not in the table still gets a line
(action: the operation's name)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cpi import audit

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.aws")

#: Prefixes of operations that change nothing.
READ_ONLY = ("Describe", "Get", "List", "AssumeRole")
#: Mutations too many and too small to audit one by one (the snapshot they fill is audited).
SKIPPED = {"PutSnapshotBlock"}


def _tags(tags: list[Any] | None) -> dict[Any, Any]:  # as the caller sent them: anything
    return {t.get("Key"): t.get("Value") for t in tags or [] if isinstance(t, dict)}


def _spec_tags(params: dict[str, Any]) -> dict[Any, Any]:
    found: dict[Any, Any] = {}
    for spec in params.get("TagSpecifications") or []:
        found.update(_tags(spec.get("Tags")))
    return found


def _first(values: Any) -> Any:
    return values[0] if isinstance(values, list) and values else None


def lines(operation: str, params: dict[str, Any], response: Any) -> list[tuple[str, str, Any, Any, Any]]:
    """(action, resource_type, resource_id, old, new) for each line one request makes."""
    p, r = params, response if isinstance(response, dict) else {}
    if operation == "RunInstances":
        instance = _first(r.get("Instances")) or {}
        interface = _first(p.get("NetworkInterfaces")) or {}
        new = {
            "image_id": p.get("ImageId"), "instance_type": p.get("InstanceType"),
            "availability_zone": (p.get("Placement") or {}).get("AvailabilityZone"),
            "subnet_id": p.get("SubnetId") or interface.get("SubnetId"),
            "private_ip": (p.get("PrivateIpAddress") or interface.get("PrivateIpAddress")
                           or instance.get("PrivateIpAddress")),
            "security_groups": p.get("SecurityGroupIds") or p.get("SecurityGroups") or interface.get("Groups"),
            "tags": _spec_tags(p),
        }
        return [("create", "vm", instance.get("InstanceId"), None, new)]
    if operation == "TerminateInstances":
        states = {i.get("InstanceId"): i for i in r.get("TerminatingInstances") or []}
        return [("delete", "vm", vm, {"state": ((states.get(vm) or {}).get("PreviousState") or {}).get("Name")},
                 {"state": ((states.get(vm) or {}).get("CurrentState") or {}).get("Name")})
                for vm in p.get("InstanceIds") or []]
    if operation == "RebootInstances":
        return [("reboot", "vm", vm, None, {"reboot": "requested"}) for vm in p.get("InstanceIds") or []]
    if operation == "ModifyInstanceAttribute":
        changed = {k: v for k, v in p.items() if k not in ("InstanceId", "DryRun")}
        return [("update", "vm", p.get("InstanceId"), None, changed)]
    if operation == "CreateVolume":
        new = {"size_gib": p.get("Size"), "volume_type": p.get("VolumeType"),
               "availability_zone": p.get("AvailabilityZone"),
               "encrypted": p.get("Encrypted"), "snapshot_id": p.get("SnapshotId"), "tags": _spec_tags(p)}
        return [("create", "disk", r.get("VolumeId"), None, new)]
    if operation == "DeleteVolume":
        return [("delete", "disk", p.get("VolumeId"), {"volume_id": p.get("VolumeId")}, None)]
    if operation == "AttachVolume":
        return [("attach", "disk", p.get("VolumeId"), None, {"vm_cid": p.get("InstanceId"), "device": p.get("Device")})]
    if operation == "DetachVolume":
        return [("detach", "disk", p.get("VolumeId"), {"vm_cid": p.get("InstanceId") or r.get("InstanceId"),
                                                        "device": r.get("Device")}, None)]
    if operation == "ModifyVolume":
        change = r.get("VolumeModification") or {}
        old = {"size_gib": change.get("OriginalSize"), "volume_type": change.get("OriginalVolumeType"),
               "iops": change.get("OriginalIops"), "throughput": change.get("OriginalThroughput")}
        new = {"size_gib": p.get("Size", change.get("TargetSize")),
               "volume_type": p.get("VolumeType", change.get("TargetVolumeType")),
               "iops": p.get("Iops", change.get("TargetIops")),
               "throughput": p.get("Throughput", change.get("TargetThroughput"))}
        return [("resize", "disk", p.get("VolumeId"), {k: v for k, v in old.items() if v is not None},
                 {k: v for k, v in new.items() if v is not None})]
    if operation == "CreateTags":
        kinds = {"i-": "vm", "vol-": "disk", "ami-": "stemcell", "snap-": "snapshot"}
        return [("tag", next((k for prefix, k in kinds.items() if str(res).startswith(prefix)), "resource"), res, None,
                 _tags(p.get("Tags"))) for res in p.get("Resources") or []]
    if operation == "AssociateAddress":
        target = ({"network_interface_id": p["NetworkInterfaceId"]} if p.get("NetworkInterfaceId")
                  else {"vm_cid": p.get("InstanceId")})
        return [("associate", "address", p.get("PublicIp") or p.get("AllocationId"), None,
                 {**target, "association_id": r.get("AssociationId")})]
    if operation == "CreateNetworkInterface":
        interface = r.get("NetworkInterface") or {}
        return [("create", "interface", interface.get("NetworkInterfaceId"), None,
                 {"subnet_id": p.get("SubnetId"), "private_ip": p.get("PrivateIpAddress"),
                  "ipv6": [a.get("Ipv6Address") for a in p.get("Ipv6Addresses") or []],
                  "prefixes": [*(x.get("Ipv4Prefix") for x in p.get("Ipv4Prefixes") or []),
                               *(x.get("Ipv6Prefix") for x in p.get("Ipv6Prefixes") or [])],
                  "mac": interface.get("MacAddress"), "tags": _spec_tags(p)})]
    if operation == "ModifyNetworkInterfaceAttribute":
        changed = {"delete_on_termination": (p.get("Attachment") or {}).get("DeleteOnTermination"),
                   "associate_public_ip": p.get("AssociatePublicIpAddress")}
        return [("update", "interface", p.get("NetworkInterfaceId"), None,
                 {k: v for k, v in changed.items() if v is not None})]
    if operation == "DeleteNetworkInterface":
        interface_id = p.get("NetworkInterfaceId")
        return [("delete", "interface", interface_id, {"network_interface_id": interface_id}, None)]
    if operation == "CreateSnapshot":
        return [("create", "snapshot", r.get("SnapshotId"), None,
                 {"disk_cid": p.get("VolumeId"), "tags": _spec_tags(p)})]
    if operation == "DeleteSnapshot":
        return [("delete", "snapshot", p.get("SnapshotId"), {"snapshot_id": p.get("SnapshotId")}, None)]
    if operation == "StartSnapshot":
        return [("create", "snapshot", r.get("SnapshotId"), None, {"volume_size_gib": p.get("VolumeSize"),
                                                                    "tags": _tags(p.get("Tags"))})]
    if operation == "CompleteSnapshot":
        return [("complete", "snapshot", p.get("SnapshotId"), None, {"changed_blocks": p.get("ChangedBlocksCount")})]
    if operation == "RegisterImage":
        mapping = _first(p.get("BlockDeviceMappings")) or {}
        return [("create", "stemcell", r.get("ImageId"), None,
                 {"name": p.get("Name"), "snapshot_id": (mapping.get("Ebs") or {}).get("SnapshotId")})]
    if operation == "CopyImage":
        return [("create", "stemcell", r.get("ImageId"), None, {"source_image_id": p.get("SourceImageId"),
                                                                "source_region": p.get("SourceRegion"),
                                                                "encrypted": p.get("Encrypted")})]
    if operation == "DeregisterImage":
        return [("delete", "stemcell", p.get("ImageId"), {"image_id": p.get("ImageId")}, None)]
    if operation in ("CreateRoute", "ReplaceRoute"):
        destination = p.get("DestinationCidrBlock") or p.get("DestinationIpv6CidrBlock")
        return [("create" if operation == "CreateRoute" else "replace", "route", p.get("RouteTableId"), None,
                 {"destination": destination, "vm_cid": p.get("InstanceId")})]
    if operation == "RegisterInstancesWithLoadBalancer":
        return [("register", "load_balancer", p.get("LoadBalancerName"), None,
                 {"vm_cids": [i.get("InstanceId") for i in p.get("Instances") or []]})]
    if operation == "RegisterTargets":
        return [("register", "target_group", p.get("TargetGroupArn"), None,
                 {"vm_cids": [t.get("Id") for t in p.get("Targets") or []]})]
    resource = next((v for k, v in p.items() if k.endswith("Id") and isinstance(v, str)), None)
    return [(operation, "resource", resource, None, {k: v for k, v in p.items() if k != "DryRun"})]


def read_only(operation: str) -> bool:
    return operation.startswith(READ_ONLY)


def after(service: str, operation: str, params: dict[str, Any], response: Any, *, plan: Plan | None = None) -> None:
    """Called with each request that succeeded: a line per mutation it made; under `plan`
    (the call's, cpi.plan) with each it withheld, the line going to the plan."""
    if read_only(operation) or operation in SKIPPED or params.get("DryRun"):
        return
    try:
        made = lines(operation, params, response)
    except Exception as exc:  # noqa: BLE001 - an audit line must never fail the CPI call
        log.warning("audit: cannot describe %s:%s (%s); recording it bare", service, operation, type(exc).__name__)
        made = [(operation, "resource", None, None, None)]
    for action, kind, resource, old, new in made:
        audit.record(action, resource, {"old": old, "new": new}, plan=plan, resource_type=kind,
                     request=f"{service}:{operation}")
