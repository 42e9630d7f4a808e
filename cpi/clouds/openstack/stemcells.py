"""Stemcells as Glance images.

Light stemcells name an image that must already be `active`; their cid is
`"<image_id> light"` and deleting one leaves the image alone. Heavy stemcells carry the
root disk image inside their `image` tarball (`root.img`): it is streamed straight from the
tarball into Glance (no temporary copy of a multi-GiB file), and the image is deleted again
if the upload or the wait for `active` fails.
"""

from __future__ import annotations

import logging
import os
import tarfile
from pathlib import Path
from typing import IO, Any

from cpi import waits
from cpi.cids import StemcellCid
from cpi.errors import CloudError

from . import errors
from .props import OpenStackProperties, StemcellCloudProperties
from .session import OpenStack
from .vms import _quote
from .waits import poll_schedule

log = logging.getLogger("cpi.clouds.openstack")

LIGHT_SUFFIX = " light"
ROOT_IMAGE = "root.img"
#: Glance image attributes a stemcell property must not set.
_RESERVED = {
    "id", "name", "status", "visibility", "protected", "checksum", "owner", "size", "virtual_size", "created_at",
    "updated_at", "file", "schema", "self", "locations", "direct_url", "tags", "disk_format", "container_format",
    "min_disk", "min_ram", "os_hidden", "os_hash_algo", "os_hash_value", "stores",
}
_CHUNK = 1024 * 1024


