"""The aws lifecycle target against a real AWS account (or EC2-compatible cloud).

Runs only when CPI_LIFECYCLE_AWS_CONFIG names a JSON file (skipped otherwise) of either
shape:

    {                                       # a plain cpi.json (docs/cloud-aws.md's) plus "lifecycle"
      "cloud": {"plugin": "aws", "properties": {"aws": {...}, "agent": {...}}},
      "lifecycle": {...}
    }

    {                                       # or the cpi.json under "cpi"
      "cpi": { ...a cpi.json with cloud.plugin "aws"... },
      "lifecycle": {
        "subnet_id": "subnet-...",          # where test VMs go
        "subnet_cidr": "10.0.16.0/24",      # its IPv4 range (manual IPs are taken from it)
        "availability_zone": "eu-west-1a",  # the subnet's AZ
        "ami_id": "ami-...",                # a light stemcell AMI in the configured region
        "instance_type": "t3.micro",        # optional
        "first_ip_offset": 100              # optional: manual IPs start this far into the range
      }
    }

A file that is neither fails every test of the target with a message naming what is
missing (load()), never a KeyError.

Everything the scenarios create is deleted by them; cleanup() removes what a failed test
left (only resources that were not there when the session started).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.aws.target import AwsTarget
from tests.support.config_files import read_json

ENV = "CPI_LIFECYCLE_AWS_CONFIG"


def _ec2(aws: dict):
    import boto3

    kwargs = {"region_name": aws.get("region") or "us-east-1"}
    if aws.get("ec2_endpoint"):
        kwargs["endpoint_url"] = aws["ec2_endpoint"]
    if aws.get("credentials_source", "static") == "static":
        kwargs["aws_access_key_id"] = aws["access_key_id"]
        kwargs["aws_secret_access_key"] = aws["secret_access_key"]
        if aws.get("session_token"):
            kwargs["aws_session_token"] = aws["session_token"]
    session = boto3.session.Session()
    if aws.get("role_arn"):
        sts = session.client("sts", **kwargs)
        creds = sts.assume_role(RoleArn=aws["role_arn"], RoleSessionName="bosh-cpi-lifecycle")["Credentials"]
        kwargs.update(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                      aws_session_token=creds["SessionToken"])
    return session.client("ec2", **kwargs)


LIFECYCLE_KEYS = ("subnet_id", "subnet_cidr", "availability_zone", "ami_id")
LIFECYCLE_EXAMPLE = ('"lifecycle": {"subnet_id": "subnet-...", "subnet_cidr": "10.0.16.0/24", '
                     '"availability_zone": "eu-west-1a", "ami_id": "ami-..."}')


class LifecycleConfigError(ValueError):
    """The file named by CPI_LIFECYCLE_AWS_CONFIG lacks something; the message names it."""


def load(path: Path) -> tuple[dict, dict]:
    """(the cpi.json to run, the lifecycle's inputs) from either shape of the file."""
    where = f"{ENV}={path}"
    doc = read_json(path, where, LifecycleConfigError)
    if not isinstance(doc, dict) or not ("cpi" in doc or "cloud" in doc):
        raise LifecycleConfigError(
            f"{where}: expected a cpi.json ({{\"cloud\": {{\"plugin\": \"aws\", ...}}}}) or "
            f"{{\"cpi\": <cpi.json>, \"lifecycle\": ...}}; it has neither \"cloud\" nor \"cpi\"")
    lifecycle = doc.get("lifecycle")
    cpi_config = doc["cpi"] if "cpi" in doc else {k: v for k, v in doc.items() if k != "lifecycle"}
    cloud = cpi_config.get("cloud") if isinstance(cpi_config, dict) else None
    if not isinstance(cloud, dict) or cloud.get("plugin") != "aws":
        raise LifecycleConfigError(f"{where}: cloud.plugin must be \"aws\" (the lifecycle runs the aws cloud)")
    aws = (cloud.get("properties") or {}).get("aws")
    if not isinstance(aws, dict):
        raise LifecycleConfigError(f"{where}: cloud.properties.aws is missing (region and credentials)")
    if aws.get("credentials_source", "static") == "static":
        absent = [key for key in ("access_key_id", "secret_access_key") if not aws.get(key)]
        if absent:
            raise LifecycleConfigError(
                f"{where}: cloud.properties.aws.{' and cloud.properties.aws.'.join(absent)} missing "
                f"(or set credentials_source: env_or_profile)")
    if not isinstance(lifecycle, dict):
        lifecycle = {}
    missing = [key for key in LIFECYCLE_KEYS if not lifecycle.get(key)]
    if missing:
        raise LifecycleConfigError(
            f"{where}: the lifecycle needs where to run: lifecycle.{', lifecycle.'.join(missing)} "
            f"missing. Add next to \"cloud\" (or \"cpi\"): {LIFECYCLE_EXAMPLE}")
    return cpi_config, lifecycle


def make(tmp_path_factory) -> AwsTarget:
    path = os.environ.get(ENV)
    if not path:
        pytest.skip(f"{ENV} is not set: no real AWS account to run against")
    try:
        cpi_config, lifecycle = load(Path(path))
    except LifecycleConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    aws = cpi_config["cloud"]["properties"]["aws"]
    # the scenarios create disks without a VM and attach them to VMs in the test subnet
    aws.setdefault("default_availability_zone", lifecycle["availability_zone"])
    workdir = tmp_path_factory.mktemp("aws-real")
    config_path = workdir / "cpi.json"
    config_path.write_text(json.dumps(cpi_config))
    config_path.chmod(0o600)
    return AwsTarget(
        config_path,
        ec2=_ec2(aws),
        subnet_id=lifecycle["subnet_id"],
        subnet_cidr=lifecycle["subnet_cidr"],
        zone=lifecycle["availability_zone"],
        region=aws.get("region") or "us-east-1",
        ami_id=lifecycle["ami_id"],
        instance_type=lifecycle.get("instance_type", "t3.micro"),
        emulated=False,
        first_ip_offset=int(lifecycle.get("first_ip_offset", 100)),
    )
