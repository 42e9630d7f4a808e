"""The fleet bosh-aws-cpi made before a switch, as the operator's commands see it (#32):
`cpi list` and `cpi show` find its VM, disks and snapshot by the tags the director and the
official CPI set (none of this CPI's); `cpi list disks` tells the VM's root and ephemeral
volumes from the persistent disk; `cpi list snapshots` shows the director's snapshots only,
never those behind the account's AMIs; and `cpi orphans`, given a known list that names
the VM alone, offers none of what the cloud shows alive (the attached disk, its snapshot,
which carries the director's UUID) while a real orphan is offered and deleted. Through the
real `cpi` command against moto."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.aws import moto_env
from tests.aws.official_cpi import OfficialAwsCpi
from tests.aws.test_switching import made_the_official_way
from tests.support.operator_cli import bosh_vms_json, cli, listed
from tests.support.runner import Cpi


@pytest.fixture(scope="module")
def fleet(ec2, account):
    """A VM of the official CPI's with its persistent disk and a snapshot of it, tagged as a
    director tags them through that CPI."""
    official = OfficialAwsCpi(ec2)
    director_uuid = f"director-{uuid.uuid4()}"
    # the root device is the AMI's (BlockDeviceManager), whatever moto makes of the one registered
    root_device = ec2.describe_images(ImageIds=[account.ami_id])["Images"][0]["RootDeviceName"]
    vm_cid, disk_cid, interface_id = made_the_official_way(ec2, account, "m5.large", ip="10.0.15.243",
                                                           root_device=root_device)
    official.set_vm_metadata(vm_cid, {"director": "bosh-1", "deployment": "cf", "id": "uuid-7", "job": "db",
                                      "instance_group": "db", "index": "0", "name": "db/uuid-7",
                                      "created_at": "2026-11-28T10:00:00Z"})
    official.set_disk_metadata(disk_cid, {"director": "bosh-1", "deployment": "cf", "instance_id": "uuid-7",
                                          "job": "db", "instance_index": "0", "instance_name": "db/uuid-7",
                                          "attached_at": "2026-11-28T10:01:00Z"})
    snapshot_cid = official.snapshot_disk(disk_cid, {
        "deployment": "cf", "job": "db", "index": 0, "director_name": "bosh-1", "director_uuid": director_uuid,
        "agent_id": "agent-official", "instance_id": "uuid-7"})
    volumes = {m["DeviceName"]: m["Ebs"]["VolumeId"] for m in official.instance(vm_cid)["BlockDeviceMappings"]}
    yield {"official": official, "director_uuid": director_uuid, "vm": vm_cid, "disk": disk_cid,
           "snapshot": snapshot_cid, "root": volumes[root_device], "ephemeral": volumes["/dev/sdb"]}
    official.delete_snapshot(snapshot_cid)
    official.detach_disk(vm_cid, disk_cid)
    official.delete_vm(vm_cid)
    official.delete_disk(disk_cid)
    ec2.delete_network_interface(NetworkInterfaceId=interface_id)  # EC2 would delete it with the VM; moto keeps it


def test_list_and_show_see_the_official_cpis_vm_disks_and_snapshot(fleet, config_path, cpi):
    assert cpi("has_vm", fleet["vm"]) is True
    vms = listed(config_path, "vms")
    assert fleet["vm"] in vms and vms[fleet["vm"]]["tags"]["job"] == "db"
    shown = cli(config_path, "show", "vm", fleet["vm"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["tags"]["Name"] == "db/uuid-7"
    disks = listed(config_path, "disks")
    roles = {cid: disks[cid]["details"]["role"] for cid in (fleet["disk"], fleet["root"], fleet["ephemeral"])}
    assert roles == {fleet["disk"]: "persistent", fleet["root"]: "root", fleet["ephemeral"]: "ephemeral"}
    table = cli(config_path, "list", "disks", "--column", "cid", "--column", "role")  # piped: rows, tab-separated
    assert table.returncode == 0, table.stderr
    assert {tuple(cell.strip() for cell in line.split("\t")[:2]) for line in table.stdout.splitlines()} >= {
        (fleet["root"], "root"), (fleet["ephemeral"], "ephemeral"), (fleet["disk"], "persistent")}
    assert json.loads(cli(config_path, "show", "disk", fleet["ephemeral"], "--json").stdout)["details"]["role"] \
        == "ephemeral"
    shown = cli(config_path, "show", "snapshot", fleet["snapshot"], "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["tags"]["director_uuid"] == fleet["director_uuid"]


def test_list_snapshots_shows_the_directors_not_the_amis(fleet, ec2, config_path):
    """moto's account holds some 1,300 snapshots behind its AMIs, as a real one may; here
    one more AMI, whose snapshot even carries a director's tag (a stemcell's, tagged from
    env.bosh.tags), and a snapshot someone made by hand: none is a director's."""
    volume = ec2.create_volume(Size=1, AvailabilityZone=moto_env.ZONE)["VolumeId"]
    by_hand = ec2.create_snapshot(VolumeId=volume, Description="by hand")["SnapshotId"]
    image = ec2.register_image(Name=f"stemcell-{uuid.uuid4().hex[:8]}", Architecture="x86_64",
                               RootDeviceName="/dev/xvda", VirtualizationType="hvm",
                               BlockDeviceMappings=[{"DeviceName": "/dev/xvda",
                                                     "Ebs": {"SnapshotId": by_hand}}])["ImageId"]
    # moto backs the image with a snapshot of its own making, as EC2 names the one it was given
    behind = next(m["Ebs"]["SnapshotId"] for m in ec2.describe_images(ImageIds=[image])["Images"][0][
        "BlockDeviceMappings"] if m.get("Ebs", {}).get("SnapshotId"))
    ec2.create_tags(Resources=[behind], Tags=[{"Key": "director", "Value": "bosh-1"}])
    try:
        account_snapshots = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
        assert len(account_snapshots) > 1000 and behind in account_snapshots
        snapshots = listed(config_path, "snapshots")
        assert fleet["snapshot"] in snapshots
        assert not set(snapshots) & {behind, by_hand}
        assert len(snapshots) < 10, sorted(snapshots)
    finally:
        ec2.deregister_image(ImageId=image)
        for snapshot in {behind, by_hand}:
            ec2.delete_snapshot(SnapshotId=snapshot)
        ec2.delete_volume(VolumeId=volume)


