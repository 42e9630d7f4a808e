"""A director that switches from bosh-aws-cpi keeps managing what that CPI made (#22).

The VM and disks are made here with the EC2 calls and shapes bosh-aws-cpi uses (read from
its source, not run: it needs Ruby gems this machine cannot install): the instance through
a network interface of its own, the root and an EBS ephemeral disk deleted with it, the
persistent disk a plain volume attached at the first /dev/sd[f-p] name, tags from the
manifest's env.bosh.tags and the vm_type, no tag of this CPI's. This CPI then does what a
director does after the switch: finds the VM and its persistent disk, tags, detaches,
attaches again, deletes, without leaving anything.

And the way back (a rollback): what this CPI made is handed to the official CPI, whose calls
and lookups tests/aws/official_cpi.py makes with botocore, and to the agent of the official
stemcells, whose reading of user-data and disk hints tests/support/bosh_agent.py models.
"""

from __future__ import annotations

import base64
import json

from tests.aws import moto_env
from tests.aws.official_cpi import OfficialAwsCpi
from tests.support import bosh_agent

TAGS = {"director": "bosh-1", "deployment": "cf", "team": "platform"}


def made_the_official_way(ec2, account, instance_type: str = "m5.large", ip: str = "10.0.0.240",
                          root_device: str = "/dev/xvda") -> tuple[str, str, str]:
    interface = ec2.create_network_interface(SubnetId=account.subnet_id, PrivateIpAddress=ip,
                                             Groups=[account.security_group_id])["NetworkInterface"]
    specs = [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in TAGS.items()]}
             for kind in ("instance", "volume")]
    instance = ec2.run_instances(
        ImageId=account.ami_id, InstanceType=instance_type, MinCount=1, MaxCount=1, KeyName=account.key_name,
        NetworkInterfaces=[{"DeviceIndex": 0, "NetworkInterfaceId": interface["NetworkInterfaceId"]}],
        BlockDeviceMappings=[{"DeviceName": root_device, "Ebs": {"VolumeSize": 10, "DeleteOnTermination": True}},
                             {"DeviceName": "/dev/sdb", "Ebs": {"VolumeSize": 25, "VolumeType": "gp3",
                                                                "DeleteOnTermination": True}}],
        UserData=json.dumps({"server": {"name": "vm-official"}, "registry": {"endpoint": ""}}),
        TagSpecifications=specs, Placement={"AvailabilityZone": moto_env.ZONE},
    )["Instances"][0]
    attachment = ec2.describe_network_interfaces(NetworkInterfaceIds=[interface["NetworkInterfaceId"]])[
        "NetworkInterfaces"][0]["Attachment"]["AttachmentId"]
    ec2.modify_network_interface_attribute(NetworkInterfaceId=interface["NetworkInterfaceId"],
                                           Attachment={"AttachmentId": attachment, "DeleteOnTermination": True})
    volume = ec2.create_volume(Size=10, AvailabilityZone=moto_env.ZONE, VolumeType="gp3", Encrypted=False)
    ec2.attach_volume(VolumeId=volume["VolumeId"], InstanceId=instance["InstanceId"], Device="/dev/sdf")
    return instance["InstanceId"], volume["VolumeId"], interface["NetworkInterfaceId"]


def test_this_cpi_manages_what_the_official_cpi_made(cpi, ec2, account):
    vm_cid, disk_cid, interface_id = made_the_official_way(ec2, account)
    assert cpi("has_vm", vm_cid) is True
    assert cpi("has_disk", disk_cid) is True
    assert cpi("get_disks", vm_cid) == [disk_cid]  # not the root or the ephemeral disk
    cpi("set_vm_metadata", vm_cid, {"deployment": "cf", "job": "router", "index": "0"})
    tags = {t["Key"]: t["Value"] for t in ec2.describe_tags(
        Filters=[{"Name": "resource-id", "Values": [vm_cid]}])["Tags"]}
    assert tags["job"] == "router" and tags["team"] == "platform"  # added to, not replaced
    cpi("detach_disk", vm_cid, disk_cid)
    assert cpi("get_disks", vm_cid) == []
    hint = cpi("attach_disk", vm_cid, disk_cid)
    assert hint == "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + disk_cid.replace("-", "")  # m5: NVMe
    assert cpi("get_disks", vm_cid) == [disk_cid]
    cpi("detach_disk", vm_cid, disk_cid)
    cpi("delete_vm", vm_cid)
    assert cpi("has_vm", vm_cid) is False
    cpi("delete_disk", disk_cid)
    assert cpi("has_disk", disk_cid) is False
    left = moto_env.inventory(ec2)
    assert disk_cid not in left["volumes"] and vm_cid not in left["instances"]
    # EC2 deletes the interface with the instance (DeleteOnTermination, as the official CPI
    # sets it); moto keeps it, so the test removes what it made itself
    ec2.delete_network_interface(NetworkInterfaceId=interface_id)


