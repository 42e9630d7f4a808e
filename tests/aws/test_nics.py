"""Several interfaces per VM, dual stack and prefix delegation, as bosh-aws-cpi reads the
networks (#22): manual networks of one `nic_group` share an interface, device indexes
follow the groups' order, a vip network's nic_group picks the interface of its Elastic IP,
and a network with a `prefix` shorter than a host's is delegated to its group's interface.

moto 5 takes prefixes (Ipv4Prefixes/Ipv6Prefixes) and an attachment's DeleteOnTermination
without modelling them: for those the tests read the request EC2 was sent, through moto's
own request recorder; everything else is read back from EC2 as a user would.
"""

from __future__ import annotations

import base64
import ipaddress
import json

import pytest

from tests.aws import moto_env
from tests.aws.conftest import VM_PROPS


@pytest.fixture(scope="module")
def subnets(account, ec2) -> dict[str, str]:
    """Two more subnets in the VMs' zone, with IPv6 blocks of the VPC's (a second
    interface must be in the first one's zone)."""
    block = ec2.associate_vpc_cidr_block(VpcId=account.vpc_id, AmazonProvidedIpv6CidrBlock=True)[
        "Ipv6CidrBlockAssociation"]["Ipv6CidrBlock"]
    v6 = list(ipaddress.ip_network(block).subnets(new_prefix=64))
    made = {}
    for name, cidr, v6_block in (("dual", "10.0.32.0/20", v6[0]), ("second", "10.0.48.0/20", v6[1])):
        subnet = ec2.create_subnet(VpcId=account.vpc_id, CidrBlock=cidr, AvailabilityZone=moto_env.ZONE,
                                   Ipv6CidrBlock=str(v6_block))["Subnet"]
        made[name] = subnet["SubnetId"]
        made[f"{name}_v6"] = str(v6_block)
    return made


def manual(ip: str, subnet: str, **keys) -> dict:
    return {"type": "manual", "ip": ip, "netmask": "255.255.240.0", "gateway": ip.rsplit(".", 1)[0] + ".1",
            "dns": ["10.0.0.2"], "cloud_properties": {"subnet": subnet}, **keys}


def v6(block: str, host: int, subnet: str, **keys) -> dict:
    return {"type": "manual", "ip": str(ipaddress.ip_network(block)[host]), "netmask": "ffff:ffff:ffff:ffff::",
            "cloud_properties": {"subnet": subnet}, **keys}


def user_data(ec2, vm_cid) -> dict:
    data = ec2.describe_instance_attribute(InstanceId=vm_cid, Attribute="userData")["UserData"]["Value"]
    return json.loads(base64.b64decode(data))


def interfaces_of(ec2, vm_cid) -> dict[int, dict]:
    found = ec2.describe_network_interfaces(Filters=[{"Name": "attachment.instance-id", "Values": [vm_cid]}])
    return {i["Attachment"]["DeviceIndex"]: i for i in found["NetworkInterfaces"]}


def tags_of(item) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("TagSet", item.get("Tags", []))}


