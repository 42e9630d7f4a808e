"""Stemcells: light ones (an AMI per region) and heavy ones (a raw root image).

Heavy stemcells used to need the CPI to run on EC2, to attach a volume and dd the image
onto it (aws-cpi #134: impossible under create-env from a laptop). Here the image goes
straight into an EBS snapshot through the EBS direct APIs (StartSnapshot, PutSnapshotBlock,
CompleteSnapshot), from anywhere, and RegisterImage turns the snapshot into an AMI. Blocks
that are all zeros are skipped (a fresh snapshot reads as zeros), so a 5 GiB image with
1 GiB of data uploads 1 GiB; blocks go up in parallel over one connection pool.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import math
import tarfile
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import IO, Any

from cpi import waits
from cpi.cids import StemcellCid
from cpi.errors import CloudError
from cpi.models import CallContext, gib
from cpi.validation import parse

from . import errors, ids, lookups, tags
from .job_config import AwsProperties
from .props import StemcellCloudProperties
from .session import Aws

log = logging.getLogger("cpi.clouds.aws")

#: Snapshots, images and copies take minutes.
IMAGE_WAIT = waits.Schedule(first=1.0, factor=2.0, cap=15.0)

#: EBS direct APIs write 512 KiB blocks, and only whole ones.
BLOCK_SIZE = 512 * 1024
_ZERO_BLOCK = bytes(BLOCK_SIZE)
GIB = 1024**3
UPLOAD_THREADS = 16
#: Blocks read ahead of the uploads (bounds memory to ~16 MiB).
IN_FLIGHT = UPLOAD_THREADS * 2
#: Minutes EBS keeps an unfinished snapshot before failing it.
SNAPSHOT_TIMEOUT_MINUTES = 60
LIGHT_SUFFIX = " light"


class Stemcells:
    def __init__(self, aws: Aws, properties: AwsProperties, context: CallContext):
        self.aws = aws
        self.properties = properties
        self.context = context

    def create(self, image_path: str, cloud_properties: dict, stemcell_tags: dict[str, str]) -> StemcellCid:
        props = parse(StemcellCloudProperties, cloud_properties, "stemcell cloud_properties",
                      strict=self.context.strict)
        if props.unknown_keys:
            log.info("stemcell cloud_properties not used by the aws cloud: %s", ", ".join(props.unknown_keys))
        wanted_tags = self._tags(props, stemcell_tags)
        if props.is_light:
            return self._light(props, wanted_tags)
        if not image_path:
            raise CloudError("create_stemcell: no image and no `ami` in cloud_properties (neither heavy nor light)")
        return self._heavy(Path(image_path), props, wanted_tags)

    # ------------------------------------------------------------ light

    def _light(self, props: StemcellCloudProperties, wanted_tags: dict[str, str]) -> StemcellCid:
        region = self.properties.signing_region
        ami = (props.ami or {}).get(region)
        if not ami:
            raise CloudError(
                f"light stemcell has no AMI for region {region} "
                f"(it has: {', '.join(sorted(props.ami or {})) or 'none'})"
            )
        image = lookups.image(self.aws, ami)
        if image is None:
            raise CloudError(f"light stemcell: AMI {ami} not found in {region} (or not shared with this account)")
        encrypted = self.properties.encrypted if props.encrypted is None else props.encrypted
        if not encrypted:
            log.info("light stemcell: %s", ami)
            if wanted_tags:
                self._tag_own_image(ami, wanted_tags)
            return StemcellCid(f"{ami}{LIGHT_SUFFIX}")
        kms = props.kms_key_arn or self.properties.kms_key_arn
        params: dict[str, Any] = {
            "SourceImageId": ami,
            "SourceRegion": region,
            "Name": f"BOSH-{uuid.uuid4()}",
            "Description": _description(props, f"encrypted copy of {ami}"),
            "Encrypted": True,
            "ClientToken": str(uuid.uuid4()),
        }
        if kms:
            params["KmsKeyId"] = kms
        specs = tags.specifications(wanted_tags, ("image", "snapshot"))
        if specs:
            params["TagSpecifications"] = specs
        image_id = self.aws.ec2("CopyImage", **params)["ImageId"]
        log.info("copying %s encrypted as %s", ami, image_id)
        try:
            self._wait_image(image_id)
        except BaseException:
            self._deregister_quietly(image_id)
            raise
        return StemcellCid(image_id)

    def _tag_own_image(self, ami: str, wanted_tags: dict[str, str]) -> None:
        """A light stemcell's AMI gets the tags, as the official CPI gives them, but only
        when this account owns it: tagging a shared or public AMI is refused by EC2, and is
        not this account's to do. One request tells (DescribeImages of our own images)."""
        owned = self.aws.ec2("DescribeImages", Owners=["self"], Filters=[{"Name": "image-id", "Values": [ami]}])
        if not owned.get("Images"):
            log.info("light stemcell: AMI %s belongs to another account (shared or public): not tagged (%s)",
                     ami, ", ".join(sorted(wanted_tags)))
            return
        self.aws.ec2("CreateTags", Resources=[ami], Tags=tags.api(wanted_tags))
        log.info("tagged AMI %s with %d tag(s)", ami, len(wanted_tags))

    def _tags(self, props: StemcellCloudProperties, env_tags: dict[str, str]) -> dict[str, str]:
        """env's tags, under the stemcell's `tags`; the job's `stemcell.tags`, when set, in
        place of the stemcell's (the official CPI merges that section over cloud_properties)."""
        defaults = self.properties.stemcell
        own = defaults.tags if defaults is not None and defaults.tags is not None else props.tags
        return tags.clean({**(env_tags or {}), **own})

    # ------------------------------------------------------------ heavy

    def _heavy(self, image_path: Path, props: StemcellCloudProperties, wanted_tags: dict[str, str]) -> StemcellCid:
        if props.virtualization_type == "paravirtual":
            raise CloudError("create_stemcell: virtualization_type paravirtual: no current EC2 instance type runs "
                             "paravirtual images (nor would kernel_id give it a kernel), so this CPI makes hvm "
                             "images only: use an hvm stemcell")
        if not image_path.is_file():
            raise CloudError(f"stemcell image '{image_path}' does not exist or is not a file")
        encrypted = self.properties.encrypted if props.encrypted is None else props.encrypted
        kms = props.kms_key_arn or self.properties.kms_key_arn
        snapshot_id = image_id = None
        try:
            with _root_image(image_path) as (stream, size):
                volume_gib = max(math.ceil(size / GIB), gib(props.disk))
                start: dict[str, Any] = {
                    "VolumeSize": volume_gib,
                    "ClientToken": str(uuid.uuid4()),
                    "Timeout": SNAPSHOT_TIMEOUT_MINUTES,
                    "Description": _description(props, "stemcell root image"),
                }
                if encrypted:
                    start["Encrypted"] = True
                    if kms:
                        start["KmsKeyArn"] = kms
                if wanted_tags:
                    start["Tags"] = tags.api(wanted_tags)
                started = self.aws.call("ebs", "StartSnapshot", **start)
                snapshot_id = started["SnapshotId"]
                if started.get("BlockSize") not in (None, BLOCK_SIZE):
                    log.info("EBS reports block size %s; writing %d-byte blocks as the API requires",
                             started.get("BlockSize"), BLOCK_SIZE)
                log.info("uploading %s (%d bytes) into snapshot %s (%d GiB)", image_path, size, snapshot_id, volume_gib)
                written, total = self._upload(snapshot_id, stream)
            log.info("wrote %d of %d blocks (the rest are zeros)", written, total)
            self.aws.call("ebs", "CompleteSnapshot", SnapshotId=snapshot_id, ChangedBlocksCount=written)
            self._wait_snapshot(snapshot_id)
            image_id = self._register(snapshot_id, props, wanted_tags)
            self._wait_image(image_id)
        except BaseException:
            log.warning("heavy stemcell upload failed; removing what it made")
            if image_id:
                self._deregister_quietly(image_id)
            if snapshot_id:
                self._delete_snapshot_quietly(snapshot_id)
            raise
        log.info("registered stemcell image %s from snapshot %s", image_id, snapshot_id)
        return StemcellCid(image_id)

    def _upload(self, snapshot_id: str, stream: IO[bytes]) -> tuple[int, int]:
        """PutSnapshotBlock for every non-zero block, UPLOAD_THREADS at a time; the first
        failure stops the reading and is raised."""
        slots = threading.BoundedSemaphore(IN_FLIGHT)
        pending: set[Future] = set()
        written = index = 0

        def put(block_index: int, data: bytes) -> None:
            try:
                checksum = base64.b64encode(hashlib.sha256(data).digest()).decode()
                self.aws.call(
                    "ebs", "PutSnapshotBlock", SnapshotId=snapshot_id, BlockIndex=block_index, BlockData=data,
                    DataLength=len(data), Checksum=checksum, ChecksumAlgorithm="SHA256",
                )
            finally:
                slots.release()

        with ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="put-block") as pool:
            while True:
                data = _read_block(stream)
                if data is None:
                    break
                if data != _ZERO_BLOCK:
                    slots.acquire()
                    failed = [f for f in pending if f.done() and f.exception() is not None]
                    if failed:
                        slots.release()
                        break
                    # drop finished uploads; a failure stays until it is seen
                    pending = {f for f in pending if not (f.done() and f.exception() is None)}
                    pending.add(pool.submit(put, index, data))
                    written += 1
                index += 1
            done, not_done = wait(pending, return_when=FIRST_EXCEPTION)
            failure = next((f.exception() for f in done if f.exception() is not None), None)
            if failure is not None:
                for future in not_done:
                    future.cancel()
                raise failure
        return written, index

    def _register(self, snapshot_id: str, props: StemcellCloudProperties, wanted_tags: dict[str, str]) -> str:
        params: dict[str, Any] = {
            "Name": f"BOSH-{uuid.uuid4()}",
            "Description": _description(props, "BOSH stemcell"),
            "Architecture": props.architecture,
            "RootDeviceName": props.root_device_name,
            "BlockDeviceMappings": [
                {
                    "DeviceName": props.root_device_name,
                    "Ebs": {"SnapshotId": snapshot_id, "DeleteOnTermination": True, "VolumeType": "gp3"},
                }
            ],
            "VirtualizationType": props.virtualization_type,
            "EnaSupport": True,
            "SriovNetSupport": "simple",
        }
        if props.boot_mode:
            params["BootMode"] = props.boot_mode
        specs = tags.specifications(wanted_tags, ("image",))
        if specs:
            params["TagSpecifications"] = specs
        return self.aws.ec2("RegisterImage", idempotent=False, **params)["ImageId"]

    def _wait_snapshot(self, snapshot_id: str) -> None:
        def check() -> waits.Check:
            try:
                found = self.aws.ec2("DescribeSnapshots", SnapshotIds=[snapshot_id]).get("Snapshots", [])
            except Exception as exc:
                if errors.is_not_found(exc):
                    return waits.Check(False, "not visible yet")
                raise
            state = found[0]["State"] if found else "not visible yet"
            if state == "error":
                raise CloudError(f"snapshot {snapshot_id} failed: {found[0].get('StateMessage', 'no reason given')}")
            return waits.Check(state == "completed", state)

        self._until(check, f"snapshot {snapshot_id} to complete")

    def _wait_image(self, image_id: str) -> None:
        def check() -> waits.Check:
            image = lookups.image(self.aws, image_id)
            state = image.get("State", "unknown") if image else "not visible yet"
            if state in ("failed", "invalid", "error", "deregistered"):
                reason = (image or {}).get("StateReason", {}).get("Message", "no reason given")
                raise CloudError(f"image {image_id} is {state}: {reason}")
            return waits.Check(state == "available", state)

        self._until(check, f"image {image_id} to be available")

    def _until(self, check: Callable[[], waits.Check], what: str) -> None:
        """A stemcell's wait: bounded by image_wait_timeout, its first look at once."""
        self.aws.channel.until(check, what=what, timeout=self.properties.image_wait_timeout,
                               setting="image_wait_timeout", schedule=IMAGE_WAIT, check_first=True)

    # ------------------------------------------------------------ delete

    def delete(self, stemcell_cid: StemcellCid) -> None:
        """Light: nothing of ours to delete. Otherwise deregister the image and delete the
        snapshots it was made of; a missing image is success."""
        if stemcell_cid.endswith(LIGHT_SUFFIX):
            log.info("light stemcell %s: nothing to delete (the AMI is not ours)", stemcell_cid)
            return
        if not ids.is_image(stemcell_cid):
            log.info("stemcell %s not found (not an AMI ID): nothing to delete", stemcell_cid)
            return
        image = lookups.image(self.aws, stemcell_cid)
        if image is None:
            log.info("stemcell %s not found: nothing to delete", stemcell_cid)
            return
        snapshots = [m["Ebs"]["SnapshotId"] for m in image.get("BlockDeviceMappings", [])
                     if m.get("Ebs", {}).get("SnapshotId")]
        try:
            self.aws.ec2("DeregisterImage", ImageId=stemcell_cid)
        except Exception as exc:
            if not errors.is_not_found(exc):
                raise
        for snapshot_id in snapshots:
            try:
                self.aws.ec2("DeleteSnapshot", SnapshotId=snapshot_id)
            except Exception as exc:
                if errors.is_not_found(exc):
                    continue
                if errors.code(exc) == "InvalidSnapshot.InUse":
                    log.warning("snapshot %s of %s is used by another image; kept", snapshot_id, stemcell_cid)
                    continue
                raise
        log.info("deleted stemcell %s and %d snapshot(s)", stemcell_cid, len(snapshots))

    def _deregister_quietly(self, image_id: str) -> None:
        try:
            image = lookups.image(self.aws, image_id)
            self.aws.ec2("DeregisterImage", ImageId=image_id)
            for mapping in (image or {}).get("BlockDeviceMappings", []):
                if mapping.get("Ebs", {}).get("SnapshotId"):
                    self._delete_snapshot_quietly(mapping["Ebs"]["SnapshotId"])
        except Exception as exc:  # noqa: BLE001 - cleanup after a failure: report, raise the original
            log.error("could not deregister %s: %s; remove it by hand", image_id, errors.summary(exc))

    def _delete_snapshot_quietly(self, snapshot_id: str) -> None:
        try:
            self.aws.ec2("DeleteSnapshot", SnapshotId=snapshot_id)
        except Exception as exc:  # noqa: BLE001 - cleanup after a failure: report, raise the original
            if not errors.is_not_found(exc):
                log.error("could not delete snapshot %s: %s; remove it by hand", snapshot_id, errors.summary(exc))