# ---------------------------------------------------------------- the way back (rollback)

ENV = {"bosh": {"group": "d-cf-router", "groups": ["d", "cf", "router"], "tags": {"team": "platform"},
                "mbus": {"urls": ["nats://nats:pw@10.0.0.6:4222"]}, "blobstores": [{"provider": "dav", "options": {}}]}}
VM_PROPS = {"instance_type": "m5.large", "availability_zone": moto_env.ZONE}  # Nitro: EBS as NVMe


def user_data(ec2, vm_cid: str) -> bytes:
    """The VM's user-data as the agent gets it from the metadata service (EC2 keeps it
    base64-encoded in the instance attribute)."""
    value = ec2.describe_instance_attribute(InstanceId=vm_cid, Attribute="userData")["UserData"]["Value"]
    return base64.b64decode(value)


def attachment_device(official: OfficialAwsCpi, disk_cid: str, vm_cid: str) -> str:
    return next(a["Device"] for a in official.volume(disk_cid)["Attachments"] if a["InstanceId"] == vm_cid)


def assert_agent_finds(hint, disk_cid: str, device: str, nvme: bool) -> None:
    """The agent of the official stemcells, given `hint` for a volume EC2 attached at
    `device`, finds that volume: on NVMe instances by the volume's by-id name (as EC2 names
    it: nvme-Amazon_Elastic_Block_Store_vol<id without the dash>), elsewhere by the device
    name (which Xen guests call /dev/xvdX)."""
    disk = bosh_agent.disk_settings(disk_cid, hint)
    by_ec2 = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + disk_cid.replace("-", "")
    if nvme:
        assert bosh_agent.by_id_names(disk, bosh_agent.AWS_DISK_ID) == by_ec2
        assert bosh_agent.paths_tried(disk) == [by_ec2], f"hint {hint!r}: the agent's fallback misses {by_ec2}"
    else:
        assert device in bosh_agent.paths_tried(disk), f"hint {hint!r}: the agent never looks at {device}"


