"""A director that switches from bosh-aws-cpi keeps managing what that CPI made (#22).

The VM and disks are made here with the EC2 calls and shapes bosh-aws-cpi uses (read from
its source, not run: it needs Ruby gems this machine cannot install): the instance through
a network interface of its own, the root and an EBS ephemeral disk deleted with it, the
persistent disk a plain volume attached at the first /dev/sd[f-p] name, tags from the
manifest's env.bosh.tags and the vm_type, no tag of this CPI's. This CPI then does what a
director does after the switch: finds the VM and its persistent disk, tags, detaches,
attaches again, deletes, without leaving anything.
"""

from __future__ import annotations

import json

from tests.aws import moto_env

TAGS = {"director": "bosh-1", "deployment": "cf", "team": "platform"}


def made_the_official_way(ec2, account) -> tuple[str, str, str]:
    interface = ec2.create_network_interface(SubnetId=account.subnet_id, PrivateIpAddress="10.0.0.240",
                                             Groups=[account.security_group_id])["NetworkInterface"]
    specs = [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in TAGS.items()]}
             for kind in ("instance", "volume")]
    instance = ec2.run_instances(
        ImageId=account.ami_id, InstanceType="m5.large", MinCount=1, MaxCount=1, KeyName=account.key_name,
        NetworkInterfaces=[{"DeviceIndex": 0, "NetworkInterfaceId": interface["NetworkInterfaceId"]}],
        BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 10, "DeleteOnTermination": True}},
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