def _description(props: StemcellCloudProperties, fallback: str) -> str:
    if props.name:
        return f"{props.name} {props.version}" if props.version is not None else props.name
    return fallback


def _read_block(stream: IO[bytes]) -> bytes | None:
    """The next 512 KiB, zero-padded at the end of the image; None when there is no more."""
    chunks, size = [], 0
    while size < BLOCK_SIZE:
        chunk = stream.read(BLOCK_SIZE - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if not size:
        return None
    data = b"".join(chunks)
    return data if size == BLOCK_SIZE else data + bytes(BLOCK_SIZE - size)


@contextlib.contextmanager
def _root_image(path: Path) -> Iterator[tuple[IO[bytes], int]]:
    """The raw root disk image and its size: `root.img` inside the stemcell's `image`
    tarball (aws-raw), streamed without unpacking to disk; or `path` itself when it is
    not a tarball (a raw image)."""
    if not tarfile.is_tarfile(path):
        with open(path, "rb") as handle:
            yield handle, path.stat().st_size
        return
    with tarfile.open(path, mode="r|*") as archive:
        for member in archive:
            if member.isfile() and member.name.removeprefix("./") in ("root.img", "disk.raw"):
                stream = archive.extractfile(member)
                if stream is None:
                    break
                yield stream, member.size
                return
    raise CloudError(f"stemcell image '{path}' holds no root.img")
