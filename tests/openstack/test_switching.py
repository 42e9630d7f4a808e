"""A director that switches from bosh-openstack-cpi keeps managing what that CPI made (#22).

On the loopback OpenStack services, a VM and a persistent disk are made with the API calls
and shapes bosh-openstack-cpi uses (read from its source, not run: it needs Ruby gems this
machine cannot install): a Neutron port of its own on the network, a server booted on it
with the agent settings in user_data, a plain Cinder volume attached through Nova, none of
this CPI's metadata. This CPI then does what a director does after the switch.

And the way back (a rollback): what this CPI made is handed to the official CPI, whose calls
and lookups tests/openstack/official_cpi.py makes with openstacksdk, and to the agent of the
official stemcells, whose reading of user_data and disk hints tests/support/bosh_agent.py
models.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
import uuid

import pytest

from tests.openstack.official_cpi import OfficialOpenStackCpi
from tests.support import bosh_agent

#: openstacksdk warns of its own deprecations, in its own code, hundreds of times a test
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack")


def wait_for(check, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.5)


def made_the_official_way(cloud, client) -> tuple[str, str, str]:
    port = client.request("network", "POST", "/v2.0/ports",
                          json={"port": {"network_id": cloud.net_id, "name": f"port-{uuid.uuid4()}"}})["port"]
    flavors = client.get("compute", "/flavors")["flavors"]
    flavor = next(f["id"] for f in flavors if f["name"] == cloud.env["flavor"])
    settings = {"agent_id": f"agent-{uuid.uuid4()}", "vm": {"name": "vm-official"}, "env": {"bosh": {}}}
    server = {"name": f"vm-{uuid.uuid4()}", "imageRef": cloud.image_id, "flavorRef": flavor,
              "networks": [{"port": port["id"]}],
              "user_data": base64.b64encode(json.dumps(settings).encode()).decode()}
    if cloud.env.get("keypair"):
        server["key_name"] = cloud.env["keypair"]["name"]
    vm_cid = client.request("compute", "POST", "/servers", json={"server": server})["server"]["id"]
    wait_for(lambda: (client.server(vm_cid) or {}).get("status") == "ACTIVE", f"server {vm_cid} ACTIVE")
    disk_cid = client.request("block-storage", "POST", "/volumes",
                              json={"volume": {"size": 1, "name": f"volume-{uuid.uuid4()}"}})["volume"]["id"]
    wait_for(lambda: (client.volume(disk_cid) or {}).get("status") == "available", f"volume {disk_cid} available")
    client.request("compute", "POST", f"/servers/{vm_cid}/os-volume_attachments",
                   json={"volumeAttachment": {"volumeId": disk_cid}})
    wait_for(lambda: (client.volume(disk_cid) or {}).get("status") == "in-use", f"volume {disk_cid} in-use")
    return vm_cid, disk_cid, port["id"]


def test_this_cpi_manages_what_the_official_cpi_made(cloud, client, cpi):
    vm_cid, disk_cid, port_id = made_the_official_way(cloud, client)
    try:
        assert cpi("has_vm", vm_cid) is True
        assert cpi("has_disk", disk_cid) is True
        assert cpi("get_disks", vm_cid) == [disk_cid]
        cpi("set_vm_metadata", vm_cid, {"deployment": "cf", "job": "router", "index": "0"})
        assert client.server(vm_cid)["metadata"]["job"] == "router"
        cpi("detach_disk", vm_cid, disk_cid)
        assert cpi("get_disks", vm_cid) == []
        hint = cpi("attach_disk", vm_cid, disk_cid)
        assert hint and cpi("get_disks", vm_cid) == [disk_cid]
        cpi("detach_disk", vm_cid, disk_cid)
        cpi("delete_vm", vm_cid)
        assert cpi("has_vm", vm_cid) is False
        cpi("delete_disk", disk_cid)
        assert cpi("has_disk", disk_cid) is False
    finally:
        # what the test made itself and the CPI was not asked to remove (a failed step)
        client.request("compute", "DELETE", f"/servers/{vm_cid}", ok=(204, 404))
        wait_for(lambda: client.server(vm_cid) is None or client.server(vm_cid).get("status") == "DELETED",
                 f"server {vm_cid} gone")
        client.request("block-storage", "DELETE", f"/volumes/{disk_cid}", ok=(202, 400, 404))
        left_port = client.request("network", "GET", f"/v2.0/ports/{port_id}", ok=(200, 404))
        client.request("network", "DELETE", f"/v2.0/ports/{port_id}", ok=(204, 404))
    assert not isinstance(left_port, dict) or "port" not in left_port, \
        "delete_vm left the port the official CPI made for the VM (it deletes its ports with the VM)"


# ---------------------------------------------------------------- the way back (rollback)

ENV = {"bosh": {"group": "d-cf-router", "groups": ["d", "cf", "router"], "tags": {"team": "platform"},
                "mbus": {"urls": ["nats://nats:pw@10.20.0.6:4222"]},
                "blobstores": [{"provider": "dav", "options": {}}]}}


@pytest.fixture(scope="module")
def official(env) -> OfficialOpenStackCpi:
    """The official CPI's calls, through openstacksdk with the tests' own credentials."""
    import openstack

    conn = openstack.connection.Connection(
        auth_url=env["auth_url"], username=env["username"], password=env["password"],
        project_name=env["project_name"],
        user_domain_name=env.get("user_domain_name") or env.get("domain") or "Default",
        project_domain_name=env.get("project_domain_name") or env.get("domain") or "Default",
        region_name=env.get("region"), interface=env.get("interface", "public"), verify=env.get("verify", True),
    )
    yield OfficialOpenStackCpi(conn)
    conn.close()


def ephemeral_flavor(env) -> str:
    """A flavor with an ephemeral disk, when the cloud has one: the official CPI then starts
    persistent disks at letter c, and the agent finds /dev/sdb in its settings."""
    flavors = env.get("flavors") or {}
    return next((name for name, flavor in flavors.items() if flavor.get("ephemeral") and name != "m1.toobig"),
                env["flavor"])


def user_data(admin, vm_cid: str) -> bytes:
    """The server's user_data: what Nova's metadata service serves at /latest/user-data and
    writes to a config drive's ec2/latest/user-data, where the agent reads it."""
    detail = admin.request("compute", "GET", f"/servers/{vm_cid}")["server"]
    return base64.b64decode(detail["OS-EXT-SRV-ATTR:user_data"])


