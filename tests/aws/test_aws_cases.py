"""AWS-only cases, through bin/cpi against moto_server: what the shared lifecycle cannot
check because it is EC2's (Elastic IPs, tags on volumes, NVMe hints, light and heavy
stemcells, security groups, clean-up after a failed create, throttling, credentials).

Where moto differs from real EC2 the test says so in a comment; the CPI is written for
real EC2.
"""

from __future__ import annotations

import base64
import io
import json
import re
import tarfile
import time

import pytest

from tests.aws import moto_env
from tests.aws.conftest import VM_PROPS
from tests.faults.proxy import FaultProxy
from tests.support.listener import Listener
from tests.support.runner import Cpi

ENV = {"bosh": {"group": "d-dep-ig", "groups": ["d", "dep"], "tags": {"team": "cpi", "cost-center": "42"},
                "password": "$6$salt$not-a-real-hash"}}


def requests_of(response) -> dict[str, int]:
    """The per-call request count the aws cloud logs: `<method>: N AWS requests (Op n, ...)`."""
    match = re.search(r"\d+ AWS requests? \(([^)]*)\)", response.log)
    if not match:
        return {}
    return {op: int(n) for op, n in (item.rsplit(" ", 1) for item in match.group(1).split(", "))}


def instance(ec2, vm_cid) -> dict:
    return ec2.describe_instances(InstanceIds=[vm_cid])["Reservations"][0]["Instances"][0]


def tags_of(item) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", [])}


def root_device(ec2, image_id) -> str:
    return ec2.describe_images(ImageIds=[image_id])["Images"][0]["RootDeviceName"]


def root_and_ephemeral(ec2, vm_cid) -> list[dict]:
    ids = [m["Ebs"]["VolumeId"] for m in instance(ec2, vm_cid)["BlockDeviceMappings"]]
    return ec2.describe_volumes(VolumeIds=ids)["Volumes"]


@pytest.fixture(scope="module")
def vm_with_vip(cpi, stemcell, account, ips, ec2):
    """One VM with most of what vm_type can ask for (vip, tags, load balancers, instance
    profile, IMDSv2, no source/dest check), shared by the checks below."""
    moto_env.client("elb", account.endpoint).create_load_balancer(
        LoadBalancerName="bosh-elb", Listeners=[{"Protocol": "HTTP", "LoadBalancerPort": 80, "InstancePort": 80}],
        Subnets=[account.subnet_id])
    moto_env.client("elbv2", account.endpoint).create_target_group(
        Name="bosh-tg", Protocol="HTTP", Port=80, VpcId=account.vpc_id, TargetType="instance")
    moto_env.client("iam", account.endpoint).create_instance_profile(InstanceProfileName="bosh-director")
    networks = ips.network()
    networks["public"] = {"type": "vip", "ip": account.elastic_ip, "cloud_properties": {}}
    vm_props = {**VM_PROPS, "tags": {"team": "vm-type-wins"}, "elbs": ["bosh-elb"], "lb_target_groups": ["bosh-tg"],
                "iam_instance_profile": "bosh-director", "source_dest_check": False,
                "metadata_options": {"http_tokens": "required"}}
    response = cpi.call("create_vm", "agent-vip", stemcell, vm_props, networks, [], ENV)
    vm_cid, networks_out = response.result
    yield vm_cid, networks, networks_out, response
    cpi("delete_vm", vm_cid)


# ---------------------------------------------------------------- create_vm


def test_create_vm_makes_one_instance_with_everything_in_one_request(vm_with_vip, ec2, account):
    vm_cid, networks, networks_out, response = vm_with_vip
    assert networks_out == networks
    found = instance(ec2, vm_cid)
    assert found["State"]["Name"] == "running"
    assert found["InstanceType"] == "m5.large"
    assert found["PrivateIpAddress"] == networks["default"]["ip"]
    assert found["SubnetId"] == account.subnet_id
    assert found["KeyName"] == account.key_name  # default_key_name
    # create-time tags: env.bosh.tags under vm_type tags, on instance, volumes and interface,
    # plus where the VM came from (so a create_vm killed mid-way leaves findable resources)
    expected = {"team": "vm-type-wins", "cost-center": "42", "agent_id": "agent-vip",
                "director_uuid": "director-uuid-1"}
    assert tags_of(found) == expected
    for volume in root_and_ephemeral(ec2, vm_cid):
        assert tags_of(volume) == expected
    devices = {m["DeviceName"] for m in found["BlockDeviceMappings"]}
    # the AMI's root device (moto's RegisterImage always says /dev/sda1) and the ephemeral disk
    assert devices == {root_device(ec2, account.ami_id), "/dev/sdb"}
    assert found["MetadataOptions"]["HttpTokens"] == "required"
    assert found["IamInstanceProfile"]["Arn"].endswith("instance-profile/bosh-director")
    source_dest = ec2.describe_instance_attribute(InstanceId=vm_cid, Attribute="sourceDestCheck")
    assert source_dest["SourceDestCheck"]["Value"] is False
    counts = requests_of(response)
    assert counts.get("RunInstances") == 1 and "CreateTags" not in counts
    # DescribeImages (root device), DescribeSecurityGroups (a default group given by name),
    # RunInstances, the running wait; then what this vm_type asks for: ModifyInstanceAttribute,
    # DescribeAddresses + AssociateAddress, and the load balancers' four
    assert sum(counts.values()) <= 4 + 1 + 2 + 4, counts


def test_load_balancers_get_the_vm(vm_with_vip, account):
    vm_cid = vm_with_vip[0]
    elb = moto_env.client("elb", account.endpoint).describe_load_balancers(LoadBalancerNames=["bosh-elb"])
    assert {"InstanceId": vm_cid} in elb["LoadBalancerDescriptions"][0]["Instances"]
    elbv2 = moto_env.client("elbv2", account.endpoint)
    group = elbv2.describe_target_groups(Names=["bosh-tg"])["TargetGroups"][0]
    targets = elbv2.describe_target_health(TargetGroupArn=group["TargetGroupArn"])["TargetHealthDescriptions"]
    assert [t["Target"]["Id"] for t in targets] == [vm_cid]


def test_agent_settings_travel_in_user_data(vm_with_vip, ec2, account):
    vm_cid, networks, _, _ = vm_with_vip
    data = ec2.describe_instance_attribute(InstanceId=vm_cid, Attribute="userData")["UserData"]["Value"]
    settings = json.loads(base64.b64decode(data))
    assert settings["agent_id"] == "agent-vip"
    assert settings["vm"]["name"].startswith("vm-")
    assert settings["env"] == ENV  # verbatim, password and all: it is the agent's
    assert settings["disks"] == {"system": root_device(ec2, account.ami_id), "ephemeral": "/dev/sdb", "persistent": {}}
    assert settings["networks"]["default"]["use_dhcp"] is True
    assert settings["networks"]["default"]["ip"] == networks["default"]["ip"]
    assert settings["dns"] == {"nameserver": ["10.0.0.2"]}
    assert settings["mbus"].startswith("nats://")
    assert "registry" not in settings


def test_vip_network_associates_the_elastic_ip(vm_with_vip, ec2, account):
    vm_cid = vm_with_vip[0]
    address = ec2.describe_addresses(PublicIps=[account.elastic_ip])["Addresses"][0]
    assert address["InstanceId"] == vm_cid


