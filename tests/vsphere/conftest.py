"""Fixtures of the vSphere tests: a cloud on the simulator (tests/conftest.py starts one
per session) that makes a stemcell and checks, afterwards, that nothing is left."""

from __future__ import annotations

import uuid

import pytest

from tests.support.runner import Cpi
from tests.support.vcsim import pytest_collection_finish  # noqa: F401  (install and build before the first test)
from tests.vsphere import stemcell as stemcell_image
from tests.vsphere import target as vsphere_target


def vsphere_properties(server, **overrides):
    """The vsphere section of a cpi.json for `server` (a running simulator), as the typed
    model the cloud reads."""
    from cpi.clouds.vsphere.job_config import VsphereProperties

    section = {"host": f"{server.host}:{server.port}", "user": server.username, "password": server.password,
               "datacenters": [{"name": "DC0", "clusters": ["DC0_C0"], "datastore_pattern": "^LocalDS_",
                                "persistent_datastore_pattern": "^LocalDS_"}]}
    return VsphereProperties.model_validate({**section, **overrides})


@pytest.fixture
def properties(vcsim):
    """The simulator's config model; the process's cached sessions are forgotten after the
    test, so each test logs in afresh."""
    from cpi.clouds.vsphere.vcenter import session

    yield vsphere_properties(vcsim)
    session.forget()


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    return stemcell_image.build(tmp_path_factory.mktemp("vsphere-stemcell"))


@pytest.fixture
def cloud(vcsim, image, tmp_path, si):
    """cpi(**overrides): a Cpi on a config of the simulator with those vsphere keys; the
    stemcell made with the first is `cloud.stemcell`; everything made is gone afterwards."""

    class Cloud:
        stemcell = None

        def cpi(self, **overrides) -> Cpi:
            path = vsphere_target.write_config(tmp_path / f"cpi-{uuid.uuid4().hex[:8]}.json", vcsim, **overrides)
            made = Cpi(path)
            if self.stemcell is None:
                self.stemcell = made("create_stemcell", str(image), {})
                self.first = made
            return made

    made = Cloud()
    yield made
    if made.stemcell is not None:
        made.first("delete_stemcell", made.stemcell)
    vcenter = vsphere_target.Vcenter(vcsim)
    try:
        assert vsphere_target.leftovers(vcenter, vsphere_target.Site.simulator(vcsim)) == {}
    finally:
        vcenter.close()