def nova_device(official: OfficialOpenStackCpi, vm_cid: str, disk_cid: str) -> str:
    return next(a.device for a in official.attachments(vm_cid) if a.volume_id == disk_cid)


def assert_agent_finds(hint, disk_cid: str, device: str) -> None:
    """The agent of the official stemcells, given `hint`, looks at the device Nova put the
    volume on (sdX, vdX or xvdX of the same letter)."""
    disk = bosh_agent.disk_settings(disk_cid, hint)
    assert device in bosh_agent.paths_tried(disk), \
        f"hint {hint!r}: the agent never looks at {device}, where Nova attached {disk_cid}"


def test_the_official_cpi_takes_over_what_this_cpi_made(cloud, client, cpi, admin, official, stemcell):
    """A rollback: a server booted from a volume, its persistent disk and a snapshot made by
    this CPI are found, detached, attached and deleted by bosh-openstack-cpi's calls, the
    agent (an official stemcell's) boots from this CPI's user_data and keeps the hint this
    CPI gave it, and nothing is left: not the port this CPI made, nor the boot volume."""
    before = cloud.leftovers()
    flavor = ephemeral_flavor(cloud.env)
    has_ephemeral = bool(((cloud.env.get("flavors") or {}).get(flavor) or {}).get("ephemeral"))
    networks = cloud.manual_network(120)
    vm_cid, _ = cpi("create_vm", f"agent-{uuid.uuid4()}", stemcell,
                    {**cloud.vm_cloud_properties(), "instance_type": flavor, "boot_from_volume": True},
                    networks, [], ENV)
    disk_cid = other_cid = None
    try:
        (port,) = client.ports(device_id=vm_cid)
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        hint = cpi("attach_disk", vm_cid, disk_cid)
        cpi("set_vm_metadata", vm_cid, {"director": "bosh-1", "deployment": "cf", "job": "router", "index": "0"})
        cpi("set_disk_metadata", disk_cid, {"director": "bosh-1", "deployment": "cf", "instance_index": "0"})
        snapshot_metadata = {"deployment": "cf", "job": "router", "index": 0, "director_name": "bosh-1",
                             "director_uuid": "uuid-d", "agent_id": "agent-1", "instance_id": "uuid-1"}
        snapshot_cid = cpi("snapshot_disk", disk_cid, snapshot_metadata)

        # found by its cids alone, as the official CPI looks
        assert official.has_vm(vm_cid) and official.has_disk(disk_cid)
        official.stemcell_image(stemcell)
        found = client.get("block-storage", f"/snapshots/{snapshot_cid}")["snapshot"]["metadata"]
        wanted = official.snapshot_metadata(snapshot_metadata)
        assert wanted.items() <= found.items(), \
            f"the official CPI's snapshot metadata missing: {wanted.items() - found.items()}"

        # the agent boots from this CPI's user_data
        settings = bosh_agent.read_user_data(user_data(admin, vm_cid))
        # the name the official CPI would key a registry by (no registry_key metadata: the server's)
        assert settings["server"]["name"] == official.server(vm_cid).name == settings["vm"]["name"]
        assert settings["disks"]["system"] == "/dev/sda" and settings["disks"]["persistent"] == {}
        ephemeral = settings["disks"]["ephemeral"]
        if has_ephemeral:
            assert bosh_agent.disk_settings(None, ephemeral)["path"] == "/dev/sdb", \
                "the official stemcells' agent looks for the flavor's ephemeral disk at /dev/sdb"
        else:
            assert ephemeral is None  # the agent then partitions the root disk
        network = settings["networks"]["default"]
        assert {k: network.get(k) for k in networks["default"]} == networks["default"]
        assert network["use_dhcp"] is True and network["mac"] == port["mac_address"]
        assert settings["dns"]["nameserver"] == networks["default"]["dns"]
        assert settings["env"] == ENV and settings["mbus"] and settings["ntp"]

        # the hint this CPI gave is the device the official CPI would name, where Nova put it
        device = nova_device(official, vm_cid, disk_cid)
        assert_agent_finds(hint, disk_cid, device)
        assert official.attach_disk(vm_cid, disk_cid) == device  # attached: Nova's device, as there
        official.detach_disk(vm_cid, disk_cid)
        assert official.attach_disk(vm_cid, disk_cid) == hint  # its own choice of letter: the same
        assert nova_device(official, vm_cid, disk_cid)[-1] == hint[-1]
        # a second disk of this CPI's, attached next to it by the official CPI, then back to this one
        other_cid = cpi("create_disk", 1024, {}, vm_cid)
        other_hint = official.attach_disk(vm_cid, other_cid)
        assert_agent_finds(other_hint, other_cid, nova_device(official, vm_cid, other_cid))
        assert other_hint[-1] == chr(ord(hint[-1]) + 1)
        assert sorted(cpi("get_disks", vm_cid)) == sorted([disk_cid, other_cid])
        cpi("detach_disk", vm_cid, other_cid)
        cpi("delete_disk", other_cid)

        # deleted the official CPI's way
        official.delete_snapshot(snapshot_cid)
        official.detach_disk(vm_cid, disk_cid)
        assert official.delete_vm(vm_cid) == [port["id"]], "delete_vm finds this CPI's port by the server"
        official.delete_disk(disk_cid)
        official.delete_stemcell(stemcell)
        official.stemcell_image(stemcell)  # a light stemcell's image stays
        assert cloud.leftovers() == before, "deleted the official CPI's way, this CPI's VM and disks leave these"
        assert cpi("has_vm", vm_cid) is False and cpi("has_disk", disk_cid) is False
    finally:
        cpi("delete_vm", vm_cid)
        for cid in (other_cid, disk_cid):
            if cid:
                cpi("delete_disk", cid)


