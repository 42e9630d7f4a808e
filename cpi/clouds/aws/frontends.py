"""What puts a new VM behind the addresses that reach it, once it runs: the vip
network's Elastic IP and the vm_type's load balancers (classic `elbs`, `lb_target_groups`).
create_vm calls these last; a failure here terminates the VM like any other."""

from __future__ import annotations

import logging
from typing import Any

from cpi.cids import VmCid
from cpi.errors import VMCreationFailed

from . import errors
from .nics import Interfaces, NetworkPlan
from .props import VMCloudProperties
from .session import Aws

log = logging.getLogger("cpi.clouds.aws")


def associate_elastic_ip(aws: Aws, vm_cid: VmCid, plan: NetworkPlan, interfaces: Interfaces) -> None:
    """The Elastic IP goes to the interface of the vip network's nic_group (the primary
    one by default)."""
    assert plan.vip is not None
    ip, vip_name = plan.vip.ip, plan.vip_name
    try:
        addresses = aws.ec2("DescribeAddresses", PublicIps=[ip]).get("Addresses", [])
    except Exception as exc:
        if errors.code(exc) in ("InvalidAddress.NotFound", "InvalidParameterValue"):
            addresses = []
        else:
            raise
    if not addresses:
        raise VMCreationFailed(
            f"Elastic IP {ip} of vip network '{vip_name}' is not allocated to this account in "
            f"{aws.properties.signing_region}",
            ok_to_retry=False,
        )
    address = addresses[0]
    interface_id = interfaces.at(plan.vip_device_index)
    params: dict[str, Any] = {"AllowReassociation": True}
    if interface_id:
        params["NetworkInterfaceId"] = interface_id
    else:
        params["InstanceId"] = vm_cid
    if address.get("AllocationId"):
        params["AllocationId"] = address["AllocationId"]
    else:
        params["PublicIp"] = ip
    if address.get("InstanceId") and address["InstanceId"] != vm_cid:
        log.info("Elastic IP %s moves from %s to %s", ip, address["InstanceId"], vm_cid)
    aws.ec2("AssociateAddress", budget=60.0, also=lambda c: c in ("InvalidInstanceID", "IncorrectInstanceState"),
            **params)
    log.info("associated Elastic IP %s with %s", ip, vm_cid)


def register_load_balancers(aws: Aws, vm_cid: VmCid, props: VMCloudProperties) -> None:
    for name in props.elbs:
        aws.call("elb", "RegisterInstancesWithLoadBalancer", LoadBalancerName=name,
                 Instances=[{"InstanceId": vm_cid}])
        log.info("registered %s with classic load balancer %s", vm_cid, name)
    if not props.lb_target_groups:
        return
    arns = [g for g in props.lb_target_groups if g.startswith("arn:")]
    names = [g for g in props.lb_target_groups if not g.startswith("arn:")]
    if names:
        found = aws.call("elbv2", "DescribeTargetGroups", Names=names).get("TargetGroups", [])
        arns += [g["TargetGroupArn"] for g in found]
    for arn in arns:
        aws.call("elbv2", "RegisterTargets", TargetGroupArn=arn, Targets=[{"Id": vm_cid}])
        log.info("registered %s with target group %s", vm_cid, arn)
