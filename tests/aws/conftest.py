"""Fixtures of the AWS-only tests: one moto_server for the session, a seeded account, and
bin/cpi clients on configs pointing at it."""

from __future__ import annotations

import uuid

import pytest

from tests.aws import moto_env
from tests.support.runner import Cpi


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory):
    server = moto_env.MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def account(moto_server) -> moto_env.Account:
    return moto_env.seed(moto_server.url)


@pytest.fixture(scope="session")
def ec2(account):
    return account.ec2()


@pytest.fixture(scope="session")
def config_path(account, tmp_path_factory):
    return account.write_config(tmp_path_factory.mktemp("aws-config") / "cpi.json")


@pytest.fixture(scope="session")
def cpi(config_path) -> Cpi:
    return Cpi(config_path)


@pytest.fixture
def make_cpi(account, tmp_path):
    """A Cpi on a config with some aws properties changed."""

    def make(**overrides) -> Cpi:
        return Cpi(account.write_config(tmp_path / f"cpi-{uuid.uuid4().hex[:8]}.json", **overrides))

    return make


@pytest.fixture(scope="session")
def stemcell(cpi, account):
    return cpi("create_stemcell", "", {"name": moto_env.STEMCELL_NAME, "version": "1.0",
                                       "ami": {moto_env.REGION: account.ami_id}})


class Ips:
    """Fixed IPs for manual networks, unique across the session."""

    def __init__(self, account):
        self.account = account
        self.next = 100

    def network(self, subnet_id: str | None = None, **cloud_properties) -> dict:
        self.next += 1
        ip = f"10.0.{self.next // 250}.{self.next % 250 + 4}"
        return {
            "default": {
                "type": "manual",
                "ip": ip,
                "netmask": "255.255.240.0",
                "gateway": "10.0.0.1",
                "dns": ["10.0.0.2"],
                "default": ["dns", "gateway"],
                "cloud_properties": {"subnet": subnet_id or self.account.subnet_id, **cloud_properties},
            }
        }


@pytest.fixture(scope="session")
def ips(account) -> Ips:
    return Ips(account)


VM_PROPS = {"instance_type": "m5.large", "availability_zone": moto_env.ZONE}