def test_set_vm_metadata_tags_instance_and_its_own_volumes(vm_with_vip, cpi, ec2):
    vm_cid = vm_with_vip[0]
    disk_cid = cpi("create_disk", 1024, {}, vm_cid)
    cpi("attach_disk", vm_cid, disk_cid)
    long_value = "v" * 300
    response = cpi.call("set_vm_metadata", vm_cid, {"director": "bosh", "deployment": "dep", "job": "web",
                                                    "index": "3", "k" * 200: long_value, "aws:reserved": "x"})
    assert response.error is None
    expected_name = "web/3"  # no `name`: job/index
    found = tags_of(instance(ec2, vm_cid))
    assert found["Name"] == expected_name and found["deployment"] == "dep"
    assert found["k" * 127] == "v" * 255  # truncated to EC2's limits
    assert "aws:reserved" not in found
    for volume in root_and_ephemeral(ec2, vm_cid):
        if volume["VolumeId"] == disk_cid:
            # persistent disks keep their own (set_disk_metadata) tags
            assert "Name" not in tags_of(volume)
        else:
            assert tags_of(volume)["Name"] == expected_name
    assert sum(requests_of(response).values()) == 2  # DescribeInstances + one CreateTags for all
    cpi("set_vm_metadata", vm_cid, {"name": "web/uuid-1", "job": "web", "index": "3"})
    assert tags_of(instance(ec2, vm_cid))["Name"] == "web/uuid-1"  # `name` wins
    cpi("detach_disk", vm_cid, disk_cid)
    cpi("delete_disk", disk_cid)


def test_security_group_precedence(vm_with_vip, nitro_vm, xen_vm, ec2, account):
    """vm_type groups > network groups > default_security_groups; names become IDs. The
    three shared VMs were made one way each (see their fixtures)."""
    def groups(vm_cid):
        # the groups of the VM's interface: moto leaves the instance-level SecurityGroups
        # empty when they are given per interface; EC2 reports them in both places
        return {g["GroupId"] for g in instance(ec2, vm_cid)["NetworkInterfaces"][0]["Groups"]}

    assert groups(nitro_vm) == {account.extra_group_id}  # vm_type (by name) over the network's
    assert groups(xen_vm) == {account.extra_group_id}  # the network's over the default
    assert groups(vm_with_vip[0]) == {account.security_group_id}  # default_security_groups, by name


def test_dynamic_network_and_context_overrides(cpi, stemcell, ec2, account):
    """A dynamic network in the other subnet; request context keys that name aws
    properties override the config for the call (a director cpi-config sends them), and a
    secret among them stays out of every output."""
    ec2.create_key_pair(KeyName="from-context")
    networks = {"default": {"type": "dynamic", "dns": ["10.0.0.2"], "default": ["dns", "gateway"],
                            "cloud_properties": {"subnet": account.other_subnet_id}}}
    context = {"default_key_name": "from-context", "secret_access_key": "context-secret-value-1234"}
    response = cpi.call("create_vm", "agent-dyn", stemcell, {"instance_type": "t3.micro"}, networks, [], {},
                        context=context)
    vm_cid = response.result[0]
    try:
        found = instance(ec2, vm_cid)
        assert found["SubnetId"] == account.other_subnet_id
        assert found["Placement"]["AvailabilityZone"] == moto_env.OTHER_ZONE
        assert found["PrivateIpAddress"].startswith("10.0.")
        assert found["KeyName"] == "from-context"
        for text in (response.raw, response.stderr):
            assert "context-secret-value-1234" not in text and moto_env.SECRET_ACCESS_KEY not in text
    finally:
        cpi("delete_vm", vm_cid)


def test_a_v1_stemcell_is_refused_before_anything_is_made(cpi, stemcell, ips, account, ec2):
    before = moto_env.inventory(ec2)
    response = cpi.call("create_vm", "agent-v1", stemcell, VM_PROPS, ips.network(), [], {}, stemcell_api_version=1)
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "registry" in response.error["message"] and response.error["ok_to_retry"] is False
    assert moto_env.inventory(ec2) == before


def test_advertised_routes_point_at_the_new_vm(cpi, stemcell, ips, ec2, account):
    """A route the table lacks is added, one it has (here to an internet gateway) is taken
    over, IPv6 too; each now sends its destination to the VM, as EC2 reports the table."""
    table = ec2.create_route_table(VpcId=account.vpc_id)["RouteTable"]["RouteTableId"]
    gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=account.vpc_id)
    ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=gateway)
    advertised = [{"table_id": table, "destination": "0.0.0.0/0"},
                  {"table_id": table, "destination": "192.168.10.0/24"},
                  {"table_id": table, "destination": "2001:db8:10::/48"}]
    vm_props = {**VM_PROPS, "source_dest_check": False, "advertised_routes": advertised}
    response = cpi.call("create_vm", "agent-nat", stemcell, vm_props, ips.network(), [], {})
    assert response.error is None, response.error
    vm_cid = response.result[0]
    try:
        found = ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"][0]["Routes"]
        targets = {r.get("DestinationCidrBlock") or r.get("DestinationIpv6CidrBlock"): r.get("InstanceId")
                   or r.get("GatewayId") for r in found}
        assert targets == {"10.0.0.0/16": "local", "0.0.0.0/0": vm_cid, "192.168.10.0/24": vm_cid,
                           "2001:db8:10::/48": vm_cid}
        counts = requests_of(response)
        assert (counts["CreateRoute"], counts["ReplaceRoute"]) == (3, 1)  # the first CreateRoute: RouteAlreadyExists
        assert f"route 0.0.0.0/0 in {table} replaced: to {vm_cid}" in response.log
    finally:
        cpi("delete_vm", vm_cid)
        for route in advertised:
            key = "DestinationIpv6CidrBlock" if ":" in route["destination"] else "DestinationCidrBlock"
            ec2.delete_route(RouteTableId=table, **{key: route["destination"]})
        ec2.delete_route_table(RouteTableId=table)
        ec2.detach_internet_gateway(InternetGatewayId=gateway, VpcId=account.vpc_id)
        ec2.delete_internet_gateway(InternetGatewayId=gateway)


def test_a_route_ec2_refuses_deletes_the_vm(cpi, stemcell, ips, ec2):
    before = moto_env.inventory(ec2)
    missing = "rtb-0123456789abcdef0"
    vm_props = {**VM_PROPS, "advertised_routes": [{"table_id": missing, "destination": "10.20.0.0/16"}]}
    response = cpi.call("create_vm", "agent-route", stemcell, vm_props, ips.network(), [], {})
    error = response.error
    assert error["type"] == "Bosh::Clouds::VMCreationFailed" and error["ok_to_retry"] is False
    assert f"advertised_routes: cannot send 10.20.0.0/16 in {missing}" in error["message"]
    assert "InvalidRouteTableID.NotFound" in error["message"] and "terminated" in error["message"]
    assert moto_env.inventory(ec2) == before


# ---------------------------------------------------------------- failed creates leave nothing


def test_a_failure_after_run_instances_terminates_what_was_made(cpi, stemcell, ips, ec2):
    before = moto_env.inventory(ec2)
    networks = ips.network()
    networks["public"] = {"type": "vip", "ip": "203.0.113.77", "cloud_properties": {}}  # not allocated
    response = cpi.call("create_vm", "agent-eip", stemcell, VM_PROPS, networks, [], {})
    error = response.error
    assert error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "203.0.113.77" in error["message"] and "terminated" in error["message"]
    assert error["ok_to_retry"] is False
    launched = re.search(r"instance (i-[0-9a-f]+) terminated", error["message"]).group(1)
    assert instance(ec2, launched)["State"]["Name"] == "terminated"
    after = moto_env.inventory(ec2)
    assert after == before, "no instance, volume or interface may survive a failed create_vm"