def test_orphans_offers_nothing_alive_of_the_fleet_and_deletes_a_real_orphan(fleet, config_path, tmp_path):
    """The known list names the VM alone (`bosh vms --json`): its attached disk, the
    snapshot of it (tagged with the director's UUID by the official CPI) and its root and
    ephemeral volumes are not offered; a detached disk this CPI made for the director and
    nobody knows is, and --delete removes it and nothing else."""
    director = Cpi(config_path, director_uuid=fleet["director_uuid"])
    lost = director("create_disk", 1024, {}, None)
    known = tmp_path / "known.json"
    known.write_text(bosh_vms_json("db/uuid-7", fleet["vm"]))
    try:
        found = cli(config_path, "orphans", "--director-uuid", fleet["director_uuid"], "--known", str(known),
                    "--json")
        assert found.returncode == 0, found.stderr
        assert [(r["kind"], r["cid"]) for r in json.loads(found.stdout)] == [("disk", lost)]
        assert "`bosh vms --json` names no disk" in found.stderr
        deleted = cli(config_path, "orphans", "--director-uuid", fleet["director_uuid"], "--known", str(known),
                      "--delete", "-n")
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        assert f"deleted disk {lost}" in deleted.stderr and deleted.stderr.count("deleted ") == 1
        official = fleet["official"]
        assert director("has_disk", lost) is False
        assert official.has_vm(fleet["vm"]) and official.has_disk(fleet["disk"])
        assert official.has_disk(fleet["root"]) and official.has_disk(fleet["ephemeral"])
        assert fleet["snapshot"] in listed(config_path, "snapshots")
    finally:
        director("delete_disk", lost)
