"""Fixtures of the OpenStack-only tests: the cloud (loopback services or the real cloud of
CPI_LIFECYCLE_OPENSTACK_CONFIG, see target.py), clients to check it directly, and bin/cpi
clients on configs written for each case."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.openstack import target as os_target
from tests.openstack.services import pytest_collection_finish  # noqa: F401  (set-up before the first test)
from tests.support.runner import Cpi


@pytest.fixture(scope="session")
def cloud(tmp_path_factory) -> os_target.OpenStackTarget:
    """Skips every test that uses it when no OpenStack is available (with the reason)."""
    made = os_target.make(tmp_path_factory)
    yield made
    made.cleanup()


@pytest.fixture(scope="session")
def env(cloud) -> dict[str, Any]:
    return cloud.env


@pytest.fixture(scope="session")
def client(cloud) -> os_target.Client:
    return cloud.client


@pytest.fixture(scope="session")
def admin(env) -> os_target.Client:
    if not env.get("admin"):
        pytest.skip("needs the admin account of the loopback services")
    return os_target.Client(env, admin=True)


@pytest.fixture(scope="session")
def cpi(cloud) -> Cpi:
    return cloud.cpi


@pytest.fixture
def cpi_with(env, tmp_path):
    """`cpi_with(**openstack_properties)`: a bin/cpi client on a config with those changes."""

    def make(**overrides: Any) -> Cpi:
        path = tmp_path / f"cpi-{uuid.uuid4().hex[:8]}.json"
        return Cpi(os_target.write_config(path, env, **overrides))

    return make


@pytest.fixture(scope="session")
def stemcell(cloud, cpi) -> str:
    return cpi("create_stemcell", *cloud.stemcell_args())