def test_a_failure_before_run_instances_makes_nothing(cpi, stemcell, ips, ec2):
    before = moto_env.inventory(ec2)
    response = cpi.call("create_vm", "agent-sg", stemcell, {**VM_PROPS, "security_groups": ["no-such-group"]},
                        ips.network(), [], {})
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "no-such-group" in response.error["message"]
    assert "RunInstances" not in requests_of(response)
    assert moto_env.inventory(ec2) == before


def test_fast_path_delete_names_the_vm_and_does_not_wait(make_cpi, stemcell, ips, ec2):
    """The official CPI's fast_path_delete: delete_vm returns once EC2 took the termination,
    the instance named `to be deleted`, with no wait for it to be terminated."""
    fast = make_cpi(fast_path_delete=True)
    vm_cid, _ = fast("create_vm", "agent-fast", stemcell, VM_PROPS, ips.network(), [], {})
    response = fast.call("delete_vm", vm_cid)
    assert response.error is None, response.error
    assert requests_of(response) == {"TerminateInstances": 1, "CreateTags": 1}
    found = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [vm_cid]}])["Tags"]
    assert {t["Key"]: t["Value"] for t in found}["Name"] == "to be deleted"


def test_bad_cloud_properties_name_the_field(cpi, stemcell, ips):
    response = cpi.call("create_vm", "agent-bad", stemcell, {**VM_PROPS, "ephemeral_disk": {"type": "gp9"}},
                        ips.network(), [], {})
    assert response.error["type"] == "Bosh::Clouds::CpiError"
    assert "ephemeral_disk.type" in response.error["message"] and "gp3" in response.error["message"]


# ---------------------------------------------------------------- disks


@pytest.fixture(scope="module")
def nitro_vm(cpi, stemcell, ips, account):
    """m5.large (NVMe); security groups from vm_type, by name, over the network's."""
    vm_cid, _ = cpi("create_vm", "agent-nitro", stemcell, {**VM_PROPS, "security_groups": [account.extra_group_name]},
                    ips.network(security_groups=[account.security_group_id]), [], {})
    yield vm_cid
    cpi("delete_vm", vm_cid)


@pytest.fixture(scope="module")
def xen_vm(cpi, stemcell, ips, account):
    """t2.micro (no NVMe); security groups from the network, over the default."""
    vm_cid, _ = cpi("create_vm", "agent-xen", stemcell,
                    {"instance_type": "t2.micro", "availability_zone": moto_env.ZONE},
                    ips.network(security_groups=[account.extra_group_id]), [], {})
    yield vm_cid
    cpi("delete_vm", vm_cid)


def test_the_jobs_default_iam_instance_profile_goes_to_vms_whose_vm_type_names_none(make_cpi, stemcell, ips, ec2,
                                                                                     account):
    """aws.default_iam_instance_profile, as the official job's: by name or by ARN."""
    iam = moto_env.client("iam", account.endpoint)
    arn = iam.create_instance_profile(InstanceProfileName="bosh-default")["InstanceProfile"]["Arn"]
    for default in ("bosh-default", arn):
        cpi = make_cpi(default_iam_instance_profile=default)
        vm_cid, _ = cpi("create_vm", "agent-default-profile", stemcell, VM_PROPS, ips.network(), [], {})
        try:
            assert instance(ec2, vm_cid)["IamInstanceProfile"]["Arn"] == arn
        finally:
            cpi("delete_vm", vm_cid)


def test_attach_hints_nvme_by_id_on_nitro_and_sd_letters_elsewhere(cpi, nitro_vm, xen_vm, ec2):
    nitro_disk = cpi("create_disk", 1024, {}, nitro_vm)
    attach = cpi.call("attach_disk", nitro_vm, nitro_disk)
    assert attach.result == "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + nitro_disk.replace("-", "")
    # DescribeInstances, DescribeInstanceTypes (NVMe?), AttachVolume (+ a wait if EC2 says attaching)
    assert sum(requests_of(attach).values()) <= 4, requests_of(attach)
    xen_disks = [cpi("create_disk", 1024, {}, xen_vm) for _ in range(2)]
    assert [cpi("attach_disk", xen_vm, d) for d in xen_disks] == ["/dev/sdf", "/dev/sdg"]
    assert cpi("attach_disk", xen_vm, xen_disks[0]) == "/dev/sdf"  # again: same answer, no new attachment
    assert sorted(cpi("get_disks", xen_vm)) == sorted(xen_disks)
    for vm_cid, disk_cid in [(nitro_vm, nitro_disk), *[(xen_vm, d) for d in xen_disks]]:
        detach = cpi.call("detach_disk", vm_cid, disk_cid)
        assert sum(requests_of(detach).values()) <= 3, requests_of(detach)
        delete = cpi.call("delete_disk", disk_cid)
        assert requests_of(delete) == {"DeleteVolume": 1}


def test_nvme_from_the_family_name_when_describe_instance_types_is_off(make_cpi, cpi, nitro_vm):
    """The official CPI's enable_describe_instance_types: false (a policy without
    ec2:DescribeInstanceTypes): the hint still says NVMe for m5, and nothing asks EC2."""
    static = make_cpi(enable_describe_instance_types=False)
    disk_cid = static("create_disk", 1024, {}, nitro_vm)
    attach = static.call("attach_disk", nitro_vm, disk_cid)
    assert attach.result == "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + disk_cid.replace("-", "")
    assert "DescribeInstanceTypes" not in requests_of(attach)
    assert "decided from its family name (enable_describe_instance_types is false)" in attach.log
    static("detach_disk", nitro_vm, disk_cid)
    static("delete_disk", disk_cid)


def test_disk_types_encryption_and_zone(make_cpi, cpi, nitro_vm, ec2):
    io1 = cpi("create_disk", 10_000, {"type": "io1", "iops": 500}, nitro_vm)
    gp3 = cpi("create_disk", 1500, {"throughput": 250, "iops": 4000, "tags": {"purpose": "db"}, "name": "dyn-1"}, None)
    volumes = {v["VolumeId"]: v for v in ec2.describe_volumes(VolumeIds=[io1, gp3])["Volumes"]}
    assert (volumes[io1]["VolumeType"], volumes[io1]["Iops"], volumes[io1]["Size"]) == ("io1", 500, 10)
    assert volumes[io1]["AvailabilityZone"] == moto_env.ZONE  # the VM's zone
    assert (volumes[gp3]["VolumeType"], volumes[gp3]["Size"]) == ("gp3", 2)
    assert tags_of(volumes[gp3]) == {"purpose": "db", "Name": "dyn-1", "director_uuid": cpi.director_uuid}
    assert volumes[gp3]["Encrypted"] is False

    encrypting = make_cpi(encrypted=True, kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/abc",
                          default_availability_zone=moto_env.OTHER_ZONE)
    encrypted = encrypting("create_disk", 1024, {}, None)
    opted_out = encrypting("create_disk", 1024, {"encrypted": False}, None)
    found = {v["VolumeId"]: v for v in ec2.describe_volumes(VolumeIds=[encrypted, opted_out])["Volumes"]}
    assert found[encrypted]["Encrypted"] is True
    assert found[encrypted]["KmsKeyId"] == "arn:aws:kms:us-east-1:123456789012:key/abc"
    assert found[encrypted]["AvailabilityZone"] == moto_env.OTHER_ZONE  # default_availability_zone
    assert found[opted_out]["Encrypted"] is False
    for disk_cid in (io1, gp3, encrypted, opted_out):
        cpi("delete_disk", disk_cid)


