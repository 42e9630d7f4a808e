"""`cpi validate --online` for the aws cloud: read-only Describe* calls that check what a
cloud-config's cloud_properties name exists (subnets, security groups, key pairs, instance
types, availability zones, IAM instance profiles), and the defaults cpi.json names too."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from cpi.clouds.findings import Finding, Item, missing, references

from . import errors
from .session import Aws

SPEC = {
    "vm": {
        "instance_type": "instance_type",
        "availability_zone": "availability_zone",
        "key_name": "key_pair",
        "security_groups": "security_group",
        "iam_instance_profile": "iam_instance_profile",
    },
    "network": {"subnet": "subnet", "security_groups": "security_group"},
}
CONFIG = "cpi.json: cloud.properties.aws"


#: What a cloud-config names, by kind of resource: name -> the YAML paths that name it.
Refs = dict[str, dict[str, list[str]]]


class _Cloud(Protocol):
    """What the checks read of the aws cloud, its session (whose properties are the
    cloud's): named here rather than imported, since cloud.py imports this module."""

    @property
    def session(self) -> Aws: ...


def check_cloud_config(cloud: _Cloud, items: list[Item]) -> list[Finding]:
    aws = cloud.session
    refs = references(items, SPEC)
    p = aws.properties
    defaults = {
        "key_pair": [p.default_key_name] if p.default_key_name else [],
        "security_group": list(p.default_security_groups),
        "iam_instance_profile": [p.default_iam_instance_profile] if p.default_iam_instance_profile else [],
        "availability_zone": [p.default_availability_zone] if p.default_availability_zone else [],
    }
    prop_of = {"key_pair": "default_key_name", "security_group": "default_security_groups",
               "iam_instance_profile": "default_iam_instance_profile", "availability_zone": "default_availability_zone"}
    for resource, names in defaults.items():
        for index, name in enumerate(names):
            suffix = f"[{index}]" if resource == "security_group" else ""
            refs.setdefault(resource, {}).setdefault(name, []).append(f"{CONFIG}.{prop_of[resource]}{suffix}")

    findings: list[Finding] = []
    try:
        if "subnet" in refs:
            found: set[str] = _collect(aws, "DescribeSubnets", "Subnets", "SubnetId",
                             Filters=[{"Name": "subnet-id", "Values": sorted(refs["subnet"])}])
            findings += missing(refs, "subnet", found, "subnet")
        if "security_group" in refs:
            names = sorted(refs["security_group"])
            ids = [n for n in names if n.startswith("sg-")]
            found = set()
            if ids:
                found |= _collect(aws, "DescribeSecurityGroups", "SecurityGroups", "GroupId",
                                  Filters=[{"Name": "group-id", "Values": ids}])
            plain = [n for n in names if not n.startswith("sg-")]
            if plain:
                found |= _collect(aws, "DescribeSecurityGroups", "SecurityGroups", "GroupName",
                                  Filters=[{"Name": "group-name", "Values": plain}])
            findings += missing(refs, "security_group", found, "security group")
        if "availability_zone" in refs:
            zones = _collect(aws, "DescribeAvailabilityZones", "AvailabilityZones", "ZoneName")
            findings += missing(refs, "availability_zone", zones, "availability zone")
        if "instance_type" in refs:
            found = set()
            for name in refs["instance_type"]:
                found |= _exists(aws, "DescribeInstanceTypes", "InstanceTypes", "InstanceType",
                                 not_found=("InvalidInstanceType",), InstanceTypes=[name])
            findings += missing(refs, "instance_type", found, "instance type")
        if "key_pair" in refs:
            found = set()
            # DescribeKeyPairs is outside the slim model on purpose (bin/cpi never calls it):
            # the full model it loads here is expected, not a gap to warn about
            logging.getLogger("cpi.clouds.aws").addFilter(_expected_full_model)
            for name in refs["key_pair"]:
                found |= _exists(aws, "DescribeKeyPairs", "KeyPairs", "KeyName",
                                 not_found=("InvalidKeyPair.NotFound",), KeyNames=[name])
            findings += missing(refs, "key_pair", found, "key pair")
        if "iam_instance_profile" in refs:
            findings += _instance_profiles(aws, refs)
    except Exception as exc:
        if not type(exc).__module__.startswith("botocore"):
            raise
        raise errors.to_cloud_error(exc, "validate --online", aws.describe_credentials()) from None
    return findings


def _expected_full_model(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("operation not in the slim")


def _collect(aws: Aws, operation: str, key: str, field: str, **params: Any) -> set[str]:
    found: set[str] = set()
    while True:
        answer = aws.ec2(operation, **params)
        found |= {entry.get(field) for entry in answer.get(key, [])}
        token = answer.get("NextToken")
        if not token:
            return found
        params["NextToken"] = token


def _exists(aws: Aws, operation: str, key: str, field: str, not_found: tuple[str, ...], **params: Any) -> set[str]:
    try:
        return _collect(aws, operation, key, field, **params)
    except Exception as exc:
        if errors.code(exc) in not_found or errors.is_not_found(exc):
            return set()
        raise


def _instance_profiles(aws: Aws, refs: Refs) -> list[Finding]:
    """IAM is global: asked at the IAM endpoint (with `ec2_endpoint` set, at that endpoint,
    as an EC2-compatible cloud or a test server serves both). An IAM that cannot be asked
    (no permission, no IAM at all) is a warning, not a finding about the cloud-config."""
    findings = []
    try:
        import botocore.session

        from .session import _fixed_provider

        # the CPI's own sessions know only the services bin/cpi calls; IAM is asked only here
        session = botocore.session.Session()
        session.get_component("credential_provider").insert_before(
            "env", _fixed_provider(aws._botocore_session().get_credentials()))
        iam = session.create_client("iam", region_name=aws.properties.signing_region,
                                    endpoint_url=aws.properties.ec2_endpoint, verify=aws.ca_bundle,
                                    config=aws._config())
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        return [Finding(path, f"IAM instance profile '{name}' not checked: {errors.summary(exc)}", "warning")
                for name, paths in refs["iam_instance_profile"].items() for path in paths]
    for name, paths in refs["iam_instance_profile"].items():
        profile = name.rsplit("/", 1)[-1] if name.startswith("arn:") else name
        try:
            iam.get_instance_profile(InstanceProfileName=profile)
        except Exception as exc:  # noqa: BLE001 - NoSuchEntity is the finding; others are warnings
            if errors.code(exc) == "NoSuchEntity":
                findings += [Finding(path, f"IAM instance profile '{name}' does not exist") for path in paths]
            else:
                findings += [Finding(path, f"IAM instance profile '{name}' not checked: {errors.summary(exc)}",
                                     "warning") for path in paths]
    return findings
