"""Plan mode on AWS (cpi.plan): a mutating request is never sent as such.

EC2 is asked the same request with `DryRun=True` instead: EC2 checks that these
credentials may make it (and, for some operations, the parameters) and answers
`DryRunOperation` without changing anything — so a plan also proves the IAM policy. The
verdict goes with the mutation into the plan; a refusal is recorded and the plan goes on
(so one plan lists every permission missing), any other error is the real request's.
Then the CPI answers the request itself, with the parts of a real answer the code reads
next and placeholder ids for what would be made, and the call goes on as it would.

ELB, ELBv2 and the EBS direct API have no dry run: their mutations are planned unchecked,
and say so; so is a request that names a resource the plan only imagines (EC2 would
answer "not found").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import audited

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.clouds.aws")

ALLOWED = "allowed (EC2 dry run)"
#: EC2's answers to a dry run whose credentials lack the permission.
DENIED_CODES = {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure"}


def send(plan: Plan, retrying: Callable[[Callable[[], str]], str], method: Any, service: str, operation: str,
         params: dict[str, Any]) -> dict[str, Any]:
    """Answer the mutation `operation` of the call's `plan` without making it. `method` is
    botocore's (untyped) for it; `retrying` sends its dry run as the session sends a read."""
    verdict = _dry_run(plan, retrying, method, service, operation, params)
    if operation not in audited.SKIPPED:  # not one line per block of a stemcell upload
        log.info("plan: %s:%s not sent (%s)", service, operation, verdict)
    answer = _answer(plan, operation, params)
    with plan.permission(verdict):
        audited.after(service, operation, params, answer, plan=plan)
    return answer


def _dry_run(plan: Plan, retrying: Callable[[Callable[[], str]], str], method: Any, service: str, operation: str,
             params: dict[str, Any]) -> str:
    model = method.__self__.meta.service_model.operation_model(operation)
    if "DryRun" not in (model.input_shape.members if model.input_shape else {}):
        return f"not checked: {service}:{operation} has no dry run"
    imagined = plan.names_placeholder(params)
    if imagined is not None:
        return f"not checked: it names {imagined}, which the plan would make"
    from botocore.exceptions import ClientError

    def dry() -> str:
        try:
            method(**params, DryRun=True)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if error.get("Code") == "DryRunOperation":
                return ALLOWED
            raise
        return "not checked: EC2 answered the dry run as if it were real"  # an EC2 look-alike without dry runs

    try:
        return retrying(dry)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), error.get("Message", "")
        if code in DENIED_CODES:
            return f"denied: {code}: {message}"
        # any other answer is the one the real request would get (an AMI or a subnet that is
        # not there, a volume already gone): the cloud code meets it as it would
        log.info("plan: EC2's dry run of %s:%s answered %s: the call meets that answer", service, operation, code)
        raise


def _first(values: Any) -> dict[str, Any]:
    return values[0] if isinstance(values, list) and values and isinstance(values[0], dict) else {}


def _answer(plan: Plan, operation: str, p: dict[str, Any]) -> dict[str, Any]:
    """What the code reads of each answer, with placeholders for what would be made."""
    made = plan.placeholder
    if operation == "RunInstances":
        interface = _first(p.get("NetworkInterfaces"))
        return {"Instances": [{
            "InstanceId": made("i-"), "State": {"Name": "pending"}, "ImageId": p.get("ImageId"),
            "InstanceType": p.get("InstanceType"), "Placement": p.get("Placement") or {},
            "SubnetId": p.get("SubnetId") or interface.get("SubnetId"),
            "PrivateIpAddress": p.get("PrivateIpAddress") or interface.get("PrivateIpAddress"),
            "NetworkInterfaces": [], "BlockDeviceMappings": [], "Tags": [],
        }]}
    if operation == "TerminateInstances":
        return {"TerminatingInstances": [{"InstanceId": i, "CurrentState": {"Name": "shutting-down"}}
                                         for i in p.get("InstanceIds") or []]}
    if operation == "CreateVolume":
        return {"VolumeId": made("vol-"), "Size": p.get("Size"), "AvailabilityZone": p.get("AvailabilityZone"),
                "VolumeType": p.get("VolumeType"), "State": "creating", "Encrypted": bool(p.get("Encrypted"))}
    if operation in ("AttachVolume", "DetachVolume"):
        return {"VolumeId": p.get("VolumeId"), "InstanceId": p.get("InstanceId"), "Device": p.get("Device"),
                "State": "attaching" if operation == "AttachVolume" else "detaching"}
    if operation == "ModifyVolume":
        return {"VolumeModification": {"VolumeId": p.get("VolumeId"), "ModificationState": "modifying",
                                       "TargetSize": p.get("Size"), "TargetVolumeType": p.get("VolumeType"),
                                       "TargetIops": p.get("Iops"), "TargetThroughput": p.get("Throughput")}}
    if operation == "CreateSnapshot":
        return {"SnapshotId": made("snap-"), "VolumeId": p.get("VolumeId"), "State": "pending"}
    if operation == "StartSnapshot":
        return {"SnapshotId": made("snap-"), "VolumeSize": p.get("VolumeSize"), "BlockSize": 512 * 1024,
                "Status": "pending"}
    if operation == "PutSnapshotBlock":
        return {"Checksum": p.get("Checksum"), "ChecksumAlgorithm": p.get("ChecksumAlgorithm")}
    if operation == "CompleteSnapshot":
        return {"Status": "completed"}
    if operation in ("RegisterImage", "CopyImage"):
        return {"ImageId": made("ami-")}
    if operation == "CreateNetworkInterface":
        return {"NetworkInterface": {"NetworkInterfaceId": made("eni-"),
                                     "SubnetId": p.get("SubnetId"), "PrivateIpAddress": p.get("PrivateIpAddress"),
                                     "Status": "available"}}
    if operation == "AssociateAddress":
        return {"AssociationId": made("eipassoc-")}
    return {}