def test_resize_and_update_disk(cpi, ec2):
    disk_cid = cpi("create_disk", 2048, {}, None)
    same = cpi.call("resize_disk", disk_cid, 2000)  # rounds to the same 2 GiB: nothing to do
    assert same.error is None and "ModifyVolume" not in requests_of(same)
    cpi("resize_disk", disk_cid, 3072)
    assert ec2.describe_volumes(VolumeIds=[disk_cid])["Volumes"][0]["Size"] == 3
    shrink = cpi.call("resize_disk", disk_cid, 1024)
    assert shrink.error["type"] == "Bosh::Clouds::NotSupported"
    assert cpi("update_disk", disk_cid, 4096, {"type": "io2", "iops": 1000}) is None  # in place
    volume = ec2.describe_volumes(VolumeIds=[disk_cid])["Volumes"][0]
    assert (volume["Size"], volume["VolumeType"], volume["Iops"]) == (4, "io2", 1000)
    encrypt = cpi.call("update_disk", disk_cid, 4096, {"encrypted": True})
    assert encrypt.error["type"] == "Bosh::Clouds::NotSupported"  # the director copies instead
    cpi("delete_disk", disk_cid)


def test_snapshot_description_and_tags(cpi, nitro_vm, ec2):
    disk_cid = cpi("create_disk", 1024, {}, nitro_vm)
    cpi("attach_disk", nitro_vm, disk_cid)
    snapshot_cid = cpi("snapshot_disk", disk_cid, {
        "deployment": "dep", "job": "db", "index": 0, "director_name": "my-director", "director_uuid": "uuid-1",
        "agent_id": "agent-1", "instance_id": "inst-1", "custom": "tag",
    })
    snapshot = ec2.describe_snapshots(SnapshotIds=[snapshot_cid])["Snapshots"][0]
    assert snapshot["Description"] == "dep/db/0/sdf"
    tags = tags_of(snapshot)
    assert tags["Name"] == "dep/db/0/sdf" and tags["device"] == "/dev/sdf"
    assert tags["director"] == "my-director" and "director_name" not in tags
    assert tags["index"] == "0" and tags["agent_id"] == "agent-1" and tags["custom"] == "tag"
    assert tags["instance_index"] == "0" and tags["instance_name"] == "db/inst-1"  # the official CPI's too
    cpi("delete_snapshot", snapshot_cid)
    cpi("delete_snapshot", snapshot_cid)  # gone: success
    cpi("detach_disk", nitro_vm, disk_cid)
    cpi("delete_disk", disk_cid)


def test_a_disk_held_by_a_live_vm_fails_fast(cpi, make_cpi, account, nitro_vm, xen_vm):
    disk_cid = cpi("create_disk", 1024, {}, nitro_vm)
    cpi("attach_disk", nitro_vm, disk_cid)
    deleting = cpi.call("delete_disk", disk_cid)
    assert deleting.error["type"] == "Bosh::Clouds::CloudError" and "attached" in deleting.error["message"]
    # moto's AttachVolume takes a volume attached elsewhere without complaint; the proxy
    # answers VolumeInUse as EC2 does, and the CPI finds a live holder: no point waiting
    with FaultProxy(account.endpoint) as proxy:
        proxied = make_cpi(ec2_endpoint=proxy.url, volume_in_use_timeout=60)
        proxy.inject(r"^AttachVolume$", "error", code="VolumeInUse", times=None)
        attaching = proxied.call("attach_disk", xen_vm, disk_cid)
        assert attaching.error["type"] == "Bosh::Clouds::CloudError"
        assert nitro_vm in attaching.error["message"] and "running" in attaching.error["message"]
        assert proxy.by_action["AttachVolume"] == 1
    cpi("detach_disk", nitro_vm, disk_cid)
    cpi("delete_disk", disk_cid)


def test_attach_waits_while_the_old_vm_lets_go(cpi, make_cpi, account, xen_vm):
    """After its VM died, EC2 answers VolumeInUse for a while; attach_disk keeps trying."""
    disk_cid = cpi("create_disk", 1024, {}, xen_vm)
    with FaultProxy(account.endpoint) as proxy:
        proxied = make_cpi(ec2_endpoint=proxy.url, volume_in_use_timeout=60)
        proxy.inject(r"^AttachVolume$", "error", code="VolumeInUse", times=2)  # then the volume is free
        response = proxied.call("attach_disk", xen_vm, disk_cid)
        assert response.result == "/dev/sdf"
        assert proxy.by_action["AttachVolume"] == 3
        assert response.log.count("transient (VolumeInUse)") == 2
    cpi("detach_disk", xen_vm, disk_cid)
    cpi("delete_disk", disk_cid)


def test_throttling_keeps_the_retry_budget_when_volume_in_use_timeout_is_short(cpi, make_cpi, account):
    """volume_in_use_timeout bounds waiting for a dying VM to let go, not throttling: a
    storm of several directors made delete_disk give up on RequestLimitExceeded after it."""
    disk_cid = cpi("create_disk", 1024, {}, None)
    with FaultProxy(account.endpoint) as proxy:
        proxied = make_cpi(ec2_endpoint=proxy.url, volume_in_use_timeout=0.01, retry_budget_seconds=60)
        proxy.inject(r"^DeleteVolume$", "error", code="RequestLimitExceeded", times=2)
        response = proxied.call("delete_disk", disk_cid)
        assert response.error is None, response.error
        assert proxy.by_action["DeleteVolume"] == 3
    assert cpi("has_disk", disk_cid) is False


def test_requests_whose_answer_was_lost_are_neither_failed_nor_repeated(cpi, make_cpi, account, xen_vm, ec2):
    """EC2 carried the request out but the connection dropped before its answer. A create
    is sent again with the same ClientToken (EC2, and the proxy for moto, then answer with
    what the first made); an attach or detach sent again is told the work is done, and the
    CPI takes that as the earlier attempt's success."""
    before = moto_env.inventory(ec2)["volumes"]
    with FaultProxy(account.endpoint) as proxy:
        proxied = make_cpi(ec2_endpoint=proxy.url)
        for action in ("CreateVolume", "AttachVolume", "DetachVolume"):
            proxy.inject(rf"^{action}$", "lost")
        disk_cid = proxied("create_disk", 1024, {}, xen_vm)
        assert moto_env.inventory(ec2)["volumes"] - before == {disk_cid}
        assert proxied("attach_disk", xen_vm, disk_cid) == "/dev/sdf"
        response = proxied.call("detach_disk", xen_vm, disk_cid)
        assert response.error is None, response.error
        assert "an earlier attempt, whose answer was lost, was carried out" in response.log
        assert {action: proxy.by_action[action] for action in ("CreateVolume", "AttachVolume", "DetachVolume")} == {
            "CreateVolume": 2, "AttachVolume": 2, "DetachVolume": 2}
    assert not ec2.describe_volumes(VolumeIds=[disk_cid])["Volumes"][0]["Attachments"]
    cpi("delete_disk", disk_cid)


# ---------------------------------------------------------------- stemcells


def test_light_stemcell_for_another_region_is_an_error(cpi):
    response = cpi.call("create_stemcell", "", {"ami": {"eu-west-1": "ami-0123456789abcdef0"}})
    assert response.error["type"] == "Bosh::Clouds::CloudError"
    assert "us-east-1" in response.error["message"] and "eu-west-1" in response.error["message"]