def test_made_by_the_official_cpi_driven_by_this_one_and_handed_back(cloud, client, cpi, official):
    """Switched and rolled back: a server of the official CPI's gets a disk of this CPI's,
    which the official CPI then detaches, attaches again at the same device and deletes, with
    the server and the port it made for it."""
    vm_cid, official_disk, port_id = made_the_official_way(cloud, client)
    disk_cid = None
    try:
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        hint = cpi("attach_disk", vm_cid, disk_cid)
        assert_agent_finds(hint, disk_cid, nova_device(official, vm_cid, disk_cid))
        cpi("set_vm_metadata", vm_cid, {"deployment": "cf", "job": "router", "index": "0"})

        official.detach_disk(vm_cid, disk_cid)
        assert official.attach_disk(vm_cid, disk_cid) == hint
        official.detach_disk(vm_cid, disk_cid)
        official.detach_disk(vm_cid, official_disk)
        assert official.delete_vm(vm_cid) == [port_id]
        official.delete_disk(disk_cid)
        official.delete_disk(official_disk)
        assert not official.has_disk(disk_cid) and not official.has_vm(vm_cid)
    finally:
        client.request("compute", "DELETE", f"/servers/{vm_cid}", ok=(204, 404))
        wait_for(lambda: client.server(vm_cid) is None or client.server(vm_cid).get("status") == "DELETED",
                 f"server {vm_cid} gone")
        for cid in (disk_cid, official_disk):
            if cid:
                client.request("block-storage", "DELETE", f"/volumes/{cid}", ok=(202, 400, 404))
        client.request("network", "DELETE", f"/v2.0/ports/{port_id}", ok=(204, 404))


