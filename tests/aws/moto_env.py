"""A moto_server on 127.0.0.1 and the AWS account the aws cloud's config needs in it.

Used by the lifecycle target (tests/aws/target.py), the AWS-only tests
(tests/aws/conftest.py) and the bench (bench/aws_methods.py). The test process talks to
moto with boto3 to seed and inspect; the CPI under test only ever runs as bin/cpi.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config as BotoConfig

REGION = "us-east-1"
ZONE = "us-east-1a"
OTHER_ZONE = "us-east-1b"
# moto accepts any credentials; these are fake and exist only to exercise redaction.
ACCESS_KEY_ID = "AKIAMOTOTESTKEY00001"
SECRET_ACCESS_KEY = "moto-secret-access-key-not-real-0001"
SUBNET_CIDR = "10.0.0.0/20"
OTHER_SUBNET_CIDR = "10.0.16.0/20"
STEMCELL_NAME = "bosh-aws-xen-hvm-ubuntu-jammy-go_agent"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MotoServer:
    """`moto_server -H 127.0.0.1 -p <free port>` as a child process, stopped by stop()."""

    def __init__(self, log_path: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        executable = Path(sys.executable).with_name("moto_server")
        argv = [str(executable)] if executable.exists() else [sys.executable, "-m", "moto.server"]
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        # moto's request recorder (off until recording() turns it on) writes here, not in the cwd
        self._recording_dir = tempfile.TemporaryDirectory(prefix="moto-recording-")
        self.process = subprocess.Popen(
            [*argv, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "false",
                 "MOTO_RECORDER_FILEPATH": str(Path(self._recording_dir.name) / "requests.jsonl")},
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.url} within {timeout}s")

    def _moto_api(self, action: str) -> bytes:
        request = urllib.request.Request(f"{self.url}/moto-api/recorder/{action}", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read()

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[dict[str, str]]]:
        """The EC2 requests made inside the block, each as its flattened query parameters
        ({"Action": "RunInstances", "NetworkInterface.1.Ipv4Prefix.1.Ipv4Prefix": ...}), filled
        in when the block ends: for what moto takes and does not model (prefix delegation),
        the request EC2 would get is what a test can check."""
        self._moto_api("reset-recording")
        self._moto_api("start-recording")
        requests: list[dict[str, str]] = []
        try:
            yield requests
        finally:
            self._moto_api("stop-recording")
            for line in self._moto_api("download-recording").decode().splitlines():
                entry = json.loads(line)
                body = entry.get("body") or ""
                if entry.get("body_encoded"):
                    body = base64.b64decode(body).decode("utf-8", "replace")
                params = dict(urllib.parse.parse_qsl(body))
                if "Action" in params:
                    requests.append(params)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()
        self._recording_dir.cleanup()


def client(service: str, endpoint: str, region: str = REGION):
    return boto3.session.Session().client(
        service,
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        config=BotoConfig(retries={"mode": "standard", "total_max_attempts": 2}),
    )


@dataclass
class Account:
    """What the seeded account holds (IDs the tests and the target use)."""

    endpoint: str
    vpc_id: str
    subnet_id: str
    other_subnet_id: str
    security_group_id: str
    security_group_name: str
    extra_group_id: str
    extra_group_name: str
    key_name: str
    ami_id: str
    elastic_ip: str
    elastic_ip_allocation: str
    baseline: dict[str, set[str]] = field(default_factory=dict)

    def ec2(self):
        return client("ec2", self.endpoint)

    def config(self, **overrides: Any) -> dict[str, Any]:
        aws = {
            "region": REGION,
            "ec2_endpoint": self.endpoint,
            "ebs_endpoint": self.endpoint,
            "elb_endpoint": self.endpoint,
            "sts_endpoint": self.endpoint,
            "credentials_source": "static",
            "access_key_id": ACCESS_KEY_ID,
            "secret_access_key": SECRET_ACCESS_KEY,
            "default_key_name": self.key_name,
            "default_security_groups": [self.security_group_name],
            # moto answers some invalid requests with HTTP 500 (e.g. a fixed IP already in
            # use); real EC2 sends a 4xx code. A short budget keeps such tests quick.
            "retry_budget_seconds": 5,
            "vm_wait_timeout": 60,
            "volume_wait_timeout": 60,
            "volume_in_use_timeout": 10,
            "image_wait_timeout": 60,
        }
        aws.update(overrides)
        aws = {k: v for k, v in aws.items() if v is not None}
        return {
            "cloud": {
                "plugin": "aws",
                "properties": {
                    "aws": aws,
                    "agent": {"mbus": "nats://nats:nats-secret-pw@10.0.0.6:4222", "ntp": ["169.254.169.123"]},
                },
            }
        }

    def write_config(self, path: Path, **overrides: Any) -> Path:
        path.write_text(json.dumps(self.config(**overrides), indent=2))
        return path


def seed(endpoint: str) -> Account:
    """A VPC with two subnets in two AZs, two security groups, a key pair, a registered
    AMI (the light stemcell's) and an Elastic IP."""
    ec2 = client("ec2", endpoint)
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock=SUBNET_CIDR, AvailabilityZone=ZONE)["Subnet"]["SubnetId"]
    other_subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock=OTHER_SUBNET_CIDR, AvailabilityZone=OTHER_ZONE)[
        "Subnet"
    ]["SubnetId"]
    group_id = ec2.create_security_group(GroupName="bosh", Description="bosh vms", VpcId=vpc_id)["GroupId"]
    extra_id = ec2.create_security_group(GroupName="bosh-extra", Description="extra", VpcId=vpc_id)["GroupId"]
    ec2.create_key_pair(KeyName="bosh")
    volume_id = ec2.create_volume(Size=3, AvailabilityZone=ZONE)["VolumeId"]
    snapshot_id = ec2.create_snapshot(VolumeId=volume_id, Description="light stemcell root")["SnapshotId"]
    ec2.delete_volume(VolumeId=volume_id)
    ami_id = ec2.register_image(
        Name=f"{STEMCELL_NAME}-light",
        Architecture="x86_64",
        RootDeviceName="/dev/xvda",
        VirtualizationType="hvm",
        BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"SnapshotId": snapshot_id, "VolumeSize": 3}}],
    )["ImageId"]
    address = ec2.allocate_address(Domain="vpc")
    account = Account(
        endpoint=endpoint,
        vpc_id=vpc_id,
        subnet_id=subnet_id,
        other_subnet_id=other_subnet_id,
        security_group_id=group_id,
        security_group_name="bosh",
        extra_group_id=extra_id,
        extra_group_name="bosh-extra",
        key_name="bosh",
        ami_id=ami_id,
        elastic_ip=address["PublicIp"],
        elastic_ip_allocation=address["AllocationId"],
    )
    account.baseline = inventory(ec2)
    return account


def inventory(ec2) -> dict[str, set[str]]:
    """Every resource the CPI could leave behind, by kind (instances that are not
    terminated, volumes, snapshots and images of this account, interfaces)."""
    instances = {
        i["InstanceId"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
        if i["State"]["Name"] != "terminated"
    }
    return {
        "instances": instances,
        "volumes": {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]},
        "snapshots": {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]},
        "images": {i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"]},
        "network_interfaces": {n["NetworkInterfaceId"] for n in ec2.describe_network_interfaces()["NetworkInterfaces"]},
    }
