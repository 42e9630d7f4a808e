"""Start-up cost: `info` must not load any AWS SDK, and an AWS call must load only the
slim EC2 model. These are the properties that keep every CPI process cheap."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from cpi.clouds.aws import slim
from cpi.clouds.aws.job_config import AwsProperties
from cpi.clouds.aws.session import Aws
from tests.support.runner import COLD_ENV, ROOT

AWS_SOURCES = sorted((ROOT / "cpi" / "clouds" / "aws").glob("*.py"))


def run_importtime(config_path: Path, request: dict) -> tuple[dict, set[str]]:
    """bin/cpi's own command line, under -X importtime: the response and the modules loaded."""
    proc = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "-X", "importtime", "-I", "-c",
         "import sys; sys.path.insert(0, sys.argv.pop(1)); from cpi.entry import main; sys.exit(main())",
         str(ROOT), str(config_path)],
        input=json.dumps(request).encode(), capture_output=True, env=COLD_ENV, cwd="/", check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    modules = {m.group(1).strip() for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|(.*)$", proc.stderr.decode(),
                                                       re.MULTILINE)}
    return json.loads(proc.stdout), modules


def test_info_with_the_aws_plugin_loads_no_aws_sdk(config_path):
    doc, modules = run_importtime(config_path, {"method": "info", "arguments": []})
    assert doc["result"] == {"stemcell_formats": ["aws-raw", "aws-light"], "api_version": 3}
    assert "cpi.clouds.aws.cloud" not in modules  # the formats of a built-in cloud are known without it
    assert not {m for m in modules if m.split(".")[0] in ("boto3", "botocore", "urllib3", "s3transfer", "pydantic")}


def test_an_aws_call_loads_botocore_but_not_boto3(config_path, account):
    doc, modules = run_importtime(config_path, {"method": "has_vm", "arguments": ["i-0123456789abcdef0"],
                                                "context": {"director_uuid": "d"}})
    assert doc["error"] is None and doc["result"] is False
    assert "botocore.session" in modules
    assert not {m for m in modules if m.split(".")[0] in ("boto3", "s3transfer")}
    assert "tenacity" not in modules  # loaded only when a request needs a retry


def test_the_ec2_client_is_built_on_the_slim_model():
    aws = Aws(AwsProperties(region="us-east-1", access_key_id="a", secret_access_key="b"))
    operations = set(aws.client("ec2").meta.service_model.operation_names)
    assert operations == set(slim.OPERATIONS)


def test_the_committed_slim_model_is_what_the_generator_makes():
    """Tied to the locked botocore only: an operator's newer botocore (installed outside the
    lock) may model EC2 differently, and the CPI keeps serving the committed model to it
    (the next test). tests/unit/test_lock.py checks that the suite's venv is the lock."""
    import botocore

    from cpi.release.lock import read

    (locked,) = {pin.version for pin in read(ROOT) if pin.key == "botocore"}
    if botocore.__version__ != locked:
        pytest.skip(f"botocore {botocore.__version__} is not the locked {locked}: the model is generated from that one")
    committed = slim.OUTPUT.read_text()
    regenerated = slim.render(slim.generate(slim.full_model()))
    assert committed == regenerated, \
        "cpi/clouds/aws/data/ec2-slim.json is stale: run bin/lock (or python -m cpi.clouds.aws.slim)"
    assert len(committed) < 300_000


def test_every_ec2_operation_the_code_calls_is_in_the_slim_model():
    called = set()
    for path in AWS_SOURCES:
        text = path.read_text()
        called |= set(re.findall(r'\bec2\(\s*"([A-Za-z]+)"', text))
        called |= set(re.findall(r'call\(\s*"ec2",\s*"([A-Za-z]+)"', text))
    assert called, "found no EC2 calls: the pattern is out of date"
    assert called <= set(slim.OPERATIONS), f"add to slim.OPERATIONS: {sorted(called - set(slim.OPERATIONS))}"


def _endpoints(slim_models: bool) -> list:
    found = []
    for region in ("us-east-1", "eu-central-1", "cn-north-1", "us-gov-west-1", "ap-southeast-7"):
        for dualstack in (False, True):
            aws = Aws(AwsProperties(region=region, access_key_id="a", secret_access_key="b",
                                    slim_models=slim_models, dualstack=dualstack))
            for service, operation, params in (
                ("ec2", "describe_instances", {}),
                ("ebs", "complete_snapshot", {"SnapshotId": "snap-1", "ChangedBlocksCount": 0}),
                ("sts", "get_caller_identity", {}),
                ("elbv2", "describe_target_groups", {}),
            ):
                client = aws.client(service)
                seen = {}

                def capture(request, seen=seen, **_):
                    auth = request.headers["Authorization"]
                    auth = auth.decode() if isinstance(auth, bytes) else auth
                    seen["url"] = request.url
                    seen["scope"] = auth.split("Credential=")[1].split(",")[0].split("/", 2)[2]
                    raise _Stop

                client.meta.events.register("before-send", capture)
                with pytest.raises(_Stop):
                    getattr(client, operation)(**params)
                found.append((region, dualstack, service, seen["url"], seen["scope"]))
    return found


class _Stop(Exception):
    pass


def test_skipping_botocores_endpoint_table_changes_no_url_or_signing_scope():
    slim_endpoints = _endpoints(True)
    assert slim_endpoints == _endpoints(False)
    assert ("cn-north-1", False, "ec2", "https://ec2.cn-north-1.amazonaws.com.cn/", "cn-north-1/ec2/aws4_request") \
        in slim_endpoints


def test_an_operation_missing_from_the_slim_model_falls_back_to_the_full_one(account, caplog):
    aws = Aws(AwsProperties(region="us-east-1", ec2_endpoint=account.endpoint, access_key_id="a",
                            secret_access_key="b"))
    regions = aws.ec2("DescribeRegions")["Regions"]
    assert any(r["RegionName"] == "us-east-1" for r in regions)
    assert "not in the slim ec2 model" in caplog.text
    assert aws.requests["DescribeRegions"] == 1
