"""Several directors share one IaaS account's rate limit (issue #13): four "machines"
(separate HOME and throttle dirs) run disk storms at once through one rate-limited fault
proxy in front of moto. With the Redis store every call succeeds, nothing leaks, and the
throttled answers all directors get together drop clearly against the file store; with
redis-server killed mid-storm every call still succeeds. bench/directors.py measures it.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.aws import moto_env
from tests.faults import directors
from tests.faults.proxy import FaultProxy
from tests.faults.test_storm_aws import account, moto  # noqa: F401 - fixtures: a moto server of this module's own
from tests.openstack.fixtures import openstack_cloud, openstack_loopback  # noqa: F401 - fixtures
from tests.support import redis_server

DIRECTORS, WORKERS, CYCLES = 4, 4, 1
RATE, BURST = 4.0, 2.0
DISK = {"type": "gp3"}


@pytest.fixture(scope="module")
def redis():
    server = redis_server.server()
    yield server
    server.stop()


def aws_config(account, proxy):
    def make(home):
        return account.config(ec2_endpoint=proxy.url, retry_budget_seconds=300, max_retries=1000,
                              volume_wait_timeout=300, default_availability_zone=moto_env.ZONE)
    return make


def run(account, tmp_path, redis_url, during=None, count=DIRECTORS, workers=WORKERS):
    ec2 = account.ec2()
    before = moto_env.inventory(ec2)
    with FaultProxy(account.endpoint, flavor="aws", rate_limit=RATE, burst=BURST) as proxy:
        cpis = directors.directors(tmp_path / uuid.uuid4().hex[:6], count, aws_config(account, proxy),
                                   redis_url=redis_url, key_prefix=f"test-{uuid.uuid4().hex[:8]}:",
                                   # the same settings for both stores (only where the state is differs), a
                                   # start twice the limit, and a Redis timeout that a loaded CI machine
                                   # cannot trip (falling back is another test's subject)
                                   burst=BURST / 2, max_rate=2 * RATE, redis_timeout=2.0)
        outcome = directors.storm(cpis, proxy, workers, CYCLES, DISK, during=during)
    assert not outcome.failed, outcome.failed
    after = moto_env.inventory(ec2)
    leaked = {kind: sorted(ids - before.get(kind, set())) for kind, ids in after.items()}
    assert not any(leaked.values()), f"leaked {leaked}"
    return outcome


def test_directors_sharing_redis_get_clearly_fewer_throttles_than_each_alone(account, redis, tmp_path):
    alone = run(account, tmp_path, None)
    shared = run(account, tmp_path, redis.url)
    print(f"file store: {alone}\nredis store: {shared}")
    assert alone.throttled >= 10, alone  # the proxy's limit really was in the way
    assert shared.throttled * 2 <= alone.throttled, (alone, shared)
    assert redis.client().keys("test-*"), "the directors' state was not in Redis"


def test_redis_killed_mid_storm_fails_no_call(account, tmp_path):
    server = redis_server.server()
    killed = threading.Event()

    def kill_soon():
        time.sleep(2.0)
        server.kill()
        killed.set()

    try:
        run(account, tmp_path, server.url, during=kill_soon, count=2, workers=3)
        assert killed.is_set()
    finally:
        server.stop()


# ---------------------------------------------------------------- the real OpenStack services


def test_openstack_directors_sharing_redis_through_cinders_limit_fail_no_call(openstack_loopback, redis, tmp_path):
    import urllib.parse

    from tests.openstack import target as os_target

    env = openstack_loopback.env
    client = os_target.Client(env)
    before = client.inventory()
    parts = urllib.parse.urlsplit(env["endpoints"]["volumev3"])
    with FaultProxy(f"{parts.scheme}://{parts.netloc}", flavor="openstack", rate_limit=RATE, burst=BURST) as proxy:
        def make(home):
            path = os_target.write_config(home / "os.json", env, retry_budget_seconds=300, max_retries=1000,
                                          state_timeout=300, token_cache_dir=str(home / "tokens"),
                                          endpoint_overrides={"block-storage": proxy.url + parts.path})
            import json

            return json.loads(path.read_text())

        cpis = directors.directors(tmp_path, 2, make, redis_url=redis.url, key_prefix=f"test-{uuid.uuid4().hex[:8]}:")
        outcome = directors.storm(cpis, proxy, 3, 1, {})
    print(f"openstack, redis store: {outcome}")
    assert not outcome.failed, outcome.failed
    assert client.inventory() == before
    assert outcome.forwarded >= 2 * 3 * 3  # every call went through Cinder's proxy