def test_the_official_cpi_takes_over_what_this_cpi_made(cpi, ec2, account, stemcell, ips):
    """A rollback: a VM, its persistent disk and a snapshot made by this CPI are found,
    detached, attached and deleted by bosh-aws-cpi's calls, the agent (an official stemcell's)
    boots from this CPI's user-data and keeps the hint this CPI gave it, and nothing is left."""
    official = OfficialAwsCpi(ec2)
    before = moto_env.inventory(ec2)
    networks = ips.network()
    vm_cid, _ = cpi("create_vm", "agent-rollback", stemcell, VM_PROPS, networks, [], ENV)
    disk_cid = cpi("create_disk", 1024, {}, vm_cid)
    hint = cpi("attach_disk", vm_cid, disk_cid)
    cpi("set_vm_metadata", vm_cid, {"director": "bosh-1", "deployment": "cf", "job": "router", "index": "0"})
    cpi("set_disk_metadata", disk_cid, {"director": "bosh-1", "deployment": "cf", "instance_index": "0"})
    snapshot_metadata = {"deployment": "cf", "job": "router", "index": 0, "director_name": "bosh-1",
                         "director_uuid": "uuid-d", "agent_id": "agent-rollback", "instance_id": "uuid-1"}
    snapshot_cid = cpi("snapshot_disk", disk_cid, snapshot_metadata)

    # found by its cids alone, as the official CPI looks
    assert official.has_vm(vm_cid) and official.has_disk(disk_cid)
    image = official.stemcell_image(stemcell)  # " light": the AMI, found, never deleted
    instance = official.instance(vm_cid)
    assert disk_cid in official.get_disks(vm_cid)
    snapshot = ec2.describe_snapshots(SnapshotIds=[snapshot_cid])["Snapshots"][0]
    tags = {t["Key"]: t["Value"] for t in snapshot.get("Tags", [])}
    wanted = official.snapshot_tags(snapshot_metadata, "/dev/sdf")
    assert wanted.items() <= tags.items(), f"the official CPI's snapshot tags missing: {wanted.items() - tags.items()}"

    # the agent boots from this CPI's user-data: settings where the official CPI puts them
    settings = bosh_agent.read_user_data(user_data(ec2, vm_cid))
    assert settings["agent_id"] == "agent-rollback" and settings["vm"]["name"]
    assert settings["disks"]["system"] == image["RootDeviceName"]  # the official CPI's system disk
    assert settings["disks"]["persistent"] == {}  # hints reach the agent through attach_disk, as there
    ephemeral = bosh_agent.disk_settings(None, settings["disks"]["ephemeral"])
    mappings = {m["DeviceName"]: m for m in instance["BlockDeviceMappings"]}
    assert ephemeral["path"] == "/dev/sdb" and mappings["/dev/sdb"]["Ebs"]["DeleteOnTermination"], \
        "the official stemcells' agent looks for its ephemeral disk at /dev/sdb"
    for name, network in networks.items():
        got = settings["networks"][name]
        assert {k: got.get(k) for k in network} == network and got["use_dhcp"] is True
    assert settings["dns"]["nameserver"] == networks["default"]["dns"]
    assert settings["env"] == ENV and settings["mbus"] and settings["ntp"]

    # the hint this CPI gave is the official CPI's for that attachment, and finds the volume
    device = attachment_device(official, disk_cid, vm_cid)
    assert device == "/dev/sdf"  # the first of /dev/sdf..sdp, as the official CPI picks
    assert hint == official.device_path(device, instance["InstanceType"], disk_cid)
    assert_agent_finds(hint, disk_cid, device, nvme=True)

    # the official CPI detaches and attaches it again: the same device and hint
    official.detach_disk(vm_cid, disk_cid)
    assert official.attach_disk(vm_cid, disk_cid) == hint
    assert attachment_device(official, disk_cid, vm_cid) == device
    # a second disk of this CPI's, attached next to it by the official CPI, then back to this one
    other_cid = cpi("create_disk", 1024, {}, vm_cid)
    other_hint = official.attach_disk(vm_cid, other_cid)
    assert attachment_device(official, other_cid, vm_cid) == "/dev/sdg"
    assert_agent_finds(other_hint, other_cid, "/dev/sdg", nvme=True)
    assert sorted(cpi("get_disks", vm_cid)) == sorted([disk_cid, other_cid])
    cpi("detach_disk", vm_cid, other_cid)
    cpi("delete_disk", other_cid)

    # deleted the official CPI's way: nothing is left (root and ephemeral volumes and the
    # interface go with the instance), and the light stemcell's AMI stays
    official.delete_snapshot(snapshot_cid)
    official.detach_disk(vm_cid, disk_cid)
    official.delete_vm(vm_cid)
    official.delete_disk(disk_cid)
    official.delete_stemcell(stemcell)
    left = {kind: sorted(ids - before[kind]) for kind, ids in moto_env.inventory(ec2).items() if ids - before[kind]}
    assert not left, f"deleted the official CPI's way, this CPI's VM, disks and snapshot leave {left}"
    assert cpi("has_vm", vm_cid) is False and cpi("has_disk", disk_cid) is False


def test_made_by_the_official_cpi_driven_by_this_one_and_handed_back(cpi, ec2, account):
    """Switched and rolled back: a VM of the official CPI's (a Xen type: hints are device
    names) gets a disk of this CPI's, which the official CPI then detaches, attaches again at
    the same device with the same hint, and deletes with the VM."""
    official = OfficialAwsCpi(ec2)
    vm_cid, official_disk, interface_id = made_the_official_way(ec2, account, "c4.large", ip="10.0.15.241")
    disk_cid = cpi("create_disk", 1024, {"type": "gp3"}, vm_cid)
    hint = cpi("attach_disk", vm_cid, disk_cid)
    device = attachment_device(official, disk_cid, vm_cid)
    assert (hint, device) == ("/dev/sdg", "/dev/sdg")  # sdf is the official CPI's disk
    assert hint == official.device_path(device, "c4.large", disk_cid)
    assert_agent_finds(hint, disk_cid, device, nvme=False)
    cpi("set_vm_metadata", vm_cid, {"deployment": "cf", "job": "router", "index": "0"})

    official.detach_disk(vm_cid, disk_cid)
    assert official.attach_disk(vm_cid, disk_cid) == hint
    official.detach_disk(vm_cid, disk_cid)
    official.detach_disk(vm_cid, official_disk)
    official.delete_vm(vm_cid)
    official.delete_disk(disk_cid)
    official.delete_disk(official_disk)
    left = moto_env.inventory(ec2)
    assert not {disk_cid, official_disk} & left["volumes"] and vm_cid not in left["instances"]
    ec2.delete_network_interface(NetworkInterfaceId=interface_id)  # moto keeps it (see above)
