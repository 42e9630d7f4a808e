"""The OpenStack target as module-scoped fixtures, for test modules outside tests/openstack
(whose conftest has its own, session-scoped): import the ones a module uses."""

from __future__ import annotations

import pytest

from tests.openstack import target


@pytest.fixture(scope="module")
def openstack_cloud(tmp_path_factory):
    """The OpenStack target (loopback services, or a real cloud), cleaned up after the module."""
    made = target.make(tmp_path_factory)
    yield made
    made.cleanup()


@pytest.fixture(scope="module")
def openstack_loopback(openstack_cloud):
    """The loopback services only: for tests that put a fault proxy in front of their APIs."""
    if openstack_cloud.env.get("real"):
        pytest.skip("runs against the loopback services only: a fault proxy stands in front of their APIs")
    return openstack_cloud