def test_the_official_cpi_deletes_this_cpis_stemcells(cloud, cpi, official, stemcell, tmp_path):
    """A heavy stemcell's cid is its Glance image, which the official CPI deletes; a light
    one's ends in " light", which it parses to the image and leaves alone."""
    assert official.stemcell_image(stemcell).id == cloud.image_id
    payload = b"\0" * (1024 * 1024)
    image = tmp_path / "image"
    with tarfile.open(image, "w:gz") as tar:
        info = tarfile.TarInfo("root.img")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    heavy = cpi("create_stemcell", str(image), {"name": "bosh-openstack-kvm-ubuntu-rollback", "version": "0.1",
                                                "disk_format": "raw", "container_format": "bare"})
    try:
        assert official.stemcell_image(heavy).id == heavy
        official.delete_stemcell(heavy)
        assert cloud.client.request("image", "GET", f"/v2/images/{heavy}", ok=(200, 404)).status_code == 404
    finally:
        cpi("delete_stemcell", heavy)


def test_the_official_cpi_finds_this_cpis_load_balancer_memberships():
    """delete_vm removes the Octavia pool memberships the server's metadata names: this CPI
    writes them as the official CPI reads them (the loopback cloud has no Octavia, so this
    compares the documents)."""
    from cpi.clouds.openstack import lbaas

    members = [("pool-a", "member-1"), ("pool-b", "member-2")]
    metadata = {"agent_id": "agent-1", "director_uuid": "uuid-d", **lbaas.metadata_for(members)}
    assert sorted(OfficialOpenStackCpi.memberships(metadata)) == members
    assert lbaas.memberships(metadata) == members