def _tag_specifications(params: dict[str, str]) -> dict[str, dict[str, str]]:
    """A create request's TagSpecifications as sent (`TagSpecification.N.Tag.M.Key` on the
    wire): {resource type: tags}."""
    found: dict[str, dict[str, str]] = {}
    for key, kind in params.items():
        parts = key.split(".")
        if parts[0] == "TagSpecification" and parts[2:] == ["ResourceType"]:
            prefix = f"TagSpecification.{parts[1]}.Tag."
            count = len({k.split(".")[3] for k in params if k.startswith(prefix)})
            found[kind] = {params[f"{prefix}{i}.Key"]: params[f"{prefix}{i}.Value"] for i in range(1, count + 1)}
    return found


def test_light_stemcell_copied_encrypted_when_asked(make_cpi, account, ec2):
    with FaultProxy(account.endpoint) as proxy:
        encrypting = make_cpi(encrypted=True, ec2_endpoint=proxy.url)
        image_id = encrypting("create_stemcell", "",
                              {"name": "s", "version": "9", "ami": {moto_env.REGION: account.ami_id},
                               "tags": {"os": "jammy", "team": "stemcell-wins"}},
                              {"tags": {"team": "cpi", "director": "d1"}}, api_version=3)
        [copy] = proxy.params(r"^CopyImage$")
        assert image_id.startswith("ami-") and not image_id.endswith(" light") and image_id != account.ami_id
        copied = ec2.describe_images(ImageIds=[image_id])["Images"][0]
        assert copied["Description"] == "s 9"
        # the copy and its snapshots are tagged as EC2 makes them (moto's CopyImage drops
        # TagSpecifications: what EC2 is asked is checked), the stemcell's tags over env's
        expected = {"os": "jammy", "team": "stemcell-wins", "director": "d1"}
        assert _tag_specifications(copy) == {"image": expected, "snapshot": expected}
        # moto's CopyImage ignores Encrypted/KmsKeyId; real EC2 returns an encrypted AMI here.
        assert encrypting("delete_stemcell", image_id) is None
        assert ec2.describe_images(Filters=[{"Name": "image-id", "Values": [image_id]}])["Images"] == []
        assert ec2.describe_images(ImageIds=[account.ami_id])["Images"], "the public AMI must remain"
        # the stemcell says no: no copy even with the global default on
        assert encrypting("create_stemcell", "", {"encrypted": False, "ami": {moto_env.REGION: account.ami_id}}) \
            == f"{account.ami_id} light"


def test_a_light_stemcell_tags_its_ami_only_when_this_account_owns_it(cpi, make_cpi, account, ec2):
    """Not copied, a light stemcell's tags go on its AMI (as the official CPI), when the AMI
    is this account's; a shared or public one is not ours to tag. The job's stemcell.tags
    replace the stemcell's own tags, as the official CPI merges that section."""
    snapshot_id = ec2.describe_images(ImageIds=[account.ami_id])["Images"][0]["BlockDeviceMappings"][0]["Ebs"][
        "SnapshotId"]
    own = [ec2.register_image(Name=f"own-light-{n}", RootDeviceName="/dev/xvda", VirtualizationType="hvm",
                              BlockDeviceMappings=[{"DeviceName": "/dev/xvda",
                                                    "Ebs": {"SnapshotId": snapshot_id, "VolumeSize": 3}}])["ImageId"]
           for n in range(2)]
    env = {"tags": {"team": "cpi", "director": "d1"}}
    try:
        response = cpi.call("create_stemcell", "", {"ami": {moto_env.REGION: own[0]},
                                                    "tags": {"os": "jammy", "team": "stemcell-wins"}}, env,
                            api_version=3)
        assert response.result == f"{own[0]} light"
        assert tags_of(ec2.describe_images(ImageIds=[own[0]])["Images"][0]) == {
            "os": "jammy", "team": "stemcell-wins", "director": "d1"}
        assert requests_of(response) == {"DescribeImages": 2, "CreateTags": 1}  # one to tell the owner

        defaults = make_cpi(stemcell={"tags": {"owner": "ops"}})
        defaults("create_stemcell", "", {"ami": {moto_env.REGION: own[1]}, "tags": {"os": "jammy"}}, env,
                 api_version=3)
        assert tags_of(ec2.describe_images(ImageIds=[own[1]])["Images"][0]) == {
            "owner": "ops", "team": "cpi", "director": "d1"}

        shared = next(i for i in ec2.describe_images(Owners=["amazon"])["Images"] if not i.get("Tags"))
        response = cpi.call("create_stemcell", "", {"ami": {moto_env.REGION: shared["ImageId"]},
                                                    "tags": {"os": "jammy"}}, env, api_version=3)
        assert response.result == f"{shared['ImageId']} light"
        assert f"AMI {shared['ImageId']} belongs to another account (shared or public): not tagged" in response.log
        assert "CreateTags" not in requests_of(response)
        assert not tags_of(ec2.describe_images(ImageIds=[shared["ImageId"]])["Images"][0])

        untagged = cpi.call("create_stemcell", "", {"ami": {moto_env.REGION: own[0]}})  # no tags: no extra request
        assert requests_of(untagged) == {"DescribeImages": 1}
    finally:
        for image_id in own:
            ec2.deregister_image(ImageId=image_id)


def test_a_heavy_stemcell_tags_its_snapshot_and_image(make_cpi, account, tmp_path, ec2):
    image, _ = _stemcell_image(tmp_path, {0: b"boot"}, size=512 * 1024)
    with FaultProxy(account.endpoint) as proxy:
        cpi = make_cpi(ec2_endpoint=proxy.url)
        response = cpi.call("create_stemcell", str(image), {"name": "s", "version": "2", "tags": {"os": "jammy",
                                                            "team": "stemcell-wins", "build": 42}},
                            {"tags": {"team": "cpi", "director": "d1"}}, api_version=3)
        assert response.error is None, response.error
        [register] = proxy.params(r"^RegisterImage$")
        expected = {"os": "jammy", "team": "stemcell-wins", "build": "42", "director": "d1"}
        snapshot_id = re.search(r"from snapshot (snap-\w+)", response.log).group(1)
        assert tags_of(ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]) == expected
        # moto's RegisterImage drops TagSpecifications: what EC2 is asked is checked
        assert _tag_specifications(register) == {"image": expected}
        image_snapshots = [m["Ebs"]["SnapshotId"] for m in ec2.describe_images(ImageIds=[response.result])[
            "Images"][0]["BlockDeviceMappings"] if "Ebs" in m]
        cpi("delete_stemcell", response.result)
    if snapshot_id not in image_snapshots:  # moto only: its image has a snapshot of its own
        ec2.delete_snapshot(SnapshotId=snapshot_id)


def _stemcell_image(tmp_path, blocks: dict[int, bytes], size: int):
    """An aws-raw stemcell `image`: a gzipped tarball holding root.img."""
    root = bytearray(size)
    for index, data in blocks.items():
        root[index * 512 * 1024:index * 512 * 1024 + len(data)] = data
    path = tmp_path / "image"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("root.img")
        info.size = len(root)
        archive.addfile(info, io.BytesIO(bytes(root)))
    return path, bytes(root)


