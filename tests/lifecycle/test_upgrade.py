"""Upgrades keep what exists: what the previous release made, the new code still manages.

A restructure can orphan resources without failing one lifecycle test: a renamed record
field, a moved state-dir path, a tag key spelled differently, and the director's VMs and
persistent disks become invisible to has_*/get_disks/delete_*. So the previous release's
own code (the commit before the restructure, exported from this clone's history) makes
VMs, disks attached and detached, a snapshot and a stemcell on every cloud, and this
checkout's bin/cpi then finds, attaches, detaches and deletes them.

PREVIOUS moves forward when a release ships; the test needs the clone's history (a
shallow clone skips it, saying so).
"""

from __future__ import annotations

import subprocess
import tarfile
import uuid

import pytest

from tests.lifecycle.local_target import LocalTarget
from tests.support.runner import COLD_ENV, ROOT, Cpi

#: The last commit before the house was restructured (issue #21): the code a running
#: deployment was made with.
PREVIOUS = "d5d1dac361db4c0272a28770ccf40be526d32e4e"

ENV = {"bosh": {"group": "d-upgrade", "groups": ["d", "upgrade"]}}


@pytest.fixture(scope="module")
def previous_bin_cpi(tmp_path_factory):
    """bin/cpi of PREVIOUS, run by this checkout's venv (the same locked SDKs): its cpi
    package comes first on sys.path, so every module it loads is the old one."""
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"],
                           capture_output=True)
    if found.returncode != 0:
        pytest.skip(f"the clone lacks commit {PREVIOUS[:12]} (a shallow clone?): no previous release to upgrade from")
    checkout = tmp_path_factory.mktemp("previous-release")
    archive = checkout / "previous.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), PREVIOUS, "bin", "cpi"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(checkout, filter="tar")
    archive.unlink()
    where = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-I", "-S", "-c",
                            "import sys; sys.path.insert(0, sys.argv[1]); import cpi.rpc; print(cpi.rpc.__file__)",
                            str(checkout)], capture_output=True, text=True, check=True).stdout.strip()
    assert where == str(checkout / "cpi" / "rpc.py"), "bin/cpi's way of starting would not load the old code"
    return checkout / "bin" / "cpi"


@pytest.fixture
def upgrade_target(target, tmp_path):
    """The local cloud gets a state dir of its own, wholly made by the previous release;
    the other clouds are shared IaaS endpoints, and the test removes what it makes."""
    if target.name != "local":
        yield target
        return
    local = LocalTarget(tmp_path)
    yield local
    local.cleanup()


def test_previous_release_resources_are_managed_by_new_code(upgrade_target, previous_bin_cpi):
    target = upgrade_target
    if not (previous_bin_cpi.parent.parent / "cpi" / "clouds" / target.name).is_dir():
        pytest.skip(f"the previous release has no {target.name} cloud: nothing of it to upgrade")
    old = Cpi(target.config_path, env={**COLD_ENV, "CPI_PYTHON": str(ROOT / ".venv" / "bin" / "python")},
              bin_cpi=previous_bin_cpi)
    new = target.cpi

    stemcell_cid = old("create_stemcell", *target.stemcell_args())
    vm_cid, _ = old("create_vm", f"agent-{uuid.uuid4()}", stemcell_cid, target.vm_cloud_properties(),
                    target.dynamic_network(), [], ENV)
    attached = old("create_disk", 1024, target.disk_cloud_properties(), vm_cid)
    detached = old("create_disk", 1024, target.disk_cloud_properties(), vm_cid)
    old("attach_disk", vm_cid, attached)
    snapshot_cid = old("snapshot_disk", attached, {"deployment": "upgrade"})
    old("set_vm_metadata", vm_cid, {"deployment": "upgrade", "job": "old"})
    made = {"stemcell": stemcell_cid, "vm": vm_cid, "disks": [attached, detached], "snapshot": snapshot_cid}

    # the new code sees everything, in the state the old code left it
    assert new("has_vm", vm_cid) is True, made
    assert new("has_disk", attached) is True and new("has_disk", detached) is True, made
    assert new("get_disks", vm_cid) == [attached]
    assert target.disk_attached_to(attached) == vm_cid

    # and changes it: metadata, a detach, an attach of the disk the old code left detached
    new("set_vm_metadata", vm_cid, {"deployment": "upgrade", "job": "new"})
    new("detach_disk", vm_cid, attached)
    assert new("get_disks", vm_cid) == []
    new("attach_disk", vm_cid, detached)
    assert new("get_disks", vm_cid) == [detached]
    assert target.disk_attached_to(detached) == vm_cid
    new("detach_disk", vm_cid, detached)

    # and removes all of it
    new("delete_snapshot", snapshot_cid)
    new("delete_vm", vm_cid)
    for disk_cid in (attached, detached):
        new("delete_disk", disk_cid)
    new("delete_stemcell", stemcell_cid)
    assert new("has_vm", vm_cid) is False
    assert not target.vm_exists(vm_cid)
    assert new("has_disk", attached) is False and new("has_disk", detached) is False
    if target.name == "local":
        assert target.leftovers() == {}, "the new code left some of what the old code made"
