"""The job's cpi.json, rendered from the official vsphere_cpi job's properties (jobs/cpi's
template, through Ruby's ERB as BOSH renders it), drives the vsphere cloud on the simulator,
and no secret of those properties reaches a response, its log or stderr (#25)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.release.support import JOB_DIR, render
from tests.support.runner import COLD_ENV, Cpi

NSX_PASSWORD, NSXT_PASSWORD, NSXT_KEY, NATS_PASSWORD = "nsx-Secret-2", "nsxt-Secret-3", "nsxt-Key-4", "nats-Secret-5"


@pytest.fixture
def ruby() -> str:
    found = shutil.which("ruby")
    if not found:
        pytest.skip("ruby is not installed: the job's templates are rendered with Ruby's ERB, as BOSH does")
    return found


def bin_cpi(vcsim, tmp_path, ruby, password: str) -> Cpi:
    """bin/cpi with the cpi.json the job renders from the official job's properties for the
    simulator: debug logging, and every secret the official job takes."""
    vcenter = {
        "host": f"{vcsim.host}:{vcsim.port}", "user": vcsim.username, "password": password,
        "datacenters": [{"name": "DC0", "clusters": [{"DC0_C0": {}}], "datastore_pattern": "^LocalDS_",
                         "persistent_datastore_pattern": "^LocalDS_"}],
        "http_logging": True, "retry_budget_seconds": 5.0,
        "nsx": {"address": "nsx.example.test", "user": "nsx-admin", "password": NSX_PASSWORD},
        "nsxt": {"host": "nsxt.example.test", "username": "nsxt-admin", "password": NSXT_PASSWORD,
                 "auth_certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                 "auth_private_key": f"-----BEGIN PRIVATE KEY-----\n{NSXT_KEY}\n-----END PRIVATE KEY-----\n"},
    }
    properties = {"cloud": {"plugin": "vsphere"}, "vcenter": vcenter,
                  "nats": {"address": "10.0.0.6", "user": "nats", "password": NATS_PASSWORD}}
    config_path = tmp_path / "cpi.json"
    config_path.write_text(render(JOB_DIR / "templates/cpi.json.erb", properties, tmp_path, ruby))
    assert json.loads(config_path.read_text())["cloud"]["properties"]["vsphere"]["password"] == password
    return Cpi(config_path, env={**COLD_ENV, "CPI_LOG_LEVEL": "debug", "HOME": str(tmp_path)})


def test_the_rendered_config_drives_the_simulator_without_a_secret_in_any_log(vcsim, tmp_path, ruby):
    cpi = bin_cpi(vcsim, tmp_path, ruby, vcsim.password)
    for method, argument in (("has_vm", "vm-00000000-0000-0000-0000-000000000000"), ("has_disk", "disk-none")):
        response = cpi.call(method, argument)
        assert response.result is False, method
        assert f"logged in as {vcsim.username!r}" in response.log  # with the password the job rendered
        for secret in (vcsim.password, NSX_PASSWORD, NSXT_PASSWORD, NSXT_KEY, NATS_PASSWORD):
            assert secret not in response.raw and secret not in response.stderr, (method, secret)


def test_a_wrong_password_fails_clearly_without_either_password(vcsim, tmp_path, ruby):
    wrong = vcsim.password + "-Wrong"
    response = bin_cpi(vcsim, tmp_path, ruby, wrong).call("has_vm", "vm-00000000-0000-0000-0000-000000000000")
    assert response.error is not None and response.error["type"] == "Bosh::Clouds::CloudError"
    assert vcsim.username in response.error["message"]
    for secret in (wrong, vcsim.password, NSX_PASSWORD, NSXT_PASSWORD, NSXT_KEY, NATS_PASSWORD):
        assert secret not in response.raw and secret not in response.stderr, secret