def test_heavy_stemcell_goes_through_ebs_direct_and_boots(cpi, tmp_path, account, ips, ec2):
    blocks = {0: b"\xeb\x63\x90" + b"boot" * 100, 3: b"data" * 1000, 7: b"tail"}
    image, _ = _stemcell_image(tmp_path, blocks, size=4 * 1024 * 1024 + 1000)  # 9 blocks, last partial
    response = cpi.call("create_stemcell", str(image), {
        "name": "bosh-aws-xen-hvm-ubuntu-jammy-go_agent", "version": "1.99", "infrastructure": "aws",
        "disk": 3072, "architecture": "x86_64", "root_device_name": "/dev/xvda", "hypervisor": "xen",
    }, {"tags": {"team": "cpi"}}, api_version=3)
    image_id = response.result
    assert "wrote 3 of 9 blocks" in response.log  # zero blocks are skipped
    snapshot_id = re.search(r"registered stemcell image ami-\w+ from snapshot (snap-\w+)", response.log).group(1)
    snapshot = ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]
    assert snapshot["VolumeSize"] == 3  # the stemcell's `disk`, larger than the image
    assert snapshot["State"] == "completed"
    ebs = moto_env.client("ebs", account.endpoint)
    written = {b["BlockIndex"] for b in ebs.list_snapshot_blocks(SnapshotId=snapshot_id)["Blocks"]}
    assert written == set(blocks)
    last = ebs.get_snapshot_block(SnapshotId=snapshot_id, BlockIndex=7, BlockToken="t")["BlockData"].read()
    assert last[:4] == b"tail" and len(last) == 512 * 1024  # padded to a whole block
    found = ec2.describe_images(ImageIds=[image_id])["Images"][0]
    assert found["Name"].startswith("BOSH-")
    assert found["Description"] == "bosh-aws-xen-hvm-ubuntu-jammy-go_agent 1.99"
    # moto's RegisterImage keeps only Name and Description: it reports root /dev/sda1 and
    # a snapshot of its own instead of ours. On EC2 the image's root is our snapshot.
    image_snapshots = [m["Ebs"]["SnapshotId"] for m in found["BlockDeviceMappings"] if "Ebs" in m]

    vm_cid, _ = cpi("create_vm", "agent-heavy", image_id, VM_PROPS, ips.network(), [], {})
    assert instance(ec2, vm_cid)["ImageId"] == image_id
    cpi("delete_vm", vm_cid)

    cpi("delete_stemcell", image_id)
    assert ec2.describe_images(Filters=[{"Name": "image-id", "Values": [image_id]}])["Images"] == []
    for gone in image_snapshots:  # deregistering deletes the image's snapshots
        assert ec2.describe_snapshots(Filters=[{"Name": "snapshot-id", "Values": [gone]}])["Snapshots"] == []
    assert cpi("delete_stemcell", image_id) is None  # gone: success
    if snapshot_id not in image_snapshots:  # moto only (see above): not a CPI leak
        ec2.delete_snapshot(SnapshotId=snapshot_id)


def test_a_failed_heavy_upload_deletes_its_snapshot(make_cpi, account, tmp_path, ec2):
    image, _ = _stemcell_image(tmp_path, {0: b"boot", 2: b"data"}, size=2 * 1024 * 1024)
    with FaultProxy(account.endpoint) as proxy:
        cpi = make_cpi(ebs_endpoint=proxy.url, ec2_endpoint=proxy.url)
        proxy.inject(r"^PutSnapshotBlock$", "error", code="ValidationException", times=None)  # permanent: not retried
        before = moto_env.inventory(ec2)["snapshots"]
        response = cpi.call("create_stemcell", str(image), {"name": "s", "version": "1"})
        assert response.error["type"] == "Bosh::Clouds::CloudError"
        assert "ValidationException" in response.error["message"]
        assert proxy.by_action["StartSnapshot"] == 1 and proxy.by_action["CompleteSnapshot"] == 0
        assert proxy.by_action["DeleteSnapshot"] == 1
        assert moto_env.inventory(ec2)["snapshots"] == before


def test_heavy_stemcell_without_root_img_is_an_error(cpi, tmp_path):
    path = tmp_path / "image"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("other.txt")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    response = cpi.call("create_stemcell", str(path), {"name": "s", "version": "1"})
    assert response.error["type"] == "Bosh::Clouds::CloudError" and "root.img" in response.error["message"]


def test_a_paravirtual_stemcell_is_refused_saying_why(cpi, tmp_path):
    """The official CPI's virtualization_type: paravirtual (with kernel_id) is read, and
    refused before anything is uploaded: no current instance type runs such an image."""
    path = tmp_path / "image"
    path.write_bytes(b"not read")
    paravirtual = {"name": "s", "version": "1", "virtualization_type": "paravirtual", "kernel_id": "aki-88aa75e1"}
    response = cpi.call("create_stemcell", str(path), paravirtual)
    assert response.error["type"] == "Bosh::Clouds::CloudError"
    assert "virtualization_type paravirtual: no current EC2 instance type runs paravirtual images" in \
        response.error["message"]
    assert requests_of(response) == {}


# ---------------------------------------------------------------- throttling and credentials


@pytest.fixture
def proxy(account):
    with FaultProxy(account.endpoint) as proxy:
        yield proxy


def _throttled_cpi(account, proxy, path, *, budget: float, max_retry_after: float) -> Cpi:
    config = account.config(ec2_endpoint=proxy.url, retry_budget_seconds=budget)
    config["cloud"]["properties"]["throttle"] = {"state_dir": str(path.parent / "throttle"),
                                                 "max_retry_after": max_retry_after}
    path.write_text(json.dumps(config))
    return Cpi(path)


def test_a_days_retry_after_holds_no_call_past_max_retry_after_or_its_budget(proxy, account, tmp_path):
    """One answer with `Retry-After: 86400` used to become every later call's "not before":
    each slept past its budget. The wait is cut to throttle.max_retry_after; a call whose
    budget cannot hold the wait fails at once, retryably, naming it."""
    day = {"Retry-After": "86400"}
    cpi = _throttled_cpi(account, proxy, tmp_path / "cpi.json", budget=30, max_retry_after=2)
    proxy.inject(r"^DescribeInstances$", "error", code="RequestLimitExceeded", headers=day)
    started = time.monotonic()
    assert cpi("has_vm", "i-0123456789abcdef0") is False  # waited 2 s, not a day, then asked again
    assert cpi("has_vm", "i-0123456789abcdef0") is False  # the next call: the shared rate is open again
    assert time.monotonic() - started < 15

    short = _throttled_cpi(account, proxy, tmp_path / "short.json", budget=5, max_retry_after=20)
    proxy.inject(r"^DescribeInstances$", "error", code="RequestLimitExceeded", headers=day)
    started = time.monotonic()
    first = short.call("has_vm", "i-0123456789abcdef0")
    assert first.error["ok_to_retry"] is True and "throttling" in first.error["message"]
    assert "the next wait (20.0s) would pass the budget (5s)" in first.log
    second = short.call("has_vm", "i-0123456789abcdef0")  # the shared rate is closed for 20 s: no wait
    assert second.error["ok_to_retry"] is True
    assert "has this call wait" in second.error["message"] and "retry budget" in second.error["message"]
    assert time.monotonic() - started < 5


