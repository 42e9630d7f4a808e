"""Fixtures of the vSphere tests: VMware's simulator on 127.0.0.1 (tests/support/vcsim.py),
built and started once per session, and a pyvmomi connection to it."""

from __future__ import annotations

import pytest

from tests.support import vcsim as vcsim_server
from tests.support.vcsim import pytest_collection_finish  # noqa: F401  (install and build before the first test)


@pytest.fixture(scope="session")
def vcsim() -> vcsim_server.Vcsim:
    """The running simulator (url, host, port, username, password); skips or fails every test
    that uses it when it cannot be had, saying why (see tests/support/vcsim.py)."""
    server = vcsim_server.server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def si(vcsim):
    """A pyvmomi ServiceInstance logged in to the simulator."""
    from pyVim.connect import Disconnect, SmartConnect

    instance = SmartConnect(host=vcsim.host, port=vcsim.port, user=vcsim.username, pwd=vcsim.password,
                            disableSslCertValidation=True)
    yield instance
    Disconnect(instance)


def vsphere_properties(server, **overrides):
    """The vsphere section of a cpi.json for `server` (a running simulator), as the typed
    model the cloud reads."""
    from cpi.clouds.vsphere.props import VsphereProperties

    section = {"host": f"{server.host}:{server.port}", "user": server.username, "password": server.password,
               "datacenters": [{"name": "DC0", "clusters": ["DC0_C0"], "datastore_pattern": "^LocalDS_",
                                "persistent_datastore_pattern": "^LocalDS_"}]}
    return VsphereProperties.model_validate({**section, **overrides})


@pytest.fixture
def properties(vcsim):
    """The simulator's config model; the process's cached sessions are forgotten after the
    test, so each test logs in afresh."""
    from cpi.clouds.vsphere import session

    yield vsphere_properties(vcsim)
    session.forget()
