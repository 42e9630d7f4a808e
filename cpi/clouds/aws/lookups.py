"""Describe one instance, volume or image by id, turning EC2's "not found" into the cpi
error BOSH expects (or None where absence is an answer, not an error)."""

from __future__ import annotations

from typing import Any, Literal, overload

from cpi.cids import DiskCid, VmCid
from cpi.errors import DiskNotFound, VMNotFound

from . import errors
from .session import Aws

#: Instance states in which the VM is gone for every purpose but has_vm's history.
GONE = ("terminated",)


@overload
def instance(aws: Aws, vm_cid: VmCid, *, missing_ok: Literal[False] = False) -> dict[str, Any]: ...
@overload
def instance(aws: Aws, vm_cid: VmCid, *, missing_ok: bool) -> dict[str, Any] | None: ...
def instance(aws: Aws, vm_cid: VmCid, *, missing_ok: bool = False) -> dict[str, Any] | None:
    """The instance, or VMNotFound (None with missing_ok) when EC2 does not know it or it
    has terminated (EC2 keeps terminated instances visible for about an hour)."""
    response = _described(aws, "DescribeInstances", InstanceIds=[vm_cid])
    found = next((i for r in response.get("Reservations", []) for i in r.get("Instances", [])), None)
    if found is None or found["State"]["Name"] in GONE:
        if missing_ok:
            return None
        raise VMNotFound(f"VM '{vm_cid}' not found")
    return found


@overload
def volume(aws: Aws, disk_cid: DiskCid, *, missing_ok: Literal[False] = False) -> dict[str, Any]: ...
@overload
def volume(aws: Aws, disk_cid: DiskCid, *, missing_ok: bool) -> dict[str, Any] | None: ...
def volume(aws: Aws, disk_cid: DiskCid, *, missing_ok: bool = False) -> dict[str, Any] | None:
    found = next(iter(_described(aws, "DescribeVolumes", VolumeIds=[disk_cid]).get("Volumes", [])), None)
    if found is None or found.get("State") in ("deleting", "deleted"):
        if missing_ok:
            return None
        raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)
    return found


def image(aws: Aws, image_id: str) -> dict[str, Any] | None:
    return next(iter(_described(aws, "DescribeImages", ImageIds=[image_id]).get("Images", [])), None)


def _described(aws: Aws, operation: str, **params: Any) -> dict[str, Any]:
    """EC2's answer to a Describe* of one id; an empty answer when EC2 says it does not
    know the id (an error, not an empty list, for a malformed or unknown id)."""
    try:
        return aws.ec2(operation, **params)
    except Exception as exc:
        if errors.is_not_found(exc):
            return {}
        raise


def attachment(volume_doc: dict[str, Any], vm_cid: VmCid | None = None) -> dict[str, Any] | None:
    """The volume's attachment (to `vm_cid`, if given) that is not already detached."""
    for item in volume_doc.get("Attachments") or []:
        if item.get("State") in ("detached",):
            continue
        if vm_cid is None or item.get("InstanceId") == vm_cid:
            return item
    return None
