"""The fleet bosh-openstack-cpi made before a switch, as the operator's commands see it
(#32): on the loopback OpenStack services, a server and a volume made the official CPI's way
(tests/openstack/test_switching.py), with the metadata the director sets through that CPI
and a snapshot of the volume as its snapshot_disk makes it. `cpi list` and `cpi show` find
the server (no metadata of this CPI's), `cpi list disks` calls the volume persistent, `cpi
list snapshots` shows the snapshot, and `cpi orphans`, given a known list that names the
server alone, offers neither the attached volume nor its snapshot (which carries the
director's UUID)."""

from __future__ import annotations

import uuid

import pytest

from tests.openstack import test_switching
from tests.openstack.test_switching import made_the_official_way
from tests.support.operator_cli import bosh_vms_json, cli, listed

official = test_switching.official  # the fixture: the official CPI's calls through openstacksdk

#: openstacksdk warns of its own deprecations, in its own code, hundreds of times a test
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack")


def test_the_official_cpis_server_volume_and_snapshot_are_seen_and_never_offered(cloud, client, official, tmp_path):
    director_uuid = f"director-{uuid.uuid4()}"
    vm_cid, disk_cid, port_id = made_the_official_way(cloud, client)
    snapshot_cid = None
    try:
        official.set_vm_metadata(vm_cid, {"director": "bosh-1", "deployment": "cf", "id": "uuid-8", "job": "db",
                                          "index": "0", "name": "db/uuid-8", "created_at": "2026-11-28T10:00:00Z"})
        official.set_disk_metadata(disk_cid, {"director": "bosh-1", "deployment": "cf", "instance_id": "uuid-8",
                                              "instance_index": "0", "instance_name": "db/uuid-8"})
        snapshot_cid = official.snapshot_disk(disk_cid, {
            "deployment": "cf", "job": "db", "index": 0, "director_name": "bosh-1", "director_uuid": director_uuid,
            "agent_id": "agent-official", "instance_id": "uuid-8"})

        vms = listed(cloud.config_path, "vms")
        assert vm_cid in vms and vms[vm_cid]["tags"]["job"] == "db"
        shown = cli(cloud.config_path, "show", "vm", vm_cid, "--json")
        assert shown.returncode == 0, shown.stderr
        details = listed(cloud.config_path, "disks")[disk_cid]["details"]
        assert (details["role"], details["attached_to"]) == ("persistent", vm_cid)
        assert listed(cloud.config_path, "snapshots")[snapshot_cid]["tags"]["director_uuid"] == director_uuid

        known = tmp_path / "known.json"
        known.write_text(bosh_vms_json("db/uuid-8", vm_cid))
        found = cli(cloud.config_path, "orphans", "--director-uuid", director_uuid, "--known", str(known), "--json")
        assert found.returncode == 0, found.stderr
        assert found.stdout.strip() == "[]", found.stdout
        assert "names no disk" in found.stderr
    finally:
        if snapshot_cid:
            official.delete_snapshot(snapshot_cid)
        official.detach_disk(vm_cid, disk_cid)
        official.delete_vm(vm_cid)
        official.delete_disk(disk_cid)
        client.request("network", "DELETE", f"/v2.0/ports/{port_id}", ok=(204, 404))
