"""What bosh-openstack-cpi does with a server, volume, snapshot or image it did not make:
the API calls and lookups of its methods, made here with openstacksdk, for the tests of a
rollback (tests/openstack/test_switching.py).

Read from cloudfoundry/bosh-openstack-cpi-release (e2856a3), src/bosh_openstack_cpi/lib/
cloud/openstack/: cloud.rb, server.rb, network_configurator.rb, stemcell.rb,
loadbalancer_configurator.rb; not run (it needs Ruby gems this machine cannot install).
fog, which it talks through, asks Nova for no microversion (2.1). In short:

- a server, volume, snapshot or image is found by its cid alone; a stemcell cid ending in
  " light" names an image it must not delete;
- attach_disk answers an attached volume with the device Nova lists for it; otherwise it
  takes the first letter from `b`, one further for each of the flavor's ephemeral and swap
  disks and for a config drive attached as a disk, that no attachment uses as sd, vd or
  xvd, attaches at /dev/sd<letter> and hands the agent that device;
- detach_disk finds the volume among the server's attachments;
- delete_vm lists the ports whose device_id is the server and the load balancer
  memberships in its `lbaas_pool_*` metadata, deletes the server, waits, then deletes
  those ports; its volumes are Nova's to delete (delete_on_termination);
- delete_disk and delete_snapshot refuse a volume or snapshot that is not `available`;
- snapshot_disk gives the snapshot the director's metadata with `director`,
  `instance_index` and `instance_name` (job/instance_id);
- set_vm_metadata and set_disk_metadata merge the director's metadata into the server's and
  the volume's (TagManager: nil keys and values dropped, keys and values cut to 255); the
  server is renamed only with human_readable_vm_names, off by default; create_vm gives a
  server the manifest's tags (and `registry_key` with human_readable_vm_names), create_disk
  a volume named `volume-<uuid>` with an empty description and no metadata.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from openstack import exceptions

FIRST_LETTER = "b"


def _wait(check, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"official CPI: {what} did not happen within {timeout} s"
        time.sleep(0.3)


class OfficialOpenStackCpi:
    """The official CPI's calls, on an openstacksdk connection."""

    def __init__(self, conn, config_drive: str | None = None):
        self.conn = conn
        self.config_drive = config_drive

    # -- lookups by cid
    def server(self, vm_cid: str):
        try:
            return self.conn.compute.get_server(vm_cid)
        except exceptions.NotFoundException:
            return None

    def has_vm(self, vm_cid: str) -> bool:
        server = self.server(vm_cid)
        return server is not None and server.status.lower() not in ("terminated", "deleted")

    def volume(self, disk_cid: str):
        try:
            return self.conn.block_storage.get_volume(disk_cid)
        except exceptions.NotFoundException:
            return None

    def status(self, disk_cid: str) -> str | None:
        volume = self.volume(disk_cid)
        return None if volume is None else volume.status

    def has_disk(self, disk_cid: str) -> bool:
        return self.volume(disk_cid) is not None

    def stemcell_image(self, stemcell_cid: str):
        """Stemcell.create + validate_existence: " light" stripped, the image must exist."""
        image_id = stemcell_cid.removesuffix(" light") if stemcell_cid.endswith(" light") else stemcell_cid
        try:
            return self.conn.image.get_image(image_id)
        except exceptions.NotFoundException:
            raise AssertionError(f"official CPI: Image `{stemcell_cid}' not found") from None

    # -- disks
    def attachments(self, vm_cid: str) -> list[Any]:
        return list(self.conn.compute.volume_attachments(vm_cid))

    def first_letter(self, vm_cid: str) -> str:
        """`b`, moved on past the flavor's ephemeral and swap disks and a config drive disk;
        the flavor is the one GET /servers/{id} names at microversion 2.1 (fog's)."""
        server = self.conn.compute.get(f"/servers/{vm_cid}", microversion="2.1").json()["server"]
        flavor = self.conn.compute.get_flavor(server["flavor"]["id"])
        letter = ord(FIRST_LETTER)
        letter += 1 if (flavor.ephemeral or 0) > 0 else 0
        letter += 1 if (flavor.swap or 0) > 0 else 0
        letter += 1 if self.config_drive == "disk" else 0
        return chr(letter)

    def attach_disk(self, vm_cid: str, disk_cid: str) -> str:
        assert self.server(vm_cid) is not None, f"official CPI: Server `{vm_cid}' not found"
        assert self.volume(disk_cid) is not None, f"official CPI: Volume `{disk_cid}' not found"
        attachments = self.attachments(vm_cid)
        existing = next((a for a in attachments if a.volume_id == disk_cid), None)
        if existing is not None:
            return existing.device
        used = {a.device for a in attachments}
        device = None
        for code in range(ord(self.first_letter(vm_cid)), ord("z") + 1):
            char = chr(code)
            if not used & {f"/dev/sd{char}", f"/dev/vd{char}", f"/dev/xvd{char}"}:
                device = f"/dev/sd{char}"
                break
        assert device, "official CPI: Server has too many disks attached"
        self.conn.compute.create_volume_attachment(vm_cid, volume=disk_cid, device=device)
        _wait(lambda: self.status(disk_cid) == "in-use", f"volume {disk_cid} in-use")
        return device

    def detach_disk(self, vm_cid: str, disk_cid: str) -> None:
        assert self.server(vm_cid) is not None, f"official CPI: Server `{vm_cid}' not found"
        if self.volume(disk_cid) is None:
            return
        if any(a.volume_id == disk_cid for a in self.attachments(vm_cid)):
            self.conn.compute.delete_volume_attachment(vm_cid, disk_cid)
            _wait(lambda: self.status(disk_cid) == "available", f"volume {disk_cid} available")

    def delete_disk(self, disk_cid: str) -> None:
        volume = self.volume(disk_cid)
        if volume is None:
            return
        assert volume.status == "available", \
            f"official CPI: Cannot delete volume `{disk_cid}', state is {volume.status}"
        self.conn.block_storage.delete_volume(disk_cid, ignore_missing=True)
        _wait(lambda: self.volume(disk_cid) is None, f"volume {disk_cid} deleted")

    @staticmethod
    def _format(tags: dict[str, Any]) -> dict[str, str]:
        return {str(k)[:255]: str(v)[:255] for k, v in tags.items() if k is not None and v is not None}

    def set_vm_metadata(self, vm_cid: str, metadata: dict[str, Any]) -> None:
        self.conn.compute.set_server_metadata(vm_cid, **self._format(metadata))

    def set_disk_metadata(self, disk_cid: str, metadata: dict[str, Any]) -> None:
        self.conn.block_storage.set_volume_metadata(disk_cid, **self._format(metadata))

    def snapshot_disk(self, disk_cid: str, metadata: dict[str, Any]) -> str:
        """A forced snapshot named `snapshot-<uuid>`, described deployment/job/index/<device>,
        then, once available, its metadata."""
        volume = self.volume(disk_cid)
        assert volume is not None, f"official CPI: Volume `{disk_cid}' not found"
        parts = ["" if metadata.get(k) is None else str(metadata[k]) for k in ("deployment", "job", "index")]
        devices = [a["device"] for a in volume.attachments or [] if a]
        if devices:
            parts.append(devices[0].split("/")[-1])
        snapshot = self.conn.block_storage.create_snapshot(name=f"snapshot-{uuid.uuid4()}", volume_id=disk_cid,
                                                           description="/".join(parts), is_forced=True)
        _wait(lambda: self.conn.block_storage.get_snapshot(snapshot.id).status == "available",
              f"snapshot {snapshot.id} available")
        self.conn.block_storage.set_snapshot_metadata(snapshot.id, **self.snapshot_metadata(metadata))
        return snapshot.id

    @staticmethod
    def snapshot_metadata(metadata: dict[str, Any]) -> dict[str, str]:
        """The metadata snapshot_disk gives a snapshot."""
        found = {str(k): v for k, v in metadata.items()}
        found.update({"director": metadata.get("director_name"), "instance_index": str(metadata.get("index")),
                      "instance_name": f"{metadata['job']}/{metadata['instance_id']}"})
        for dropped in ("director_name", "index", "job"):
            found.pop(dropped)
        return {k[:255]: str(v)[:255] for k, v in found.items() if v is not None}

    def delete_snapshot(self, snapshot_cid: str) -> None:
        try:
            snapshot = self.conn.block_storage.get_snapshot(snapshot_cid)
        except exceptions.NotFoundException:
            return
        assert snapshot.status == "available", \
            f"official CPI: Cannot delete snapshot `{snapshot_cid}', state is {snapshot.status}"
        self.conn.block_storage.delete_snapshot(snapshot_cid, ignore_missing=True)

        def gone() -> bool:
            try:
                self.conn.block_storage.get_snapshot(snapshot_cid)
            except exceptions.NotFoundException:
                return True
            return False

        _wait(gone, f"snapshot {snapshot_cid} deleted")

    # -- VMs and stemcells
    @staticmethod
    def memberships(metadata: dict[str, str]) -> list[tuple[str, str]]:
        """The load balancer pool memberships delete_vm removes: (pool_id, member_id) from
        each `lbaas_pool_*` key of the server's metadata (LoadbalancerConfigurator)."""
        return [(value.split("/")[0], value.split("/")[1]) for key, value in metadata.items()
                if key.startswith("lbaas_pool_")]

    def delete_vm(self, vm_cid: str) -> list[str]:
        """Returns the ports it deleted."""
        server = self.server(vm_cid)
        if server is None:
            return []
        port_ids = [p.id for p in self.conn.network.ports(device_id=vm_cid)]
        memberships = self.memberships(server.metadata or {})
        assert not memberships, f"load balancer memberships the loopback cloud cannot remove: {memberships}"
        self.conn.compute.delete_server(vm_cid, ignore_missing=True)
        _wait(lambda: not self.has_vm(vm_cid), f"server {vm_cid} deleted")
        for port_id in port_ids:
            self.conn.network.delete_port(port_id, ignore_missing=True)
        return port_ids

    def delete_stemcell(self, stemcell_cid: str) -> None:
        if stemcell_cid.endswith(" light"):
            return  # LightStemcell#delete: nothing
        try:
            self.conn.image.get_image(stemcell_cid)
        except exceptions.NotFoundException:
            return
        self.conn.image.delete_image(stemcell_cid, ignore_missing=True)
