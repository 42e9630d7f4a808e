"""Persistent disks (EBS volumes) and their snapshots.

Device names: persistent disks take the first free /dev/sdf../dev/sdp. On instance types
that expose EBS as NVMe (Nitro), /dev/sdX does not exist inside the VM, so the hint is the
stable /dev/disk/by-id path built from the volume ID; whether a type is NVMe comes from
DescribeInstanceTypes (a static family list went stale in the Ruby CPI, aws-cpi #196,
bosh-agent #192), with a family heuristic only if that call is not allowed.

A volume whose old VM is still going away answers VolumeInUse; attach_disk and
delete_disk keep trying (volume_in_use_timeout) while the holder is terminating or the
attachment is detaching, and fail at once when a live VM holds it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Collection
from typing import Any

from cpi import waits
from cpi.cids import DiskCid, SnapshotCid, VmCid
from cpi.errors import (
    CloudError,
    DiskNotAttached,
    DiskNotFound,
    NotSupported,
    VMNotFound,
)
from cpi.locks import locked
from cpi.models import CallContext, gib, snapshot_tags
from cpi.validation import parse

from . import errors, ids, lookups, tags
from .job_config import AwsProperties
from .props import DiskCloudProperties
from .session import Aws

log = logging.getLogger("cpi.clouds.aws")

#: Volumes are created, attached, detached and modified in a second or a few.
VOLUME_WAIT = waits.Schedule(first=0.25, factor=2.0, cap=3.0)

DEVICE_LETTERS = "fghijklmnop"
NVME_BY_ID = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_"
_DEVICE = re.compile(r"^/dev/(?:sd|xvd)([a-z])")
#: Instance states in which a VM will never let go of a volume by itself.
_ALIVE = ("pending", "running", "stopping", "stopped")
#: ModifyVolume refusals the director should answer by copying the disk instead.
_CANNOT_MODIFY = ("VolumeModificationRateExceeded", "IncorrectModificationState", "UnsupportedOperation")


class Disks:
    def __init__(self, aws: Aws, properties: AwsProperties, context: CallContext):
        self.aws = aws
        self.properties = properties
        self.context = context  # its director_uuid is tagged on what create makes, so `cpi orphans` finds it

    # ------------------------------------------------------------ create / delete

    def create(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        if vm_cid is not None:
            ids.instance(vm_cid)
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties", strict=self.context.strict)
        if vm_cid is not None:
            zone = lookups.instance(self.aws, vm_cid)["Placement"]["AvailabilityZone"]
        else:
            zone = self.properties.default_availability_zone or self._any_zone()
        encrypted = self.properties.encrypted if props.encrypted is None else props.encrypted
        params: dict[str, Any] = {
            "AvailabilityZone": zone,
            "Size": gib(size),
            "VolumeType": props.type,
            "ClientToken": str(uuid.uuid4()),
        }
        if props.iops is not None:
            params["Iops"] = props.iops
        if props.throughput is not None:
            params["Throughput"] = props.throughput
        if encrypted:
            params["Encrypted"] = True
            kms = props.kms_key_arn or self.properties.kms_key_arn
            if kms:
                params["KmsKeyId"] = kms
        director_uuid = self.context.director_uuid
        origin = {"director_uuid": director_uuid} if director_uuid else {}
        wanted = tags.clean({**origin, **props.tags, **({"Name": props.name} if props.name else {})})
        specs = tags.specifications(wanted, ("volume",))
        if specs:
            params["TagSpecifications"] = specs
        volume = self.aws.ec2("CreateVolume", **params)
        disk_cid = DiskCid(volume["VolumeId"])
        if volume.get("State") != "available":
            try:
                self._wait_volume(disk_cid, "available", f"volume {disk_cid} to be created")
            except BaseException:
                log.warning("volume %s did not become available; deleting it", disk_cid)
                self._delete_quietly(disk_cid)
                raise
        log.info("created %s: %d GiB %s in %s%s", disk_cid, params["Size"], props.type, zone,
                 " (encrypted)" if encrypted else "")
        return disk_cid

    def _any_zone(self) -> str:
        response = self.aws.ec2("DescribeAvailabilityZones", Filters=[{"Name": "state", "Values": ["available"]}])
        zones = sorted(z["ZoneName"] for z in response.get("AvailabilityZones", [])
                       if z.get("ZoneType", "availability-zone") == "availability-zone")
        if not zones:
            raise CloudError("create_disk without a VM: no availability zone found; set aws.default_availability_zone")
        log.info("create_disk without a VM: using %s (set aws.default_availability_zone to choose)", zones[0])
        return zones[0]

    def _delete_quietly(self, disk_cid: DiskCid) -> None:
        try:
            self.aws.ec2("DeleteVolume", VolumeId=disk_cid)
        except Exception as exc:  # noqa: BLE001 - the original failure is what gets raised
            log.error("could not delete volume %s: %s; delete it by hand", disk_cid, errors.summary(exc))

    def delete(self, disk_cid: DiskCid) -> None:
        if not ids.is_volume(disk_cid):
            log.info("disk %s not found (not a volume ID): nothing to delete", disk_cid)
            return
        try:
            self.aws.ec2("DeleteVolume", VolumeId=disk_cid, also=self._in_use_by_dying_vm(disk_cid))
        except Exception as exc:
            if errors.is_not_found(exc):
                log.info("disk %s not found: nothing to delete", disk_cid)
                return
            if errors.code(exc) == "VolumeInUse":
                raise CloudError(f"disk '{disk_cid}' is still attached ({errors.message(exc)}); "
                                 "detach it first") from None
            raise
        log.info("deleted %s", disk_cid)

    def exists(self, disk_cid: DiskCid) -> bool:
        return ids.is_volume(disk_cid) and lookups.volume(self.aws, disk_cid, missing_ok=True) is not None

    # ------------------------------------------------------------ size and type

    def resize(self, disk_cid: DiskCid, new_size: int) -> None:
        volume = lookups.volume(self.aws, ids.volume(disk_cid))
        current, wanted = volume["Size"], gib(new_size)
        if wanted == current:
            log.info("disk %s is already %d GiB", disk_cid, current)
            return
        if wanted < current:
            raise NotSupported(f"disk '{disk_cid}' cannot shrink from {current} GiB to {wanted} GiB")
        self._modify(disk_cid, {"Size": wanted})

    def update(self, disk_cid: DiskCid, new_size: int, cloud_properties: dict) -> DiskCid | None:
        """In place where EBS can (size up, type, IOPS, throughput: ModifyVolume);
        NotSupported where it cannot (shrinking, encryption), so the director copies."""
        ids.volume(disk_cid)
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties", strict=self.context.strict)
        volume = lookups.volume(self.aws, disk_cid)
        encrypted = self.properties.encrypted if props.encrypted is None else props.encrypted
        if bool(volume.get("Encrypted")) != encrypted:
            raise NotSupported(f"disk '{disk_cid}': encryption cannot change in place")
        kms = props.kms_key_arn or (self.properties.kms_key_arn if encrypted else None)
        if encrypted and kms and volume.get("KmsKeyId") and volume["KmsKeyId"] != kms:
            raise NotSupported(f"disk '{disk_cid}': the KMS key cannot change in place")
        wanted = gib(new_size)
        if wanted < volume["Size"]:
            raise NotSupported(f"disk '{disk_cid}' cannot shrink from {volume['Size']} GiB to {wanted} GiB")
        changes: dict[str, Any] = {}
        if wanted > volume["Size"]:
            changes["Size"] = wanted
        if props.type != volume.get("VolumeType"):
            changes["VolumeType"] = props.type
        if props.iops is not None and props.iops != volume.get("Iops"):
            changes["Iops"] = props.iops
        if props.throughput is not None and props.throughput != volume.get("Throughput"):
            changes["Throughput"] = props.throughput
        if changes:
            self._modify(disk_cid, changes)
        else:
            log.info("disk %s already matches", disk_cid)
        new_tags = tags.clean({**props.tags, **({"Name": props.name} if props.name else {})})
        if new_tags:
            self.aws.ec2("CreateTags", Resources=[disk_cid], Tags=tags.api(new_tags))
        return None

    def _modify(self, disk_cid: DiskCid, changes: dict[str, Any]) -> None:
        try:
            response = self.aws.ec2("ModifyVolume", VolumeId=disk_cid, **changes)
        except Exception as exc:
            if errors.code(exc) in _CANNOT_MODIFY or "modification rate" in errors.message(exc).lower():
                raise NotSupported(f"disk '{disk_cid}' cannot be modified now: {errors.summary(exc)}") from None
            if errors.is_not_found(exc):
                raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False) from None
            raise
        state = (response.get("VolumeModification") or {}).get("ModificationState")
        log.info("modifying %s: %s", disk_cid, ", ".join(f"{k}={v}" for k, v in changes.items()))
        if state in ("optimizing", "completed"):
            return

        def check() -> waits.Check:
            found = self.aws.ec2("DescribeVolumesModifications", VolumeIds=[disk_cid]).get("VolumesModifications", [])
            modification: dict[str, Any] = max(found, key=lambda m: str(m.get("StartTime", "")), default={})
            state = modification.get("ModificationState", "unknown")
            if state == "failed":
                reason = modification.get("StatusMessage", "no reason given")
                raise CloudError(f"modifying disk '{disk_cid}' failed: {reason}")
            # `optimizing`: the new size is usable already; the rest is EBS rebalancing
            return waits.Check(state in ("optimizing", "completed"), state)

        self.aws.channel.until(check, what=f"volume {disk_cid} modification",
                               timeout=self.properties.volume_wait_timeout,
                               setting="volume_wait_timeout", schedule=VOLUME_WAIT)

    # ------------------------------------------------------------ attach / detach

    def attach(self, vm_cid: VmCid, disk_cid: DiskCid) -> str:
        ids.instance(vm_cid)
        ids.volume(disk_cid)
        with locked(self.properties.lock_directory(), vm_cid, timeout=self.properties.volume_wait_timeout):
            return self._attach(vm_cid, disk_cid)

    def _attach(self, vm_cid: VmCid, disk_cid: DiskCid) -> str:
        instance = lookups.instance(self.aws, vm_cid)
        nvme = self._requires_nvme(instance["InstanceType"])
        for mapping in instance.get("BlockDeviceMappings", []):
            if mapping.get("Ebs", {}).get("VolumeId") == disk_cid:
                log.info("disk %s is already attached to %s as %s", disk_cid, vm_cid, mapping["DeviceName"])
                return _hint(mapping["DeviceName"], disk_cid, nvme)
        taken: set[str] = set()
        holder: dict[str, Any] = {}
        while True:
            device = _free_device(instance, taken)
            try:
                response = self.aws.ec2(
                    "AttachVolume", VolumeId=disk_cid, InstanceId=vm_cid, Device=device,
                    also=self._in_use_by_dying_vm(disk_cid, holder),
                )
                break
            except Exception as exc:
                error_code = errors.code(exc) or ""
                if error_code == "InvalidParameterValue" and "already in use" in errors.message(exc):
                    # another process (on another host, or EC2's view lagging) took it
                    log.info("%s on %s is taken; trying the next device", device, vm_cid)
                    taken.add(device)
                    continue
                if error_code.startswith("InvalidVolume.NotFound") or error_code == "InvalidVolumeID.Malformed":
                    raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False) from None
                if error_code.startswith("InvalidInstanceID"):
                    raise VMNotFound(f"VM '{vm_cid}' not found") from None
                if error_code == "InvalidVolume.ZoneMismatch":
                    raise CloudError(
                        f"disk '{disk_cid}' is in another availability zone than VM '{vm_cid}' "
                        f"({instance['Placement']['AvailabilityZone']}): {errors.message(exc)}"
                    ) from None
                if error_code == "VolumeInUse" and holder.get("instance") == vm_cid:
                    # attached here already: an earlier attempt whose answer was lost
                    device = holder.get("device") or device
                    log.info("disk %s turned out attached to %s already", disk_cid, vm_cid)
                    response = {}
                    break
                if error_code == "VolumeInUse":
                    held_by = holder.get("instance") or "another VM"
                    raise CloudError(
                        f"disk '{disk_cid}' is attached to {held_by} ({holder.get('state', 'alive')}); "
                        "detach it there first"
                    ) from None
                raise
        if response.get("State") != "attached":
            self._wait_attachment(disk_cid, vm_cid, attached=True)
        log.info("attached %s to %s at %s", disk_cid, vm_cid, device)
        return _hint(device, disk_cid, nvme)

    def _in_use_by_dying_vm(self, disk_cid: DiskCid, holder: dict[str, Any] | None = None) -> Callable[[str], bool]:
        """An `also` predicate for VolumeInUse: transient while the volume is detaching or its
        holder is terminating, for at most volume_in_use_timeout; permanent (fail now) when a
        live VM holds it. Only this wait is bounded so: the request's throttling keeps the
        whole retry budget (a storm of several directors once made delete_disk give up on
        RequestLimitExceeded after volume_in_use_timeout)."""
        holder = {} if holder is None else holder
        deadline = time.monotonic() + self.properties.volume_in_use_timeout

        def transient(error_code: str) -> bool:
            if error_code != "VolumeInUse" or time.monotonic() > deadline:
                return False
            volume = lookups.volume(self.aws, disk_cid, missing_ok=True)
            current = lookups.attachment(volume) if volume else None
            if current is None:
                return True  # let go since the error: try again
            holder["instance"] = current.get("InstanceId")
            holder["device"] = current.get("Device")
            if current.get("State") == "detaching":
                holder["state"] = "detaching"
                return True
            instance = lookups.instance(self.aws, current["InstanceId"], missing_ok=True)
            holder["state"] = instance["State"]["Name"] if instance else "terminated"
            if instance is None or holder["state"] not in _ALIVE:
                log.info("disk %s is still held by %s (%s); waiting for it to let go",
                         disk_cid, holder["instance"], holder["state"])
                return True
            return False

        return transient

    def detach(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        ids.instance(vm_cid)
        if not ids.is_volume(disk_cid):
            log.info("disk %s not found (not a volume ID): nothing to detach", disk_cid)
            return
        with locked(self.properties.lock_directory(), vm_cid, timeout=self.properties.volume_wait_timeout):
            self._detach(vm_cid, disk_cid)

    def _detach(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        try:
            response = self.aws.ec2("DetachVolume", VolumeId=disk_cid, InstanceId=vm_cid)
        except Exception as exc:
            error_code = errors.code(exc) or ""
            if error_code.startswith("InvalidVolume.NotFound") or error_code == "InvalidVolumeID.Malformed":
                log.info("disk %s not found: nothing to detach", disk_cid)
                return
            if error_code.startswith("InvalidInstanceID"):
                raise VMNotFound(f"VM '{vm_cid}' not found") from None
            if error_code == "IncorrectState" and "detaching" in errors.message(exc):
                log.info("disk %s is already detaching from %s", disk_cid, vm_cid)
                response = {}
            elif (error_code in ("IncorrectState", "InvalidAttachment.NotFound")
                  and getattr(exc, "after_unknown_outcome", False)):
                log.info("detach of %s from %s: an earlier attempt, whose answer was lost, was carried out",
                         disk_cid, vm_cid)
                response = {}
            elif error_code in ("IncorrectState", "InvalidAttachment.NotFound"):
                raise DiskNotAttached(f"disk '{disk_cid}' is not attached to VM '{vm_cid}'") from None
            else:
                raise
        if response.get("State") != "detached":
            self._wait_attachment(disk_cid, vm_cid, attached=False)
        log.info("detached %s from %s", disk_cid, vm_cid)

    def _wait_attachment(self, disk_cid: DiskCid, vm_cid: VmCid, *, attached: bool) -> None:
        def check() -> waits.Check:
            volume = lookups.volume(self.aws, disk_cid, missing_ok=True)
            if volume is None:
                if attached:
                    raise DiskNotFound(f"disk '{disk_cid}' disappeared while attaching", ok_to_retry=False)
                return waits.Check(True, "gone")
            current = lookups.attachment(volume, vm_cid)
            state = current.get("State", "detached") if current else "detached"
            return waits.Check(state == ("attached" if attached else "detached"), state)

        what = f"volume {disk_cid} to {'attach to' if attached else 'detach from'} {vm_cid}"
        self.aws.channel.until(check, what=what, timeout=self.properties.volume_wait_timeout,
                               setting="volume_wait_timeout",
                               schedule=VOLUME_WAIT,
                               history=self.properties.history(f"volume {'attached' if attached else 'detached'}"))

    def _requires_nvme(self, instance_type: str) -> bool:
        if not self.properties.enable_describe_instance_types:
            log.info("NVMe for %s decided from its family name (enable_describe_instance_types is false)",
                     instance_type)
            return _nvme_by_family(instance_type)
        try:
            response = self.aws.ec2("DescribeInstanceTypes", InstanceTypes=[instance_type])
        except Exception as exc:
            if errors.code(exc) not in errors.PERMISSION_CODES and errors.code(exc) != "InvalidInstanceType":
                raise
            guess = _nvme_by_family(instance_type)
            log.warning("DescribeInstanceTypes for %s failed (%s); guessing %s from the family name",
                        instance_type, errors.code(exc), "NVMe" if guess else "no NVMe")
            return guess
        found = response.get("InstanceTypes") or []
        if not found:
            return _nvme_by_family(instance_type)
        return found[0].get("EbsInfo", {}).get("NvmeSupport") == "required"

    def set_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        ids.volume(disk_cid)
        wanted = tags.clean(metadata)
        if not wanted:
            return
        try:
            self.aws.ec2("CreateTags", Resources=[disk_cid], Tags=tags.api(wanted))
        except Exception as exc:
            if errors.is_not_found(exc) or errors.code(exc) == "InvalidID":
                raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False) from None
            raise

    # ------------------------------------------------------------ snapshots

    def snapshot(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        """CreateSnapshot with description `deployment/job/index/<device>` and the director's
        metadata as tags, with the keys the official CPI adds (models.snapshot_tags), `device`
        and `Name`. It returns once EBS has the point-in-time copy (state `pending`);
        waiting for `completed` would hold the director for the whole upload to S3."""
        ids.volume(disk_cid)
        volume = lookups.volume(self.aws, disk_cid)
        current = lookups.attachment(volume)
        device = current.get("Device") if current else None
        parts = [metadata.get("deployment"), metadata.get("job"), metadata.get("index")]
        if device:
            parts.append(device.rsplit("/", 1)[-1])
        description = "/".join(str(p) for p in parts if p not in (None, ""))
        wanted = snapshot_tags(metadata)
        if device:
            wanted["device"] = device
        if description:
            wanted["Name"] = description
        params: dict[str, Any] = {"VolumeId": disk_cid, "Description": description or f"snapshot of {disk_cid}"}
        specs = tags.specifications(tags.clean(wanted), ("snapshot",))
        if specs:
            params["TagSpecifications"] = specs
        try:
            snapshot = self.aws.ec2("CreateSnapshot", idempotent=False, **params)
        except Exception as exc:
            if errors.is_not_found(exc):
                raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False) from None
            raise
        log.info("snapshot %s of %s: %s", snapshot["SnapshotId"], disk_cid, params["Description"])
        return SnapshotCid(snapshot["SnapshotId"])

    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        if not ids.is_snapshot(snapshot_cid):
            log.info("snapshot %s not found (not a snapshot ID): nothing to delete", snapshot_cid)
            return
        try:
            self.aws.ec2("DeleteSnapshot", SnapshotId=snapshot_cid)
        except Exception as exc:
            if errors.is_not_found(exc):
                log.info("snapshot %s not found: nothing to delete", snapshot_cid)
                return
            if errors.code(exc) == "InvalidSnapshot.InUse":
                raise CloudError(f"snapshot '{snapshot_cid}' is in use ({errors.message(exc)})") from None
            raise
        log.info("deleted snapshot %s", snapshot_cid)

    def _wait_volume(self, disk_cid: DiskCid, state_wanted: str, what: str) -> None:
        def check() -> waits.Check:
            try:
                response = self.aws.ec2("DescribeVolumes", VolumeIds=[disk_cid])
            except Exception as exc:
                if errors.is_not_found(exc):
                    return waits.Check(False, "not visible yet")
                raise
            state = response["Volumes"][0]["State"]
            if state == "error":
                raise CloudError(f"volume {disk_cid} went into state error")
            return waits.Check(state == state_wanted, state)

        self.aws.channel.until(check, what=what, timeout=self.properties.volume_wait_timeout,
                               setting="volume_wait_timeout",
                               schedule=VOLUME_WAIT, history=self.properties.history(f"volume {state_wanted}"))


def _hint(device: str, disk_cid: DiskCid, nvme: bool) -> str:
    if nvme:
        return NVME_BY_ID + disk_cid.replace("-", "", 1)
    return device


def _free_device(instance: dict[str, Any], taken: Collection[str] = frozenset()) -> str:
    used = {hit.group(1) for d in taken if (hit := _DEVICE.match(d))}
    for mapping in instance.get("BlockDeviceMappings", []):
        match = _DEVICE.match(mapping.get("DeviceName") or "")
        if match:
            used.add(match.group(1))
    for letter in DEVICE_LETTERS:
        if letter not in used:
            return f"/dev/sd{letter}"
    raise CloudError(
        f"VM '{instance['InstanceId']}' has no free device for another disk (/dev/sdf to /dev/sdp are all in use)"
    )


def _nvme_by_family(instance_type: str) -> bool:
    """Fallback when DescribeInstanceTypes is not allowed: Nitro (NVMe) is every family of
    generation 5 and later, plus the Nitro members of older generations."""
    family = instance_type.split(".", 1)[0]
    match = re.match(r"^[a-z]+(\d+)", family)
    if match and int(match.group(1)) >= 5:
        return True
    return family in ("t3", "t3a", "t4g", "a1", "i3en", "z1d") or instance_type == "p3dn.24xlarge"
