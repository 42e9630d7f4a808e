"""OpenStack-only cases, through bin/cpi against real services (cpi-anchors.md §2, OpenStack):
a failed create leaves no port, a stale port does not block its IP, a floating IP moves
from the VM that held it, boot from volume, an attached disk answers with its hint, light
and heavy stemcells, and what the agent finds in user_data."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import uuid

import pytest

ENV = {"bosh": {"group": "d-dep-ig", "groups": ["d", "dep", "ig"], "tags": {"team": "cpi"}}}


def create_vm(cpi, cloud, stemcell, index, networks=None, **vm_props):
    props = {**cloud.vm_cloud_properties(), **vm_props}
    return cpi("create_vm", f"agent-{uuid.uuid4()}", stemcell, props,
               networks or cloud.manual_network(index), [], ENV)[0]


def error_of(response):
    assert response.error is not None, f"expected an error, got result {response.doc['result']!r}"
    return response.error


@pytest.fixture(scope="module")
def shared_vm(cloud, cpi, stemcell):
    """One VM for the checks that only look at a VM (user_data, ports, metadata), made with
    security groups by name and by ID."""
    groups = cloud.env.get("security_groups") or {}
    test_group = groups.get("test")
    default_id = cloud.client.get("network", "/v2.0/security-groups?name=default")["security_groups"][0]["id"]
    wanted = ([test_group["name"]] if test_group else []) + [default_id]
    vm_cid = create_vm(cpi, cloud, stemcell, 68, security_groups=wanted)
    yield {"vm_cid": vm_cid, "index": 68, "group_ids": ([test_group["id"]] if test_group else []) + [default_id]}
    cpi("delete_vm", vm_cid)


# ---------------------------------------------------------------- failures and ports


def test_failed_create_reports_nova_fault_and_leaves_no_port(cloud, cpi, stemcell):
    """A flavor no host can take: the server goes ERROR; the CPI says why (Nova's fault
    text), deletes the server and the port it made, and lets the director retry."""
    before = cloud.leftovers()
    response = cpi.call("create_vm", "agent-big", stemcell, {"instance_type": cloud.env["flavor_unschedulable"]},
                        cloud.manual_network(60), [], {})
    err = error_of(response)
    assert err["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "No valid host was found" in err["message"]
    assert err["ok_to_retry"] is True
    assert cloud.leftovers() == before
    assert not cloud.client.ports(fixed_ips=f"ip_address={cloud.ip(60)}")


def test_missing_flavor_and_net_are_named_and_nothing_is_left(cloud, cpi, stemcell):
    before = cloud.leftovers()
    err = error_of(cpi.call("create_vm", "a", stemcell, {"instance_type": "m9.nonexistent"}, cloud.manual_network(61),
                            [], {}))
    assert err["type"] == "Bosh::Clouds::VMCreationFailed" and "flavor 'm9.nonexistent' not found" in err["message"]
    assert err["ok_to_retry"] is False
    net = cloud.manual_network(61)
    net["default"]["cloud_properties"]["net_id"] = "00000000-0000-0000-0000-000000000000"
    err = error_of(cpi.call("create_vm", "a", stemcell, cloud.vm_cloud_properties(), net, [], {}))
    assert "net_id 00000000-0000-0000-0000-000000000000 not found" in err["message"]
    assert cloud.leftovers() == before


def test_stale_port_holding_the_ip_is_removed(cloud, cpi, stemcell):
    """A port left behind with the IP (no device) does not block the next VM (bosh #1991)."""
    ip = cloud.ip(62)
    stale = cloud.client.request("network", "POST", "/v2.0/ports", json={"port": {
        "network_id": cloud.net_id, "fixed_ips": [{"ip_address": ip}], "name": "stale-by-test"}})["port"]
    vm_cid = create_vm(cpi, cloud, stemcell, 62)
    try:
        holders = cloud.client.ports(fixed_ips=f"ip_address={ip}")
        assert [p["device_id"] for p in holders] == [vm_cid]
        assert stale["id"] not in {p["id"] for p in holders}
    finally:
        cpi("delete_vm", vm_cid)
    assert not cloud.client.ports(fixed_ips=f"ip_address={ip}"), "delete_vm must delete the port it made"


def test_ip_held_by_a_live_vm_is_refused_without_stealing_it(cloud, cpi, stemcell, shared_vm):
    vm_cid, index = shared_vm["vm_cid"], shared_vm["index"]
    err = error_of(cpi.call("create_vm", "b", stemcell, cloud.vm_cloud_properties(), cloud.manual_network(index),
                            [], {}))
    assert err["type"] == "Bosh::Clouds::VMCreationFailed" and "already in use" in err["message"]
    assert [p["device_id"] for p in cloud.client.ports(fixed_ips=f"ip_address={cloud.ip(index)}")] == [vm_cid]


# ---------------------------------------------------------------- floating IPs and security groups


def test_floating_ip_moves_from_the_vm_that_held_it(cloud, cpi, stemcell):
    fip = cloud.env.get("floating_ip")
    if not fip:
        pytest.skip("the cloud description names no floating_ip")

    def with_vip(index):
        networks = cloud.manual_network(index)
        networks["vip"] = {"type": "vip", "ip": fip["address"], "cloud_properties": {}}
        return networks

    def holder():
        found = cloud.client.get("network", f"/v2.0/floatingips/{fip['id']}")["floatingip"]
        port_id = found.get("port_id")
        return cloud.client.get("network", f"/v2.0/ports/{port_id}")["port"]["device_id"] if port_id else None

    first = create_vm(cpi, cloud, stemcell, 64, networks=with_vip(64))
    second = None
    try:
        assert holder() == first
        second = create_vm(cpi, cloud, stemcell, 65, networks=with_vip(65))
        assert holder() == second
    finally:
        for vm_cid in (first, second):
            if vm_cid:
                cpi("delete_vm", vm_cid)
    assert holder() is None


def test_missing_floating_ip_fails_before_anything_is_made(cloud, cpi, stemcell):
    before = cloud.leftovers()
    networks = cloud.manual_network(66)
    networks["vip"] = {"type": "vip", "ip": "203.0.113.77", "cloud_properties": {}}
    err = error_of(cpi.call("create_vm", "a", stemcell, cloud.vm_cloud_properties(), networks, [], {}))
    assert "floating IP 203.0.113.77" in err["message"] and err["ok_to_retry"] is False
    assert cloud.leftovers() == before


def test_security_groups_by_name_and_id_land_on_the_port(cloud, cpi, stemcell, shared_vm):
    (port,) = cloud.client.ports(device_id=shared_vm["vm_cid"])
    assert sorted(port["security_groups"]) == sorted(shared_vm["group_ids"])
    before = cloud.leftovers()
    err = error_of(cpi.call("create_vm", "a", stemcell, {**cloud.vm_cloud_properties(), "security_groups": ["nope-sg"]},
                            cloud.manual_network(67), [], {}))
    assert "security group(s) not found: nope-sg" in err["message"]
    assert cloud.leftovers() == before


# ---------------------------------------------------------------- what the agent gets


def test_user_data_holds_the_agent_settings(cloud, shared_vm, admin):
    vm_cid = shared_vm["vm_cid"]
    detail = admin.request("compute", "GET", f"/servers/{vm_cid}")["server"]
    user_data = json.loads(base64.b64decode(detail["OS-EXT-SRV-ATTR:user_data"]))
    (port,) = cloud.client.ports(device_id=vm_cid)
    assert user_data["server"] == {"name": detail["name"]} and detail["name"].startswith("vm-")
    assert user_data["vm"] == {"name": detail["name"]}
    assert user_data["agent_id"].startswith("agent-")
    network = user_data["networks"]["default"]
    assert network["ip"] == cloud.ip(shared_vm["index"]) and network["use_dhcp"] is True
    assert network["mac"] == port["mac_address"]
    assert user_data["dns"] == {"nameserver": ["8.8.8.8"]}
    assert user_data["disks"] == {"system": "/dev/sda", "ephemeral": None, "persistent": {}}
    assert user_data["env"] == ENV and user_data["mbus"].startswith("nats://")
    assert detail["metadata"].get("team") == "cpi"  # env.bosh.tags


def test_ephemeral_flavor_and_config_drive(cloud, cpi_with, stemcell, admin):
    if "m1.ephemeral" not in (cloud.env.get("flavors") or {}):
        pytest.skip("no flavor with an ephemeral disk")
    cpi = cpi_with(config_drive="cdrom", use_dhcp=False)
    vm_cid = create_vm(cpi, cloud, stemcell, 69, instance_type="m1.ephemeral")
    try:
        detail = admin.request("compute", "GET", f"/servers/{vm_cid}")["server"]
        assert detail["config_drive"] in (True, "True", "true")
        user_data = json.loads(base64.b64decode(detail["OS-EXT-SRV-ATTR:user_data"]))
        assert user_data["disks"]["ephemeral"] == "/dev/sdb"
        assert user_data["networks"]["default"]["use_dhcp"] is False
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        try:
            assert cpi("attach_disk", vm_cid, disk_cid) == "/dev/sdc"  # b is the flavor's ephemeral disk
            cpi("detach_disk", vm_cid, disk_cid)
        finally:
            cpi("delete_disk", disk_cid)
    finally:
        cpi("delete_vm", vm_cid)


def test_metadata_truncation_and_human_readable_names(cloud, cpi, shared_vm):
    vm_cid = shared_vm["vm_cid"]
    metadata = {"name": "ig/0123", "deployment": "d" * 300, "k" * 300: "v", "index": "0"}
    cpi("set_vm_metadata", vm_cid, metadata)
    assert cloud.client.server(vm_cid)["name"].startswith("vm-"), "renamed only with human_readable_vm_names"
    cpi("set_vm_metadata", vm_cid, metadata, context={"human_readable_vm_names": True})  # a cpi-config override
    server = cloud.client.server(vm_cid)
    assert server["name"] == "ig/0123"
    assert server["metadata"]["deployment"] == "d" * 255 and server["metadata"]["k" * 255] == "v"


# ---------------------------------------------------------------- boot from volume


def test_boot_from_volume(cloud, cpi, stemcell):
    vm_cid = create_vm(cpi, cloud, stemcell, 71, boot_from_volume=True, root_disk={"size": 2})
    try:
        attachments = cloud.client.get("compute", f"/servers/{vm_cid}/os-volume_attachments")["volumeAttachments"]
        assert len(attachments) == 1 and attachments[0]["device"] == "/dev/vda"
        root = cloud.client.volume(attachments[0]["volumeId"])
        assert root["size"] == 2 and root["bootable"] == "true"
        assert cpi("get_disks", vm_cid) == []  # the boot volume is not a persistent disk
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        assert cpi("attach_disk", vm_cid, disk_cid) == "/dev/sdb"
        assert cpi("get_disks", vm_cid) == [disk_cid]
        cpi("detach_disk", vm_cid, disk_cid)
        cpi("delete_disk", disk_cid)
    finally:
        cpi("delete_vm", vm_cid)
    assert cloud.client.volume(attachments[0]["volumeId"]) is None, "the boot volume goes with the VM"


def test_flavor_without_root_disk(cloud, cpi, stemcell):
    if "m1.nodisk" not in (cloud.env.get("flavors") or {}):
        pytest.skip("no flavor with a root disk of 0")
    before = cloud.leftovers()
    err = error_of(cpi.call("create_vm", "a", stemcell, {"instance_type": "m1.nodisk"}, cloud.manual_network(72),
                            [], {}))
    assert "flavor 'm1.nodisk' has a root disk of 0 GiB: set root_disk.size" in err["message"]
    assert cloud.leftovers() == before
    vm_cid = create_vm(cpi, cloud, stemcell, 72, instance_type="m1.nodisk", root_disk={"size": 1})
    try:
        attachments = cloud.client.get("compute", f"/servers/{vm_cid}/os-volume_attachments")["volumeAttachments"]
        assert [a["device"] for a in attachments] == ["/dev/vda"]
    finally:
        cpi("delete_vm", vm_cid)


# ---------------------------------------------------------------- disks


def test_attached_disk_answers_with_its_hint(cloud, cpi, stemcell, shared_vm):
    vm_cid = create_vm(cpi, cloud, stemcell, 73)
    disks = [cpi("create_disk", 1024, {}, vm_cid) for _ in range(2)]
    try:
        first = cpi("attach_disk", vm_cid, disks[0])
        second = cpi("attach_disk", vm_cid, disks[1])
        assert (first, second) == ("/dev/sdb", "/dev/sdc")
        assert cpi("attach_disk", vm_cid, disks[0]) == first
        assert cpi("attach_disk", vm_cid, disks[1]) == second
        attachments = cloud.client.get("compute", f"/servers/{vm_cid}/os-volume_attachments")["volumeAttachments"]
        assert sorted(a["device"][-1] for a in attachments) == ["b", "c"]
        assert sorted(cpi("get_disks", vm_cid)) == sorted(disks)
        err = error_of(cpi.call("attach_disk", shared_vm["vm_cid"], disks[0]))
        assert err["type"] == "Bosh::Clouds::CloudError" and vm_cid in err["message"]
    finally:
        cpi("delete_vm", vm_cid)
        for disk_cid in disks:
            cpi("delete_disk", disk_cid)


def test_volume_waits_keep_how_long_cinder_took(cloud, env, tmp_path):
    """#23: each finished wait records its duration (cpi.transitions) in a private file of the
    CPI user's cache, named by a digest of the cloud and the kind, so the next one looks when
    the volume is about to be ready."""
    import stat

    from tests.openstack import target as os_target
    from tests.support.runner import COLD_ENV, Cpi

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    # its own HOME, and no helper: nothing of this test outlives it
    cpi = Cpi(os_target.write_config(tmp_path / "cpi.json", env), env={**COLD_ENV, "HOME": str(home)})
    for _ in range(2):
        disk_cid = cpi("create_disk", 1024, {}, None)
        cpi("delete_disk", disk_cid)
    kept = home / ".cache" / "bosh-cpi" / "transitions"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    files = sorted(kept.iterdir())
    assert len(files) == 2  # volume available, volume deleted
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert env["auth_url"].split("//")[-1].split(":")[0] not in path.name
        durations = json.loads(path.read_text())
        assert len(durations) == 2 and all(0 < d < 60 for d in durations)


def test_listings_are_read_page_after_page(cloud, cpi, env, tmp_path, monkeypatch):
    """#23: the listings behind `cpi list` and `cpi orphans` are read page after page (Nova, Cinder and Glance
    answer at most their maximum, Glance 25 by default, to a request without a limit), and
    say how far they are. Three disks and three stemcell images on pages of two."""
    from cpi import opening
    from cpi.clouds import inventory
    from cpi.clouds.openstack import inventory as os_inventory
    from tests.openstack import target as os_target

    disks = [cpi("create_disk", 1024, {}, None) for _ in range(3)]
    image = tmp_path / "image"
    with tarfile.open(image, "w:gz") as tar:
        info = tarfile.TarInfo("root.img")
        info.size = 64 * 1024
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    stemcells = [cpi("create_stemcell", str(image), {"name": f"bosh-paged-{n}", "version": "1", "disk_format": "raw"})
                 for n in range(3)]
    seen: list[tuple[str, int]] = []
    monkeypatch.setattr(os_inventory, "PAGE", 2)
    monkeypatch.setattr(inventory, "progress", lambda kind, count: seen.append((kind, count)))
    try:
        raw = json.loads(os_target.write_config(tmp_path / "cpi.json", env).read_text())
        ready = opening.open_cloud(raw, {"request_id": "cpi-list", "director_uuid": "director-uuid-1"})
        listed = {r.cid for r in ready.cloud.inventory("disks")}
        assert set(disks) <= listed
        assert set(stemcells) <= {r.cid for r in ready.cloud.inventory("stemcells")}
        volumes = [count for kind, count in seen if kind == "volumes"]
        assert len(volumes) >= 2 and volumes == sorted(volumes) and volumes[-1] >= 3
    finally:
        for disk_cid in disks:
            cpi("delete_disk", disk_cid)
        for stemcell_cid in stemcells:
            cpi("delete_stemcell", stemcell_cid)


def test_disk_type_precedence_zone_and_metadata(cloud, cpi_with, stemcell):
    vt = (cloud.env.get("volume_type") or {}).get("name")
    if not vt:
        pytest.skip("the cloud description names no volume_type")
    cpi = cpi_with(default_volume_type=vt)
    vm_cid = create_vm(cpi, cloud, stemcell, 75)
    disk_cid = cpi("create_disk", 1500, {}, vm_cid)
    try:
        volume = cloud.client.volume(disk_cid)
        assert volume["volume_type"] == vt and volume["size"] == 2
        assert volume["availability_zone"] == cloud.client.server(vm_cid)["OS-EXT-AZ:availability_zone"]
        err = error_of(cpi.call("create_disk", 1024, {"type": "no-such-type"}, None))
        assert "no-such-type" in err["message"]
        cpi("set_disk_metadata", disk_cid, {"director": "d", "deployment": "x" * 300, "instance_index": 0})
        metadata = cloud.client.volume(disk_cid)["metadata"]
        assert metadata["deployment"] == "x" * 255 and metadata["instance_index"] == "0"
        cpi("attach_disk", vm_cid, disk_cid)
        snapshot_cid = cpi("snapshot_disk", disk_cid, {"deployment": "dep", "job": "ig", "index": 0,
                                                       "director_name": "d", "agent_id": "a"})
        snapshot = cloud.client.get("block-storage", f"/snapshots/{snapshot_cid}")["snapshot"]
        assert snapshot["status"] == "available" and snapshot["description"] == "dep/ig/0/sdb"
        assert snapshot["metadata"]["index"] == "0" and snapshot["metadata"]["device"] == "/dev/sdb"
        # as the official CPI has them: director for director_name, instance_index (no instance_id: no name)
        assert snapshot["metadata"]["director"] == "d" and "director_name" not in snapshot["metadata"]
        assert snapshot["metadata"]["instance_index"] == "0" and "instance_name" not in snapshot["metadata"]
        cpi("delete_snapshot", snapshot_cid)
        cpi("detach_disk", vm_cid, disk_cid)
    finally:
        cpi("delete_vm", vm_cid)
        cpi("delete_disk", disk_cid)


# ---------------------------------------------------------------- stemcells


def test_light_stemcell(cloud, cpi):
    stemcell_cid = cpi("create_stemcell", *cloud.stemcell_args())
    assert stemcell_cid == f"{cloud.image_id} light"
    assert cpi("delete_stemcell", stemcell_cid) is None
    assert cloud.client.get("image", f"/v2/images/{cloud.image_id}")["status"] == "active", "light: image kept"
    err = error_of(cpi.call("create_stemcell", "", {"name": "x", "version": "1",
                                                    "image_id": "00000000-0000-0000-0000-00000000dead"}))
    assert err["type"] == "Bosh::Clouds::CloudError" and "not found" in err["message"]


def test_stemcell_public_visibility_makes_a_public_image(cloud, env, cpi_with, tmp_path):
    """openstack.stemcell_public_visibility, as the official job's: a heavy stemcell's image
    is public (every project of the cloud can boot it). Glance lets only an admin publicize:
    anyone else is told so."""
    image = tmp_path / "image"
    with tarfile.open(image, "w:gz") as tar:
        info = tarfile.TarInfo("root.img")
        info.size = 1024 * 1024
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    args = (str(image), {"name": "bosh-public", "version": "1", "disk_format": "raw"})
    error = cpi_with(stemcell_public_visibility=True).call("create_stemcell", *args).error
    assert error["type"] == "Bosh::Clouds::CloudError" and "publicize_image" in error["message"]
    admin = env["admin"]
    public = cpi_with(stemcell_public_visibility=True, username=admin["username"], api_key=admin["password"],
                      project=admin["project_name"], project_id=None)
    stemcell_cid = public("create_stemcell", *args)
    try:
        assert cloud.client.get("image", f"/v2/images/{stemcell_cid}")["visibility"] == "public"
    finally:
        public("delete_stemcell", stemcell_cid)


def test_heavy_stemcell_upload_boot_and_delete(cloud, cpi, tmp_path):
    payload = b"\0" * (2 * 1024 * 1024)
    image = tmp_path / "image"
    with tarfile.open(image, "w:gz") as tar:
        info = tarfile.TarInfo("root.img")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    stemcell_cid = cpi("create_stemcell", str(image), {
        "name": "bosh-openstack-kvm-ubuntu-test", "version": "0.1", "disk_format": "raw", "container_format": "bare",
        "os_type": "linux", "os_distro": "ubuntu", "architecture": "x86_64", "auto_disk_config": True,
        "hw_disk_bus": "scsi", "hw_scsi_model": "virtio-scsi", "hw_vif_multiqueue_enabled": True,
    }, {"tags": {"team": "cpi"}}, api_version=3)
    try:
        glance = cloud.client.get("image", f"/v2/images/{stemcell_cid}")
        assert glance["status"] == "active" and glance["size"] == len(payload)
        assert glance["name"] == "bosh-openstack-kvm-ubuntu-test/0.1" and glance["visibility"] == "private"
        assert glance["os_distro"] == "ubuntu" and glance["auto_disk_config"] == "true" and glance["team"] == "cpi"
        # bosh-openstack-cpi's image properties, as it names them
        assert (glance["hw_disk_bus"], glance["hw_scsi_model"], glance["hw_vif_multiqueue_enabled"]) == (
            "scsi", "virtio-scsi", "true")
        vm_cid = create_vm(cpi, cloud, stemcell_cid, 76)
        cpi("delete_vm", vm_cid)
    finally:
        assert cpi("delete_stemcell", stemcell_cid) is None
    assert cloud.client.request("image", "GET", f"/v2/images/{stemcell_cid}", ok=(404,)).status_code == 404
    assert cpi("delete_stemcell", stemcell_cid) is None


def test_disk_with_a_snapshot_or_attached_cannot_be_deleted_and_says_why(cloud, cpi):
    disk_cid = cpi("create_disk", 1024, {}, None)
    snapshot_cid = cpi("snapshot_disk", disk_cid, {"deployment": "dep", "job": "ig", "index": 0})
    try:
        err = error_of(cpi.call("delete_disk", disk_cid))
        assert err["type"] == "Bosh::Clouds::CloudError" and "cannot be deleted" in err["message"]
        assert "snapshot" in err["message"].lower()
        assert cloud.client.volume(disk_cid)["status"] == "available"
    finally:
        cpi("delete_snapshot", snapshot_cid)
        cpi("delete_disk", disk_cid)
    assert cloud.client.volume(disk_cid) is None


def test_vrrp_port_check_as_the_official_cpi(cloud, cpi, stemcell):
    """allowed_address_pairs name a VRRP address: a port must hold it (the official CPI's
    vrrp_port_check, on by default), or create_vm fails before anything is made; a manual
    network's vrrp_port_check: false skips the check."""
    client = cloud.client
    vrrp_ip, missing_ip = cloud.ip(85), cloud.ip(87)
    vrrp_port = client.request("network", "POST", "/v2.0/ports", json={"port": {
        "network_id": cloud.net_id, "name": f"vrrp-{uuid.uuid4()}", "fixed_ips": [{"ip_address": vrrp_ip}]}})["port"]
    try:
        vm_cid = create_vm(cpi, cloud, stemcell, 86, allowed_address_pairs=vrrp_ip)
        (port,) = client.ports(device_id=vm_cid)
        assert [pair["ip_address"] for pair in port["allowed_address_pairs"]] == [vrrp_ip]
        cpi("delete_vm", vm_cid)
        before = cloud.leftovers()
        err = error_of(cpi.call("create_vm", "a", stemcell, {**cloud.vm_cloud_properties(),
                                                             "allowed_address_pairs": missing_ip},
                                cloud.manual_network(88), [], {}))
        assert err["type"] == "Bosh::Clouds::VMCreationFailed"
        assert f"no port holds the VRRP address {missing_ip}" in err["message"]
        assert cloud.leftovers() == before
        unchecked = cloud.manual_network(88)
        unchecked["default"]["cloud_properties"]["vrrp_port_check"] = False
        vm_cid = create_vm(cpi, cloud, stemcell, 88, networks=unchecked, allowed_address_pairs=missing_ip)
        cpi("delete_vm", vm_cid)
    finally:
        client.request("network", "DELETE", f"/v2.0/ports/{vrrp_port['id']}", ok=(204, 404))
