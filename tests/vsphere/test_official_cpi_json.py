"""The cpi.json the official vsphere_cpi job renders (`cloud.properties.vcenters`, `agent`,
`plugins`: tests/vsphere/official_cpi.py) drives bin/cpi as it is, with the director's
context merged into its vCenter as the official CPI merges it (#32); a malformed one is one
clear config error naming the key."""

from __future__ import annotations

import json

import pytest

from tests.support.runner import Cpi
from tests.vsphere import official_cpi
from tests.vsphere import target as vsphere_target


def write(tmp_path, document: dict) -> Cpi:
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps(document))
    return Cpi(path)


def test_the_official_cpi_json_works_verbatim_with_the_context_merged(vcsim, si, tmp_path):
    cpi = write(tmp_path, official_cpi.cpi_json(vcsim))
    assert cpi("has_vm", "vm-00000000-0000-0000-0000-000000000000") is False
    # a cpi-config's keys reach the vCenter's as the official CPI merges them: the disk goes
    # to the context's disk_path, the file's stays empty
    datacenter = official_cpi.cpi_json(vcsim)["cloud"]["properties"]["vcenters"][0]["datacenters"][0]
    context = {"datacenters": [{**datacenter, "disk_path": "cpi-context-disks"}]}
    disk_cid = cpi("create_disk", 1024, {}, None, context=context)
    vcenter = vsphere_target.Vcenter(None, si)
    try:
        assert f"{disk_cid}.vmdk" in files(vcenter, "cpi-context-disks"), "the disk is in the context's disk_path"
        assert cpi("has_disk", disk_cid, context=context) is True
        assert cpi("has_disk", disk_cid) is False  # the file's disk_path: not there
    finally:
        cpi("delete_disk", disk_cid, context=context)
    assert files(vcenter, "cpi-context-disks") == set()


def files(vcenter: vsphere_target.Vcenter, folder: str) -> set[str]:
    return {name for datastore in vcenter.datastores() for name in vcenter.files(datastore, folder)}


def _without_user(document: dict) -> dict:
    del document["cloud"]["properties"]["vcenters"][0]["user"]
    return document


@pytest.mark.parametrize(("change", "message"), [
    (_without_user, "invalid config: cloud.properties.vcenters[0].user: Field required"),
    (lambda d: {**d, "cloud": {**d["cloud"], "properties": {**d["cloud"]["properties"], "vcenters": []}}},
     "invalid config: cloud.properties: vcenters must be a list of one vCenter"),
    (lambda d: {**d, "cloud": {**d["cloud"], "properties": {
        **d["cloud"]["properties"], "vsphere": d["cloud"]["properties"]["vcenters"][0]}}},
     "invalid config: cloud.properties has both vsphere and the official CPI's vcenters and plugins"),
    (lambda d: {**d, "cloud": {**d["cloud"], "properties": {**d["cloud"]["properties"], "plugins": {"hooks": {}}}}},
     "plugins names the official CPI's Ruby plug-ins (hooks)"),
])
def test_a_malformed_official_cpi_json_is_one_clear_error(vcsim, tmp_path, change, message):
    response = write(tmp_path, change(official_cpi.cpi_json(vcsim))).call("has_vm", "vm-1")
    assert response.error is not None and response.error["type"] == "Bosh::Clouds::CpiError", response.raw
    assert message in response.error["message"]
    assert vcsim.password not in response.raw and vcsim.password not in response.stderr
