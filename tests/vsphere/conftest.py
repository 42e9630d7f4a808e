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
