"""Persistent disks (Cinder volumes) and their snapshots.

Device names: a persistent disk gets the first free letter from `b` (from `c` with a config
drive attached as a disk); Nova refuses the letters of the flavor's ephemeral and swap disks
and of another attach running at the same time (409), and the next letter is tried. The
hint is `/dev/sdX` for the letter Nova recorded (the agent maps it to vdX/xvdX itself), so a
disk that is already attached answers with the same hint.

A volume still held by a server that is going away (status `detaching`) is waited out by
attach_disk and delete_disk rather than failing the call.
"""

from __future__ import annotations

import logging
import string
import urllib.parse
import uuid
from collections.abc import Callable
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
from cpi.models import gib, snapshot_tags
from cpi.validation import parse

from . import errors, tags
from .props import DiskCloudProperties, OpenStackProperties
from .session import VOLUME_EXTEND_IN_USE_MICROVERSION, OpenStack
from .vms import Vms, _quote
from .waits import history, poll_schedule

log = logging.getLogger("cpi.clouds.openstack")

SERVICE = "block-storage"
LETTERS = string.ascii_lowercase[1:]  # b..z; a is the root disk
#: Attempts at attaching while other attaches to the same VM take the chosen letters.
ATTACH_ATTEMPTS = 8


class Disks:
    def __init__(self, api: OpenStack, properties: OpenStackProperties, vms: Vms):
        self.api = api
        self.properties = properties
        self.vms = vms

    # ------------------------------------------------------------ lookups

    def volume(self, disk_cid: DiskCid) -> dict[str, Any] | None:
        response = self.api.request(SERVICE, "GET", f"/volumes/{_quote(disk_cid)}", ok=(404,))
        if response.status_code == 404:
            return None
        return response.json()["volume"]

    def require(self, disk_cid: DiskCid) -> dict[str, Any]:
        volume = self.volume(disk_cid)
        if volume is None:
            raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)
        return volume

    def _wait(self, disk_cid: DiskCid, what: str, done: Callable[[dict[str, Any]], bool], *, gone_ok: bool = False,
              kind: str | None = None) -> dict[str, Any] | None:
        """Poll the volume until `done(volume)`; an `error*` status aborts. `kind` names the
        transition for cpi.transitions, so the looks come when it usually ends."""

        def check() -> waits.Check:
            volume = self.volume(disk_cid)
            if volume is None:
                if gone_ok:
                    return waits.Check(True, "deleted")
                raise DiskNotFound(f"disk '{disk_cid}' disappeared", ok_to_retry=False)
            status = volume.get("status", "unknown")
            if status.startswith("error"):
                raise CloudError(f"volume {disk_cid} went {status} while waiting for it to {what}")
            return waits.Check(done(volume), status, volume)

        return self.api.channel.until(check, what=f"volume {disk_cid} to {what}", timeout=self.properties.state_timeout,
                                      setting="state_timeout", schedule=poll_schedule(self.properties),
                                      history=history(self.properties, f"volume {kind}") if kind else None)

    # ------------------------------------------------------------ create / delete

    def create(self, size: int, cloud_properties: dict, vm_cid: VmCid | None) -> DiskCid:
        props = parse(DiskCloudProperties, cloud_properties, "disk_type cloud_properties",
                      strict=self.vms.context.strict)
        volume: dict[str, Any] = {
            "size": gib(size),
            "name": props.name or f"volume-{uuid.uuid4()}",
            "description": "BOSH persistent disk",
        }
        if self.vms.context.director_uuid:  # so `cpi orphans` can tell whose it is
            volume["metadata"] = {"director_uuid": self.vms.context.director_uuid}
        volume_type = props.type or self.properties.default_volume_type
        if volume_type:
            volume["volume_type"] = volume_type
        if vm_cid is not None:
            server = self.vms.require(vm_cid)
            zone = server.get("OS-EXT-AZ:availability_zone")
            if zone and not self.properties.ignore_server_availability_zone:
                volume["availability_zone"] = zone
        try:
            created = self.api.create(SERVICE, "/volumes", {"volume": volume}, key="volume",
                                      find=None if props.name else lambda: self._named(volume["name"]))
        except errors.ApiError as exc:
            if exc.status in (400, 404) and volume_type and exc.mentions("type"):
                raise CloudError(f"create_disk: volume type '{volume_type}': {exc.message}") from None
            raise
        disk_cid = DiskCid(created["id"])
        try:
            self._wait(disk_cid, "be available", lambda v: v["status"] == "available", kind="available")
        except BaseException:
            log.warning("volume %s did not become available; deleting it", disk_cid)
            try:
                self.api.delete(SERVICE, f"/volumes/{disk_cid}", ok=(404,))
            except Exception as exc:  # noqa: BLE001 - the original failure is what gets raised
                log.error("could not delete volume %s: %s; delete it by hand", disk_cid, errors.summary(exc))
            raise
        log.info("created volume %s: %d GiB%s%s", disk_cid, volume["size"],
                 f" of type {volume_type}" if volume_type else "",
                 f" in {volume['availability_zone']}" if "availability_zone" in volume else "")
        return disk_cid

    def delete(self, disk_cid: DiskCid) -> None:
        """Delete and wait until Cinder has it gone. A volume still detaching from a server
        that is going away, or with snapshots being deleted, is waited out."""

        def busy(exc: errors.ApiError) -> bool:
            if exc.status != 400:
                return False
            # the volume's own state first: Cinder's refusal names every reason it may have
            # (snapshots among them) whatever the reason is
            volume = self.volume(disk_cid)
            seen["status"] = None if volume is None else volume.get("status")
            # gone by now: the 400 was answered while an earlier attempt (whose answer was
            # lost) was deleting it; sending again gets the 404 that means done
            if volume is None or volume.get("status") in ("detaching", "deleting", "deleted", "creating",
                                                          "attaching"):
                return True
            if exc.mentions("snapshot"):
                snapshots = self.api.get(SERVICE, f"/snapshots?volume_id={_quote(disk_cid)}")["snapshots"]
                return any(s.get("status") == "deleting" for s in snapshots)
            return False

        seen: dict[str, Any] = {}
        try:
            response = self.api.request(SERVICE, "DELETE", f"/volumes/{_quote(disk_cid)}", ok=(404,), also=busy,
                                        budget=self.properties.state_timeout)
        except errors.ApiError as exc:
            if exc.status == 400:
                state = f" (volume status '{seen['status']}')" if seen.get("status") else ""
                raise CloudError(f"disk '{disk_cid}' cannot be deleted{state}: {exc.message}") from None
            raise
        if response.status_code == 404:
            log.info("disk %s not found: nothing to delete", disk_cid)
            return
        self._wait(disk_cid, "be deleted", lambda v: False, gone_ok=True, kind="deleted")
        log.info("deleted volume %s", disk_cid)

    def exists(self, disk_cid: DiskCid) -> bool:
        volume = self.volume(disk_cid)
        return volume is not None and volume.get("status") != "deleted"

    # ------------------------------------------------------------ size

    def resize(self, disk_cid: DiskCid, new_size: int) -> None:
        volume = self.require(disk_cid)
        current, wanted = int(volume["size"]), gib(new_size)
        if wanted == current:
            log.info("disk %s is already %d GiB", disk_cid, current)
            return
        if wanted < current:
            raise NotSupported(f"disk '{disk_cid}' cannot shrink from {current} GiB to {wanted} GiB")
        attached = volume.get("status") == "in-use"
        self.api.post(SERVICE, f"/volumes/{disk_cid}/action", {"os-extend": {"new_size": wanted}},
                      microversion=VOLUME_EXTEND_IN_USE_MICROVERSION if attached else None)
        self._wait(disk_cid, f"grow to {wanted} GiB",
                   lambda v: int(v["size"]) == wanted and v["status"] in ("available", "in-use"))
        log.info("grew disk %s from %d to %d GiB", disk_cid, current, wanted)

    # ------------------------------------------------------------ attach / detach

    def attach(self, vm_cid: VmCid, disk_cid: DiskCid) -> str:
        """Attach at the first free letter. Nova knows the letters of the flavor's ephemeral
        and swap disks and of attaches running at the same time: it refuses those (409) and
        the next letter is tried, so no server lookup is needed up front."""
        attachments = self.vms.attachments(vm_cid)
        for attachment in attachments:
            if attachment.get("volumeId") == disk_cid:
                status = (self.volume(disk_cid) or {}).get("status")
                if _detach_under_way(status):
                    # Nova's record of an attachment that is going (a detach finishing,
                    # maybe another call's), not one to keep: wait for it, then attach
                    log.info("Nova still lists disk %s on %s while Cinder says '%s': waiting for that detach "
                             "to finish", disk_cid, vm_cid, status)
                    self._wait_released(vm_cid, disk_cid)
                    attachments = self.vms.attachments(vm_cid)
                    break
                hint = _hint(attachment.get("device"))
                log.info("disk %s is already attached to %s as %s", disk_cid, vm_cid, hint)
                return hint
        taken = {_letter(a.get("device")) for a in attachments}
        for _attempt in range(ATTACH_ATTEMPTS):
            device = self._free_device(vm_cid, taken)
            try:
                recorded = self.api.create(
                    "compute", f"/servers/{vm_cid}/os-volume_attachments",
                    {"volumeAttachment": {"volumeId": disk_cid, "device": device}}, key="volumeAttachment",
                    find=lambda: self._attachment(vm_cid, disk_cid),
                    also=self._held_by_departing_server(disk_cid), budget=self.properties.state_timeout,
                ).get("device") or device
            except errors.ApiError as exc:
                if exc.status == 404:
                    if exc.mentions("volume"):
                        raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False) from None
                    raise VMNotFound(f"VM '{vm_cid}' not found") from None
                if exc.status == 409 and exc.mentions("device path"):
                    log.info("device %s of %s is taken (a flavor disk, or an attach meanwhile); trying the next",
                             device, vm_cid)
                    taken.add(_letter(device))
                    continue
                if exc.status in (400, 409):
                    volume = self.volume(disk_cid)
                    if volume is None:  # e.g. Nova refusing an ID that is not a UUID
                        raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False) from None
                    if _attached_to(volume, vm_cid):  # attached there meanwhile, by another call
                        return self._existing_hint(vm_cid, disk_cid)
                    raise CloudError(f"cannot attach disk '{disk_cid}' to VM '{vm_cid}': {exc.message}"
                                     f"{_holder_note(volume, vm_cid)}") from None
                raise
            self._wait(disk_cid, f"attach to {vm_cid}", lambda v: v["status"] == "in-use" and _attached_to(v, vm_cid),
                       kind="attached")
            hint = _hint(recorded)
            log.info("attached %s to %s as %s", disk_cid, vm_cid, hint)
            return hint
        raise CloudError(f"cannot attach disk '{disk_cid}' to VM '{vm_cid}': "
                         f"no free device after {ATTACH_ATTEMPTS} tries")

    def _attachment(self, vm_cid: VmCid, disk_cid: DiskCid) -> dict[str, Any] | None:
        return next((a for a in self.vms.attachments(vm_cid) if a.get("volumeId") == disk_cid), None)

    def _named(self, name: str) -> dict[str, Any] | None:
        """The volume this call made, if Cinder made it (generated names are unique)."""
        found = self.api.get(SERVICE, f"/volumes?{urllib.parse.urlencode({'name': name})}")["volumes"]
        return found[0] if found else None

    def _existing_hint(self, vm_cid: VmCid, disk_cid: DiskCid) -> str:
        self._wait(disk_cid, f"attach to {vm_cid}", lambda v: v["status"] == "in-use" and _attached_to(v, vm_cid),
                       kind="attached")
        for attachment in self.vms.attachments(vm_cid):
            if attachment.get("volumeId") == disk_cid:
                return _hint(attachment.get("device"))
        raise CloudError(f"disk '{disk_cid}' is attached to VM '{vm_cid}' but Nova lists no attachment for it")

    def _free_device(self, vm_cid: VmCid, taken: set[str | None]) -> str:
        """The first letter from b that is not taken; a config drive attached as a disk
        takes b (it is no Nova block device, so Nova would not refuse that letter)."""
        skip = 1 if self.properties.config_drive == "disk" else 0
        for letter in LETTERS[skip:]:
            if letter not in taken:
                return f"/dev/sd{letter}"
        raise CloudError(f"VM '{vm_cid}' has no free device for another disk (all of /dev/sdb..sdz are taken)")

    def _held_by_departing_server(self, disk_cid: DiskCid) -> Callable[[errors.ApiError], bool]:
        """An attach refused because the volume is not available yet is retried while it is
        still detaching from a server that is going away."""

        def transient(exc: errors.ApiError) -> bool:
            if exc.status not in (400, 409) or exc.mentions("device path"):
                return False
            volume = self.volume(disk_cid)
            if volume is None:
                return False
            if volume.get("status") in ("detaching", "available"):
                return True
            if volume.get("status") == "in-use":
                holders = [a.get("server_id") for a in volume.get("attachments", [])]
                departing = [h for h in holders if h and not self.vms.exists(h)]
                if departing and len(departing) == len(holders):
                    log.info("disk %s is still held by %s, which is going away; waiting", disk_cid,
                             ", ".join(departing))
                    return True
            return False

        return transient

    def detach(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        def detaching(exc: errors.ApiError) -> bool:
            if exc.status not in (400, 409):
                return False
            status = (self.volume(disk_cid) or {}).get("status")
            if _detach_under_way(status):
                log.info("detach of %s from %s: Nova refused while the volume is '%s' (an earlier attempt, "
                         "or another call, is detaching it); asking again until Nova has let go",
                         disk_cid, vm_cid, status)
                return True
            return False

        response = self.api.request("compute", "DELETE", _attachment_path(vm_cid, disk_cid), ok=(404,),
                                    also=detaching, budget=self.properties.state_timeout)
        if response.status_code == 404 and response.after_unknown_outcome:
            log.info("detach of %s from %s: an earlier attempt, whose answer was lost, was carried out",
                     disk_cid, vm_cid)
        elif response.status_code == 404:
            volume = self.volume(disk_cid)
            if volume is None:
                log.info("disk %s not found: nothing to detach", disk_cid)
                return
            self.vms.require(vm_cid)
            raise DiskNotAttached(f"disk '{disk_cid}' is not attached to VM '{vm_cid}'")
        self._wait(disk_cid, f"detach from {vm_cid}",
                   lambda v: not _attached_to(v, vm_cid) and v["status"] != "detaching", gone_ok=True,
                   kind="detached")
        self._wait_released(vm_cid, disk_cid)
        log.info("detached %s from %s", disk_cid, vm_cid)

    def _wait_released(self, vm_cid: VmCid, disk_cid: DiskCid) -> None:
        """Cinder says `available` a moment before Nova drops its own record of the
        attachment (its block device mapping). Until then Nova still lists the disk on the
        server: an attach made meanwhile would take it for attached already and return,
        and the disk would then go with the record. So a detach ends when Nova's record is
        gone (usually at the first look: one request)."""

        def check() -> waits.Check:
            response = self.api.request("compute", "GET", _attachment_path(vm_cid, disk_cid), ok=(404,))
            released = response.status_code == 404
            return waits.Check(released, "released" if released else "listed")

        self.api.channel.until(check, what=f"Nova to release disk {disk_cid} from {vm_cid}",
                               timeout=self.properties.state_timeout,
                               setting="state_timeout", schedule=poll_schedule(self.properties), check_first=True)

    # ------------------------------------------------------------ metadata and snapshots

    def set_metadata(self, disk_cid: DiskCid, metadata: dict[str, str]) -> None:
        wanted = tags.clean(metadata)
        if not wanted:
            self.require(disk_cid)
            return
        response = self.api.request(SERVICE, "POST", f"/volumes/{_quote(disk_cid)}/metadata",
                                    json={"metadata": wanted}, ok=(404,), idempotent=True)  # a merge
        if response.status_code == 404:
            raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False)

    def snapshot(self, disk_cid: DiskCid, metadata: dict[str, Any]) -> SnapshotCid:
        """A snapshot named after the deployment, job, index (and the device, when attached),
        with the director's metadata and the keys the official CPI adds (models.snapshot_tags);
        waited on until `available`."""
        volume = self.require(disk_cid)
        attachment = (volume.get("attachments") or [{}])[0]
        device = attachment.get("device")
        parts = [metadata.get("deployment"), metadata.get("job"), metadata.get("index")]
        if device:
            parts.append(device.rsplit("/", 1)[-1])
        description = "/".join(str(p) for p in parts if p not in (None, ""))
        wanted = tags.clean({k: v for k, v in snapshot_tags(metadata).items() if v is not None})
        if device:
            wanted["device"] = device
        body = {"snapshot": {
            "volume_id": disk_cid,
            "force": True,  # a snapshot of an attached volume
            "name": f"snapshot-{uuid.uuid4()}",
            "description": description or f"snapshot of {disk_cid}",
            "metadata": wanted,
        }}
        try:
            snapshot = self.api.post(SERVICE, "/snapshots", body)["snapshot"]
        except errors.ApiError as exc:
            if exc.status == 404:
                raise DiskNotFound(f"disk '{disk_cid}' not found", ok_to_retry=False) from None
            raise
        snapshot_cid = SnapshotCid(snapshot["id"])
        self._wait_snapshot(snapshot_cid, "be available", lambda s: s["status"] == "available")
        log.info("snapshot %s of %s: %s", snapshot_cid, disk_cid, body["snapshot"]["description"])
        return snapshot_cid

    def delete_snapshot(self, snapshot_cid: SnapshotCid) -> None:
        response = self.api.request(SERVICE, "DELETE", f"/snapshots/{_quote(snapshot_cid)}", ok=(404,))
        if response.status_code == 404:
            log.info("snapshot %s not found: nothing to delete", snapshot_cid)
            return
        self._wait_snapshot(snapshot_cid, "be deleted", lambda s: False, gone_ok=True)
        log.info("deleted snapshot %s", snapshot_cid)

    def _wait_snapshot(self, snapshot_cid: SnapshotCid, what: str, done: Callable[[dict[str, Any]], bool], *,
                       gone_ok: bool = False) -> None:
        def check() -> waits.Check:
            response = self.api.request(SERVICE, "GET", f"/snapshots/{snapshot_cid}", ok=(404,))
            if response.status_code == 404:
                if gone_ok:
                    return waits.Check(True, "deleted")
                raise CloudError(f"snapshot {snapshot_cid} disappeared")
            snapshot = response.json()["snapshot"]
            status = snapshot.get("status", "unknown")
            if status.startswith("error"):
                raise CloudError(f"snapshot {snapshot_cid} went {status} while waiting for it to {what}")
            return waits.Check(done(snapshot), status)

        self.api.channel.until(check, what=f"snapshot {snapshot_cid} to {what}", timeout=self.properties.state_timeout,
                               setting="state_timeout", schedule=poll_schedule(self.properties))


