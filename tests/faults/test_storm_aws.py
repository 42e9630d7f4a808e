"""A throttling storm against EC2 (moto behind the fault proxy): 32 CPI processes at once,
30% injected faults and a request-rate limit. Every call must succeed and nothing may leak.
"""

from __future__ import annotations

import json
import random

import pytest

from tests.aws import moto_env
from tests.faults import storm
from tests.faults.proxy import FaultProxy
from tests.support.runner import Cpi


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = moto_env.MotoServer(tmp_path_factory.mktemp("storm-moto") / "moto.log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def account(moto):
    return moto_env.seed(moto.url)


def storm_config(account, proxy, tmp_path, **throttle):
    config = account.config(ec2_endpoint=proxy.url, retry_budget_seconds=300, max_retries=1000,
                            vm_wait_timeout=300, volume_wait_timeout=300, volume_in_use_timeout=300)
    config["cloud"]["properties"]["throttle"] = {"state_dir": str(tmp_path / "throttle"), **throttle}
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps(config))
    return path


def test_32_processes_through_faults_and_a_rate_limit(account, tmp_path):
    ec2 = account.ec2()
    before = moto_env.inventory(ec2)
    with FaultProxy(account.endpoint, flavor="aws", fault_rate=0.3, rate_limit=40, burst=20,
                    kinds=("throttle", "unavailable", "drop", "lost"), seed=7) as proxy:
        cpi = Cpi(storm_config(account, proxy, tmp_path))
        stemcell = cpi("create_stemcell", "", {"ami": {moto_env.REGION: account.ami_id}})
        network = {"default": {"type": "dynamic", "cloud_properties": {"subnet": account.subnet_id}}}
        vms = storm.lifecycles(cpi, stemcell, {"instance_type": "m5.large", "availability_zone": moto_env.ZONE},
                               lambda i: network)
        assert len(set(vms)) == storm.WORKERS
        stats = dict(proxy.stats)
    # the proxy really was hostile, and the CPI rode it out
    assert stats["throttled"] > 10 and stats["unavailable"] > 5 and stats["drop"] > 5 and stats["lost"] > 5, stats
    after = moto_env.inventory(ec2)
    leaked = {kind: sorted(ids - before.get(kind, set())) for kind, ids in after.items()}
    assert not any(leaked.values()), f"leaked {leaked}"


def test_create_vm_killed_midway_leaves_only_tagged_resources(account, tmp_path):
    """SIGKILL create_vm at a random moment; later calls still work, and anything it left
    carries the agent_id and director tags so an operator (or cloudcheck) can find it."""
    ec2 = account.ec2()
    with FaultProxy(account.endpoint, flavor="aws", rate_limit=5, burst=1) as proxy:
        path = storm_config(account, proxy, tmp_path)
        cpi = Cpi(path, director_uuid="director-storm")
        stemcell = cpi("create_stemcell", "", {"ami": {moto_env.REGION: account.ami_id}})
        before = moto_env.inventory(ec2)
        request = cpi.request("create_vm", "agent-killed", stemcell,
                              {"instance_type": "m5.large", "availability_zone": moto_env.ZONE},
                              {"default": {"type": "dynamic", "cloud_properties": {"subnet": account.subnet_id}}},
                              [], {"bosh": {"group": "storm"}})
        storm.kill_midway(path, request, random.Random(3).uniform(0.3, 1.5))
        assert cpi("has_vm", "i-0123456789abcdef0") is False  # the CPI still works
        after = moto_env.inventory(ec2)
        for instance_id in after["instances"] - before.get("instances", set()):
            tags = {t["Key"]: t["Value"] for t in ec2.describe_tags(
                Filters=[{"Name": "resource-id", "Values": [instance_id]}])["Tags"]}
            assert tags.get("agent_id") == "agent-killed" and tags.get("director_uuid") == "director-storm", tags
            cpi("delete_vm", instance_id)