def test_throttling_is_retried_and_logged(proxy, make_cpi):
    cpi = make_cpi(ec2_endpoint=proxy.url, retry_budget_seconds=60)
    proxy.inject(r"^DescribeInstances$", "error", code="RequestLimitExceeded", times=3)
    response = cpi.call("has_vm", "i-0123456789abcdef0")
    assert response.error is None and response.result is False
    assert proxy.count(r"^DescribeInstances$", status=503) == 3 and proxy.by_action["DescribeInstances"] == 4
    waits = [line for line in response.log.splitlines() if "throttled (RequestLimitExceeded)" in line]
    assert len(waits) == 3 and all("retrying in" in line for line in waits)
    assert requests_of(response) == {"DescribeInstances": 4}


def test_throttling_beyond_the_budget_is_a_clear_error(proxy, make_cpi):
    cpi = make_cpi(ec2_endpoint=proxy.url, retry_budget_seconds=2)
    proxy.inject(r"^DescribeInstances$", "error", code="RequestLimitExceeded", times=None)
    response = cpi.call("has_vm", "i-0123456789abcdef0")
    assert response.error["type"] == "Bosh::Clouds::CloudError"
    assert "throttling" in response.error["message"] and "RequestLimitExceeded" in response.error["message"]


def test_refused_credentials_name_the_key_id_never_the_secret(proxy, make_cpi):
    cpi = make_cpi(ec2_endpoint=proxy.url)
    proxy.inject(r"^DescribeInstances$", "error", code="AuthFailure", times=None)
    response = cpi.call("has_vm", "i-0123456789abcdef0")
    message = response.error["message"]
    assert response.error["type"] == "Bosh::Clouds::CloudError"
    assert "AuthFailure" in message and moto_env.ACCESS_KEY_ID in message and "static" in message
    assert proxy.count(r"^DescribeInstances$", status=401) == 1  # auth errors are not retried
    for text in (response.raw, response.stderr):
        assert moto_env.SECRET_ACCESS_KEY not in text


# ---------------------------------------------------------------- the rest


def test_calculate_vm_cloud_properties_picks_the_smallest_type(cpi):
    assert cpi("calculate_vm_cloud_properties", {"cpu": 2, "ram": 4096, "ephemeral_disk_size": 10240}) == {
        "instance_type": "c6i.large", "ephemeral_disk": {"size": 10240}}
    assert cpi("calculate_vm_cloud_properties", {"cpu": 2, "ram": 16384, "ephemeral_disk_size": 0}) == {
        "instance_type": "r6i.large"}
    too_big = cpi.call("calculate_vm_cloud_properties", {"cpu": 4096, "ram": 1, "ephemeral_disk_size": 0})
    assert too_big.error["type"] == "Bosh::Clouds::CloudError" and "4096 vCPUs" in too_big.error["message"]


def test_request_counts_stay_small(cpi, nitro_vm):
    """The cost of the common calls, in AWS requests (each one counts against EC2's rate
    limits); raising one of these needs a reason. (create_vm's and the disk calls' are
    checked where those run.)"""
    budgets = {
        "has_vm": ([nitro_vm], 1),
        "get_disks": ([nitro_vm], 1),
        "reboot_vm": ([nitro_vm], 1),
        "delete_snapshot": (["snap-0123456789abcdef0"], 1),
        "delete_stemcell": (["ami-0123456789abcdef0 light"], 0),
        "delete_disk": (["disk-not-a-volume-id"], 0),
    }
    for method, (args, most) in budgets.items():
        response = cpi.call(method, *args)
        assert response.error is None, (method, response.error)
        assert sum(requests_of(response).values()) <= most, (method, requests_of(response))


def test_instance_storage_is_refused_for_types_without_it(cpi, stemcell, ips, ec2):
    # (moto cannot launch an instance-store mapping at all, "MissingParameter: ebs", so only
    # the refusal is tested here; on EC2 m5d.large & co. get ephemeral0 at /dev/sdb)
    before = moto_env.inventory(ec2)
    for key, asked in (("ephemeral_disk.use_instance_storage", {"ephemeral_disk": {"use_instance_storage": True}}),
                       ("raw_instance_storage", {"raw_instance_storage": True})):
        response = cpi.call("create_vm", "agent-is", stemcell, {**VM_PROPS, **asked}, ips.network(), [], {})
        assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
        assert response.error["ok_to_retry"] is False
        assert f"{key}: instance type m5.large has no instance storage" in response.error["message"]
        assert "RunInstances" not in requests_of(response)
    assert moto_env.inventory(ec2) == before


def user_data_of(ec2, vm_cid) -> dict:
    data = ec2.describe_instance_attribute(InstanceId=vm_cid, Attribute="userData")["UserData"]["Value"]
    return json.loads(base64.b64decode(data))


def test_raw_instance_storage_of_an_nvme_type_is_counted_for_the_agent(cpi, stemcell, ips, ec2, account):
    """d3.xlarge has three NVMe instance-store volumes (EC2's DescribeInstanceTypes says so,
    and moto's copy of it): EC2 attaches them by itself, so none is mapped, and the agent is
    told of three, by the /dev/nvme<N>n1 names, next to its EBS ephemeral disk."""
    vm_props = {"instance_type": "d3.xlarge", "availability_zone": moto_env.ZONE, "raw_instance_storage": True}
    response = cpi.call("create_vm", "agent-raw-nvme", stemcell, vm_props, ips.network(), [], {})
    assert response.error is None, response.error
    vm_cid = response.result[0]
    try:
        found = instance(ec2, vm_cid)
        assert found["InstanceType"] == "d3.xlarge"
        assert {m["DeviceName"] for m in found["BlockDeviceMappings"]} == {root_device(ec2, account.ami_id), "/dev/sdb"}
        disks = user_data_of(ec2, vm_cid)["disks"]
        assert disks["ephemeral"] == "/dev/sdb"
        assert disks["raw_ephemeral"] == [{"path": "/dev/nvme0n1"}, {"path": "/dev/nvme1n1"}, {"path": "/dev/nvme2n1"}]
        assert requests_of(response)["DescribeInstanceTypes"] == 1
    finally:
        cpi("delete_vm", vm_cid)


def test_use_root_disk_makes_no_ephemeral_disk(cpi, stemcell, ips, ec2, account):
    """ephemeral_disk.use_root_disk: no ephemeral volume, and agent settings that name none
    (no `ephemeral` key, as the official CPI writes them): the agent keeps its data on the
    root disk, made larger here as a vm_type would. The EBS keys beside it are ignored, in
    the log. raw_instance_storage still gets its disks (the official CPI drops them)."""
    root = root_device(ec2, account.ami_id)
    vm_props = {**VM_PROPS, "root_disk": {"size": 20 * 1024},
                "ephemeral_disk": {"use_root_disk": True, "size": 50 * 1024}}
    response = cpi.call("create_vm", "agent-root-eph", stemcell, vm_props, ips.network(), [], {})
    assert response.error is None, response.error
    vm_cid = response.result[0]
    try:
        found = instance(ec2, vm_cid)
        assert [m["DeviceName"] for m in found["BlockDeviceMappings"]] == [root]
        assert [v["Size"] for v in root_and_ephemeral(ec2, vm_cid)] == [20]
        assert user_data_of(ec2, vm_cid)["disks"] == {"system": root, "persistent": {}}
        assert response.log.count("so ephemeral_disk.size is ignored") == 1
        assert "DescribeInstanceTypes" not in requests_of(response)
    finally:
        cpi("delete_vm", vm_cid)
    raw_props = {"instance_type": "d3.xlarge", "availability_zone": moto_env.ZONE, "raw_instance_storage": True,
                 "ephemeral_disk": {"use_root_disk": True}}
    vm_cid, _ = cpi("create_vm", "agent-root-raw", stemcell, raw_props, ips.network(), [], {})
    try:
        assert [m["DeviceName"] for m in instance(ec2, vm_cid)["BlockDeviceMappings"]] == [root]
        disks = user_data_of(ec2, vm_cid)["disks"]
        assert "ephemeral" not in disks and len(disks["raw_ephemeral"]) == 3
    finally:
        cpi("delete_vm", vm_cid)