def test_nic_groups_make_one_interface_each_in_order_with_the_elastic_ip_where_asked(
        cpi, stemcell, ec2, account, subnets, moto_server):
    networks = {
        # group "0": dual stack (an IPv4 and an IPv6 network on one interface) and a /28 prefix
        "private": manual("10.0.32.10", subnets["dual"], nic_group=0, default=["dns", "gateway"]),
        "private-v6": v6(subnets["dual_v6"], 10, subnets["dual"], nic_group="0"),
        "pods": {**manual("10.0.32.32", subnets["dual"], nic_group="0"), "prefix": "28"},
        # its own group, by name: the second interface
        "replication": manual("10.0.48.10", subnets["second"]),
        # the Elastic IP goes to the second interface
        "public": {"type": "vip", "ip": account.elastic_ip, "nic_group": "replication", "cloud_properties": {}},
    }
    table_id = ec2.create_route_table(VpcId=account.vpc_id)["RouteTable"]["RouteTableId"]
    vm_props = {**VM_PROPS, "advertised_routes": [{"table_id": table_id, "destination": "192.168.77.0/24"}]}
    with moto_server.recording() as requests:
        vm_cid, networks_out = cpi("create_vm", "agent-nics", stemcell, vm_props, networks, [], {})
    try:
        by_index = interfaces_of(ec2, vm_cid)
        assert sorted(by_index) == [0, 1]
        first, second = by_index[0], by_index[1]
        assert first["SubnetId"] == subnets["dual"] and first["PrivateIpAddress"] == "10.0.32.10"
        assert [a["Ipv6Address"] for a in first["Ipv6Addresses"]] == [networks["private-v6"]["ip"]]
        assert second["SubnetId"] == subnets["second"] and second["PrivateIpAddress"] == "10.0.48.10"
        for interface in (first, second):
            # made before the VM, tagged like it: a leftover can be attributed
            assert tags_of(interface)["agent_id"] == "agent-nics"
            assert [g["GroupId"] for g in interface["Groups"]] == [account.security_group_id]

        # the agent tells its interfaces apart by MAC: each manual network carries its group's
        settings = user_data(ec2, vm_cid)["networks"]
        assert settings["private"]["mac"] == settings["private-v6"]["mac"] == settings["pods"]["mac"] \
            == first["MacAddress"]
        assert settings["replication"]["mac"] == second["MacAddress"]
        assert "mac" not in settings["public"]
        assert networks_out["replication"]["mac"] == second["MacAddress"]

        # EC2 takes a VM of several interfaces as a route's target by one of them: the primary
        route = next(r for r in ec2.describe_route_tables(RouteTableIds=[table_id])["RouteTables"][0]["Routes"]
                     if r.get("DestinationCidrBlock") == "192.168.77.0/24")
        assert route["NetworkInterfaceId"] == first["NetworkInterfaceId"]

        address = ec2.describe_addresses(PublicIps=[account.elastic_ip])["Addresses"][0]
        assert address["NetworkInterfaceId"] == second["NetworkInterfaceId"]

        sent = {r["Action"]: r for r in requests if r["Action"] != "DescribeNetworkInterfaces"}
        made = [r for r in requests if r["Action"] == "CreateNetworkInterface"]
        assert made[0]["Ipv4Prefix.1.Ipv4Prefix"] == "10.0.32.32/28"
        assert not any(k.startswith("Ipv4Prefix") for k in made[1])
        launch = sent["RunInstances"]
        assert launch["NetworkInterface.1.NetworkInterfaceId"] == first["NetworkInterfaceId"]
        assert launch["NetworkInterface.2.DeviceIndex"] == "1"
        marked = {r["NetworkInterfaceId"] for r in requests if r["Action"] == "ModifyNetworkInterfaceAttribute"
                  and r.get("Attachment.DeleteOnTermination") == "true"}
        assert marked == {first["NetworkInterfaceId"], second["NetworkInterfaceId"]}
    finally:
        cpi("delete_vm", vm_cid)
        # real EC2 deletes them with the VM (DeleteOnTermination, checked above); moto keeps them
        for interface in ec2.describe_network_interfaces(
                Filters=[{"Name": "tag:agent_id", "Values": ["agent-nics"]}])["NetworkInterfaces"]:
            ec2.delete_network_interface(NetworkInterfaceId=interface["NetworkInterfaceId"])