def _letter(device: str | None) -> str | None:
    if not device:
        return None
    name = device.rsplit("/", 1)[-1].rstrip("0123456789")
    return name[-1] if name else None


def _hint(device: str | None) -> str:
    """`/dev/sdX` for the letter Nova recorded (it says vdX or xvdX under some hypervisors)."""
    letter = _letter(device)
    if not letter:
        raise CloudError(f"Nova recorded no usable device name ({device!r}) for the attachment")
    return f"/dev/sd{letter}"


def _holder_note(volume: dict[str, Any], vm_cid: VmCid) -> str:
    holders = [a.get("server_id") for a in volume.get("attachments", []) if a.get("server_id") != vm_cid]
    if holders:
        return f" (it is attached to {', '.join(holders)}; detach it there first)"
    return f" (volume status {volume.get('status')})"


def _attachment_path(vm_cid: VmCid, disk_cid: DiskCid) -> str:
    return f"/servers/{_quote(vm_cid)}/os-volume_attachments/{_quote(disk_cid)}"


def _detach_under_way(status: str | None) -> bool:
    """Whether a detach Nova refused (400: "Volume status must be 'in-use' and attach_status
    must be 'attached'") is one already under way. Nova marks the volume `detaching`, has
    Cinder let go (`available`) and only then drops its own record of the attachment: in
    both windows a repeated DELETE is refused rather than answered 404, and asking again
    soon gets the 404 that says the detach is done."""
    return status in ("detaching", "available")


def _attached_to(volume: dict[str, Any], vm_cid: VmCid) -> bool:
    return any(a.get("server_id") == vm_cid for a in volume.get("attachments") or [])