class Stemcells:
    def __init__(self, api: OpenStack, properties: OpenStackProperties):
        self.api = api
        self.properties = properties

    def create(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> StemcellCid:
        props = StemcellCloudProperties.model_validate(cloud_properties or {})
        if props.is_light:
            return self._light(props)
        if not image_path:
            raise CloudError("create_stemcell: no image_path and no image_id (a light stemcell names its image_id)")
        source = _RootImage(Path(image_path))
        return self._upload(source, props, tags)

    # ------------------------------------------------------------ light

    def _light(self, props: StemcellCloudProperties) -> StemcellCid:
        image_id = props.image_id
        assert image_id, "props.is_light"
        response = self.api.request("image", "GET", f"/images/{_quote(image_id)}", ok=(404,))
        if response.status_code == 404:
            raise CloudError(f"light stemcell: image {image_id} not found")
        status = response.json().get("status")
        if status != "active":
            raise CloudError(f"light stemcell: image {image_id} is {status}, not active")
        log.info("light stemcell: image %s is active", image_id)
        return StemcellCid(f"{image_id}{LIGHT_SUFFIX}")

    # ------------------------------------------------------------ heavy

    def _image_body(self, props: StemcellCloudProperties, tags: dict[str, str]) -> dict[str, Any]:
        name = "/".join(str(p) for p in (props.name, props.version) if p not in (None, "")) or "bosh-stemcell"
        body: dict[str, Any] = {
            "name": name,
            "disk_format": props.disk_format,
            "container_format": props.container_format,
            "visibility": "public" if self.properties.stemcell_public_visibility else "private",
        }
        properties: dict[str, Any] = {
            "version": props.version,
            **{key: getattr(props, key) for key in props.IMAGE_PROPERTIES},
            "hypervisor_type": props.hypervisor,
        }
        for key, value in (props.model_extra or {}).items():
            properties.setdefault(key, value)
        for key, value in (tags or {}).items():
            properties.setdefault(key, value)
        for key, value in properties.items():
            if value is None:
                continue
            if key in _RESERVED or key in body:
                log.info("stemcell property '%s' skipped: Glance reserves it", key)
                continue
            if isinstance(value, bool):
                body[key] = "true" if value else "false"
            elif isinstance(value, (str, int, float)):
                body[key] = str(value)[:255]
            else:
                log.info("stemcell property '%s' skipped: Glance properties are strings", key)
        return body

    def _upload(self, source: _RootImage, props: StemcellCloudProperties, tags: dict[str, str]) -> StemcellCid:
        size = source.size()  # fails early on a missing or unreadable image
        body = self._image_body(props, tags)
        image = self.api.post("image", "/images", body)
        image_id = image["id"]
        log.info("created image %s (%s); uploading %d bytes", image_id, body["name"], size)
        try:
            opened: list[_Sized] = []

            def fresh_body() -> _Sized:
                for handle in opened:
                    handle.close()
                opened.clear()
                stream = source.open()
                opened.append(stream)
                return stream

            try:
                self.api.request("image", "PUT", f"/images/{image_id}/file", data=fresh_body,
                                 headers={"Content-Type": "application/octet-stream"}, idempotent=False)
            finally:
                for handle in opened:
                    handle.close()
            self._wait_active(image_id)
        except BaseException as exc:
            log.warning("stemcell upload failed (%s); deleting image %s", errors.summary(exc), image_id)
            try:
                self.api.delete("image", f"/images/{image_id}", ok=(404,))
            except Exception as cleanup_exc:  # noqa: BLE001 - the original failure is what gets raised
                log.error("could not delete image %s: %s; delete it by hand", image_id, errors.summary(cleanup_exc))
            raise
        return StemcellCid(image_id)

    def _wait_active(self, image_id: str) -> None:
        def check() -> waits.Check:
            image = self.api.get("image", f"/images/{image_id}")
            status = image.get("status", "unknown")
            if status in ("killed", "deleted", "pending_delete", "deactivated"):
                raise CloudError(f"image {image_id} went {status} while uploading the stemcell")
            return waits.Check(status == "active", status)

        self.api.channel.until(check, what=f"image {image_id} to be active", timeout=self.properties.state_timeout,
                               setting="state_timeout", schedule=poll_schedule(self.properties), check_first=True)

    # ------------------------------------------------------------ delete

    def delete(self, stemcell_cid: StemcellCid) -> None:
        if stemcell_cid.endswith(LIGHT_SUFFIX):
            log.info("light stemcell %s: its image is not this CPI's to delete", stemcell_cid)
            return
        response = self.api.request("image", "DELETE", f"/images/{_quote(stemcell_cid)}", ok=(404,))
        if response.status_code == 404:
            log.info("stemcell %s not found: nothing to delete", stemcell_cid)
        else:
            log.info("deleted image %s", stemcell_cid)


class _Sized:
    """A read-only stream with a length, so requests sends a Content-Length and streams it."""

    def __init__(self, stream: IO[bytes], size: int, closers: list[Any]):
        self._stream = stream
        self._size = size
        self._closers = closers

    def __len__(self) -> int:
        return self._size

    def read(self, amount: int | None = -1) -> bytes:
        return self._stream.read(_CHUNK if amount is None or amount < 0 else amount)

    def close(self) -> None:
        for closer in reversed(self._closers):
            closer.close()


class _RootImage:
    """The root disk image inside a stemcell's `image` file: `root.img` in a (gzipped)
    tarball, or the file itself when it is not a tarball."""

    def __init__(self, path: Path):
        self.path = path
        self._member: str | None = None

    def _check(self) -> None:
        if not self.path.is_file():
            raise CloudError(f"stemcell image '{self.path}' does not exist or is not a file")
        if not os.access(self.path, os.R_OK):
            raise CloudError(f"stemcell image '{self.path}' is not readable")

    def size(self) -> int:
        self._check()
        if not tarfile.is_tarfile(self.path):
            return self.path.stat().st_size
        with tarfile.open(self.path, "r|*") as archive:
            for member in archive:
                if member.isfile() and member.name.lstrip("./") == ROOT_IMAGE:
                    self._member = member.name
                    return member.size
        raise CloudError(f"stemcell image '{self.path}' is a tarball without {ROOT_IMAGE}")

    def open(self) -> _Sized:
        if self._member is None:
            handle = open(self.path, "rb")  # noqa: SIM115 - streamed by the upload, closed by _Sized
            return _Sized(handle, self.path.stat().st_size, [handle])
        archive = tarfile.open(self.path, "r|*")  # noqa: SIM115 - streamed by the upload, closed by _Sized
        for member in archive:
            if member.name == self._member:
                stream = archive.extractfile(member)
                if stream is not None:  # a regular file, as size() found it
                    return _Sized(stream, member.size, [archive])
        archive.close()
        raise CloudError(f"stemcell image '{self.path}': {ROOT_IMAGE} vanished while reading")