def test_one_group_stays_one_request_with_its_prefix_inside(cpi, stemcell, ec2, subnets, moto_server):
    """A VM of one interface needs no MAC in its settings: RunInstances makes the interface,
    dual stack and prefix included, and nothing is made before it."""
    networks = {
        "private": manual("10.0.32.20", subnets["dual"], default=["dns", "gateway"]),
        "private-v6": v6(subnets["dual_v6"], 20, subnets["dual"], nic_group="private"),
        "pods-v6": {**v6(subnets["dual_v6"], 1 << 48, subnets["dual"], nic_group="private"), "prefix": 80},
    }
    with moto_server.recording() as requests:
        vm_cid, _ = cpi("create_vm", "agent-one-nic", stemcell, VM_PROPS, networks, [], {})
    try:
        actions = [r["Action"] for r in requests]
        assert "CreateNetworkInterface" not in actions
        launch = next(r for r in requests if r["Action"] == "RunInstances")
        assert launch["NetworkInterface.1.Ipv6Prefix.1.Ipv6Prefix"] == f"{networks['pods-v6']['ip']}/80"
        assert launch["NetworkInterface.1.DeleteOnTermination"] == "true"
        only = interfaces_of(ec2, vm_cid)
        assert list(only) == [0]
        assert only[0]["PrivateIpAddress"] == "10.0.32.20"
        # moto gives an interface RunInstances makes no fixed IPv6 address: the request has it
        assert launch["NetworkInterface.1.Ipv6Addresses.1.Ipv6Address"] == networks["private-v6"]["ip"], launch
        assert "mac" not in user_data(ec2, vm_cid)["networks"]["private"]
    finally:
        cpi("delete_vm", vm_cid)


@pytest.mark.parametrize(("networks", "message"), [
    ({"a": manual("10.0.32.30", "subnet-aaaa", nic_group="g"), "b": manual("10.0.48.30", "subnet-bbbb", nic_group="g")},
     "nic_group 'g' (a, b) are in different subnets"),
    ({"a": manual("10.0.32.30", "subnet-aaaa"), "p": {**manual("10.0.48.32", "subnet-bbbb"), "prefix": "28"}},
     "a prefix network (p) can only share the interface of a network with an address"),
    ({"a": manual("10.0.32.30", "subnet-aaaa"), "public": {"type": "vip", "ip": "203.0.113.9", "nic_group": "nope"}},
     "nic_group 'nope' is not the nic_group of any manual network of this VM (they are: a)"),
    ({"a": manual("10.0.32.30", "subnet-aaaa", nic_group="g"), "b": manual("10.0.32.31", "subnet-aaaa", nic_group="g")},
     "nic_group 'g' has two IPv4 addresses"),
    ({"a": {"type": "manual", "ip": "10.0.32.33", "prefix": "27", "cloud_properties": {"subnet": "subnet-aaaa"}},
      "b": manual("10.0.32.30", "subnet-aaaa", nic_group="a")},
     "10.0.32.33/27 is not a prefix"),
])
def test_groups_that_cannot_be_one_interface_are_refused_before_anything_is_made(
        cpi, stemcell, networks, message, moto_server):
    with moto_server.recording() as requests:
        response = cpi.call("create_vm", "agent-refused", stemcell, VM_PROPS, networks, [], {})
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert response.error["ok_to_retry"] is False
    assert message in response.error["message"]
    assert [r["Action"] for r in requests] == []


def test_interfaces_made_for_a_vm_that_fails_are_deleted(cpi, stemcell, ec2, account, subnets):
    """The VM launches, then its Elastic IP is not the account's: the VM is terminated and
    the interfaces made for it are deleted (moto keeps them after the VM: the CPI must)."""
    networks = {"a": manual("10.0.32.40", subnets["dual"]), "b": manual("10.0.48.40", subnets["second"]),
                "public": {"type": "vip", "ip": "203.0.113.77", "cloud_properties": {}}}
    response = cpi.call("create_vm", "agent-nic-fails", stemcell, VM_PROPS, networks, [], {})
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "203.0.113.77" in response.error["message"]
    left = ec2.describe_network_interfaces(Filters=[{"Name": "tag:agent_id", "Values": ["agent-nic-fails"]}])
    assert left["NetworkInterfaces"] == []
    instances = ec2.describe_instances(Filters=[{"Name": "tag:agent_id", "Values": ["agent-nic-fails"]}])
    assert {i["State"]["Name"] for r in instances["Reservations"] for i in r["Instances"]} <= {"terminated"}
