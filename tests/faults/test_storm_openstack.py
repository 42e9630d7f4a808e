"""A throttling storm against real OpenStack services on loopback, each API (Keystone, Nova,
Neutron, Cinder, Glance) behind its own fault proxy: 32 CPI processes at once, 30% injected
faults (429 and 413 with Retry-After, 503, dropped connections, lost answers) and a
request-rate limit per service. Every call must succeed, and afterwards OpenStack holds no leaked server,
volume, port or floating IP.
"""

from __future__ import annotations

import json
import random
import urllib.parse
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.faults import storm
from tests.faults.proxy import FaultProxy
from tests.openstack import target as os_target
from tests.support.runner import Cpi

#: the catalog service of each API the CPI calls, and the key of its endpoint in the
#: cloud description setup.sh writes
SERVICES = {"identity": "identity", "compute": "compute", "network": "network", "block-storage": "volumev3",
            "image": "image"}


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    made = os_target.make(tmp_path_factory)
    if made.env.get("real"):
        pytest.skip("the storm runs against the loopback services only: it needs a fault proxy in front of each API")
    yield made
    made.cleanup()


class Proxies:
    """One FaultProxy per OpenStack API, and the cpi.json that sends the CPI through them."""

    def __init__(self, env, stack: ExitStack, **faults):
        self.env = env
        self.by_service = {}
        for service, key in SERVICES.items():
            parts = urllib.parse.urlsplit(env["endpoints"][key])
            proxy = stack.enter_context(FaultProxy(f"{parts.scheme}://{parts.netloc}", flavor="openstack", **faults))
            self.by_service[service] = (proxy, parts.path)

    def url(self, service: str) -> str:
        proxy, path = self.by_service[service]
        return proxy.url + path

    def config(self, tmp_path: Path, **throttle: Any) -> Path:
        overrides = {service: self.url(service) for service in SERVICES if service != "identity"}
        path = os_target.write_config(
            tmp_path / f"cpi-{uuid.uuid4().hex[:8]}.json", self.env, auth_url=self.url("identity"),
            endpoint_overrides=overrides, retry_budget_seconds=300, max_retries=1000, state_timeout=300,
            token_cache_dir=str(tmp_path / "tokens"),
        )
        config = json.loads(path.read_text())
        config["cloud"]["properties"]["throttle"] = {"state_dir": str(tmp_path / "throttle"), **throttle}
        path.write_text(json.dumps(config))
        return path

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for proxy, _ in self.by_service.values():
            for key, n in proxy.stats.items():
                total[key] = total.get(key, 0) + n
        return total


def floating_ips(client) -> dict[str, str | None]:
    """Each floating IP of the project, and the port it is bound to."""
    return {f["id"]: f.get("port_id") for f in client.get("network", "/v2.0/floatingips")["floatingips"]}


def test_32_processes_through_faults_and_a_rate_limit(cloud, tmp_path):
    client = cloud.client
    before, fips_before = client.inventory(), floating_ips(client)
    stemcell = Cpi(cloud.config_path)("create_stemcell", *cloud.stemcell_args())
    fip = cloud.env.get("floating_ip")

    def networks_of(i):  # the first VM also holds the project's floating IP (a vip network)
        networks = cloud.dynamic_network()
        if i == 0 and fip:
            networks["vip"] = {"type": "vip", "ip": fip["address"], "cloud_properties": {}}
        return networks

    with ExitStack() as stack:
        # a quarter of the faults are throttles (7.5% of requests, whatever the rate), the rest
        # 503s, connections dropped before the service saw the request, and answers lost after
        # it carried the request out; the rate limit adds the throttling that rate causes
        proxies = Proxies(cloud.env, stack, fault_rate=0.3, rate_limit=15, burst=8, retry_after=1,
                          kinds=("throttle", "overlimit") + ("unavailable", "drop", "lost") * 2, seed=11)
        cpi = Cpi(proxies.config(tmp_path))
        vms = storm.lifecycles(cpi, stemcell, cloud.vm_cloud_properties(), networks_of)
        stats = proxies.stats()
    assert len(set(vms)) == storm.WORKERS
    # the services really were hostile, and the CPI rode it out
    assert stats["throttled"] > 10 and stats["unavailable"] > 5 and stats["drop"] > 5 and stats["lost"] > 5, stats
    # the processes shared one backoff rate per API (and host)
    # (files are named by a hash of their key, which they carry inside)
    keys = [json.loads(p.read_text())["key"] for p in (tmp_path / "throttle").glob("*.json")]
    shared = sorted(key.split("-127.0.0.1")[0] for key in keys if key.startswith("openstack-"))
    assert shared == ["openstack-block-storage", "openstack-compute", "openstack-identity", "openstack-network"], shared
    after = client.inventory()
    leaked = {kind: sorted(ids - before[kind]) for kind, ids in after.items() if kind != "images"}
    assert not any(leaked.values()), f"leaked {leaked}"
    assert floating_ips(client) == fips_before


def test_create_vm_killed_midway_leaves_only_tagged_resources(cloud, tmp_path):
    """SIGKILL create_vm at a random moment; later calls still work, and every server or
    port it left names the agent_id and the director, so an operator can find it."""
    client = cloud.client
    stemcell = Cpi(cloud.config_path)("create_stemcell", *cloud.stemcell_args())
    with ExitStack() as stack:
        proxies = Proxies(cloud.env, stack, rate_limit=8, burst=2)
        path = proxies.config(tmp_path)
        cpi = Cpi(path, director_uuid="director-storm")
        before = client.inventory()
        for attempt, moment in enumerate(random.Random(5).uniform(0.5, 2.5) for _ in range(3)):
            request = cpi.request("create_vm", f"agent-killed-{attempt}", stemcell, cloud.vm_cloud_properties(),
                                  cloud.dynamic_network(), [], {})
            storm.kill_midway(path, request, moment)
        assert cpi("has_vm", str(uuid.uuid4())) is False  # the CPI still works
        after = client.inventory()
        left_servers = after["servers"] - before["servers"]
        left_ports = after["ports"] - before["ports"]
        assert left_servers or left_ports, "no kill landed after the first create request: adjust the moments"
        for port in client.get("network", "/v2.0/ports")["ports"]:
            if port["id"] in left_ports:
                assert "agent_id=agent-killed-" in port["description"], port
                assert "director_uuid=director-storm" in port["description"], port
        for server_id in left_servers:
            metadata = client.server(server_id)["metadata"]
            assert metadata.get("agent_id", "").startswith("agent-killed-"), metadata
            assert metadata.get("director_uuid") == "director-storm", metadata
            cpi("delete_vm", server_id)