def _mappings(params: dict[str, str]) -> list[tuple[str, str | None]]:
    """(DeviceName, VirtualName) of each mapping of a RunInstances request (`BlockDeviceMapping.N`
    on the wire)."""
    indexes = sorted({int(k.split(".")[1]) for k in params if k.startswith("BlockDeviceMapping.")})
    return [(params[f"BlockDeviceMapping.{i}.DeviceName"], params.get(f"BlockDeviceMapping.{i}.VirtualName"))
            for i in indexes]


def test_raw_instance_storage_maps_every_volume_of_a_type_without_nvme(make_cpi, stemcell, ips, ec2, account):
    """d2.xlarge has three instance-store disks, not NVMe: ephemeral0..2 are mapped at the
    names the official CPI gives them (/dev/xvdba..), and the agent is told those names.
    EC2's DescribeInstances never lists instance-store volumes and moto cannot launch them
    ("MissingParameter: ebs"), so what the VM gets is read from the RunInstances request,
    which the proxy refuses: nothing is made."""
    before = moto_env.inventory(ec2)
    vm_props = {"instance_type": "d2.xlarge", "availability_zone": moto_env.ZONE, "raw_instance_storage": True}
    with FaultProxy(account.endpoint) as proxy:
        proxied = make_cpi(ec2_endpoint=proxy.url)
        proxy.inject(r"^RunInstances$", "error", code="InsufficientInstanceCapacity")
        response = proxied.call("create_vm", "agent-raw-xen", stemcell, vm_props, ips.network(), [], {})
        [sent] = proxy.params(r"^RunInstances$")
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert _mappings(sent) == [
        (root_device(ec2, account.ami_id), None), ("/dev/sdb", None),
        ("/dev/xvdba", "ephemeral0"), ("/dev/xvdbb", "ephemeral1"), ("/dev/xvdbc", "ephemeral2"),
    ]
    assert not any(k.startswith("BlockDeviceMapping.3.Ebs") for k in sent)  # instance store: no EBS part
    assert sent["BlockDeviceMapping.2.Ebs.VolumeSize"] == "10"  # the ephemeral disk stays EBS
    disks = json.loads(base64.b64decode(sent["UserData"]))["disks"]
    assert disks["ephemeral"] == "/dev/sdb"
    assert disks["raw_ephemeral"] == [{"path": "/dev/xvdba"}, {"path": "/dev/xvdbb"}, {"path": "/dev/xvdbc"}]
    assert moto_env.inventory(ec2) == before


def test_spot_falls_back_to_on_demand_when_asked(proxy, make_cpi, stemcell, ips, ec2):
    cpi = make_cpi(ec2_endpoint=proxy.url)
    proxy.inject(r"^RunInstances$", "error", code="InsufficientInstanceCapacity", times=1)  # the spot launch
    response = cpi.call("create_vm", "agent-spot", stemcell,
                        {**VM_PROPS, "spot_bid_price": 0.2, "spot_ondemand_fallback": True}, ips.network(), [], {})
    vm_cid = response.result[0]
    assert "falling back to on-demand" in response.log
    assert proxy.by_action["RunInstances"] == 2
    assert "InstanceLifecycle" not in instance(ec2, vm_cid)  # on-demand
    cpi("delete_vm", vm_cid)


def test_spot_without_fallback_fails_retryably(proxy, make_cpi, stemcell, ips, ec2):
    cpi = make_cpi(ec2_endpoint=proxy.url)
    proxy.inject(r"^RunInstances$", "error", code="InsufficientInstanceCapacity", times=1)
    before = moto_env.inventory(ec2)
    response = cpi.call("create_vm", "agent-spot", stemcell, {**VM_PROPS, "spot_bid_price": 0.2}, ips.network(), [], {})
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert response.error["ok_to_retry"] is True  # capacity may come back: the director retries
    assert moto_env.inventory(ec2) == before


def test_role_arn_is_assumed_through_sts(make_cpi):
    cpi = make_cpi(role_arn="arn:aws:iam::123456789012:role/bosh-cpi")
    response = cpi.call("has_vm", "i-0123456789abcdef0")
    assert response.result is False
    assert "assumed role arn:aws:iam::123456789012:role/bosh-cpi" in response.log
    assert requests_of(response) == {"AssumeRole": 1, "DescribeInstances": 1}


def test_a_refused_role_says_which_role_and_which_base_credentials(proxy, make_cpi):
    cpi = make_cpi(role_arn="arn:aws:iam::123456789012:role/bosh-cpi", sts_endpoint=proxy.url)
    proxy.inject(r"^AssumeRole$", "error", code="AccessDenied", times=None)
    response = cpi.call("has_vm", "i-0123456789abcdef0")
    message = response.error["message"]
    assert response.error["type"] == "Bosh::Clouds::CloudError"
    assert "arn:aws:iam::123456789012:role/bosh-cpi" in message and moto_env.ACCESS_KEY_ID in message
    assert "AccessDenied" in message
    assert moto_env.SECRET_ACCESS_KEY not in response.raw + response.stderr


def test_env_or_profile_reads_the_environment(account, tmp_path):
    config = account.write_config(tmp_path / "cpi.json", credentials_source="env_or_profile",
                                  access_key_id=None, secret_access_key=None)
    env = {"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": "AKIAFROMENVIRONMENT1", "HOME": str(tmp_path),
           "AWS_SECRET_ACCESS_KEY": "env-secret-value-0001", "AWS_EC2_METADATA_DISABLED": "true"}
    assert Cpi(config, env=env)("has_vm", "i-0123456789abcdef0") is False
    bare = Cpi(config, env={"PATH": "/usr/bin:/bin", "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path)})
    response = bare.call("has_vm", "i-0123456789abcdef0")
    assert response.error["type"] == "Bosh::Clouds::CloudError"
    assert "no AWS credentials found" in response.error["message"]


def test_a_context_endpoint_never_receives_the_config_files_credentials(account, tmp_path):
    """A cpi-config that sets only ec2_endpoint used to get requests signed with cpi.json's
    keys; the override is now ignored, with a warning, unless the context brings its own."""
    listener = Listener()
    try:
        cpi = Cpi(account.write_config(tmp_path / "cpi.json", retry_budget_seconds=2))
        response = cpi.call("has_vm", "i-0123456789abcdef0", context={"ec2_endpoint": listener.url})
        assert response.error is None and response.result is False  # answered by the file's endpoint
        assert listener.seen == []
        assert "context key 'ec2_endpoint' is ignored" in response.log
        assert moto_env.SECRET_ACCESS_KEY not in response.raw + response.stderr
        own = {"ec2_endpoint": listener.url, "access_key_id": "AKIACONTEXTOWNKEY001", "secret_access_key": "ctx-secret"}
        cpi.call("has_vm", "i-0123456789abcdef0", context=own)  # its own keys: it may send them anywhere
        assert listener.seen and all("AKIACONTEXTOWNKEY001" in h.get("Authorization", "") for h in listener.seen)
        assert not any(moto_env.ACCESS_KEY_ID in h.get("Authorization", "") for h in listener.seen)
    finally:
        listener.close()
