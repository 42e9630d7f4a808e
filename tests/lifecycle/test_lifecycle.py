"""The lifecycle scenarios every cloud must pass, driven through bin/cpi.

From cpi-anchors.md §2 ("Suggested Python suite"): what a director and bosh-cli do to a
CPI, in the order they do it, plus the edge cases their users hit (deleting twice,
has_* after delete, v1 and v2 shapes, many processes at once).
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

ENV = {"bosh": {"group": "d-dep-ig", "groups": ["d", "dep", "ig"], "password": "$6$salt$hash-not-a-real-one"}}


@pytest.fixture(scope="module")
def stemcell(target):
    stemcell_cid = target.cpi("create_stemcell", *target.stemcell_args())
    yield stemcell_cid
    target.cpi("delete_stemcell", stemcell_cid)


def new_vm(target, stemcell, networks=None, index=0):
    agent_id = f"agent-{uuid.uuid4()}"
    vm_cid, _networks = target.cpi(
        "create_vm", agent_id, stemcell, target.vm_cloud_properties(),
        networks or target.manual_network(index), [], ENV,
    )
    return vm_cid


def error_of(response):
    assert response.error is not None, f"expected an error, got result {response.doc['result']!r}"
    return response.error


def test_info_reports_formats_and_api_version(target):
    info = target.cpi("info", api_version=None)
    assert info["api_version"] == 3
    assert info["stemcell_formats"] and all(isinstance(f, str) for f in info["stemcell_formats"])


def test_stemcell_create_delete_twice(target):
    stemcell_cid = target.cpi("create_stemcell", *target.stemcell_args())
    assert isinstance(stemcell_cid, str) and stemcell_cid
    assert target.cpi("delete_stemcell", stemcell_cid) is None
    assert target.cpi("delete_stemcell", stemcell_cid) is None  # missing → success


def test_stemcell_v3_env_tags_argument(target):
    """API v3's third argument tags the image the CPI makes, and a light stemcell's image
    when the account owns it; someone else's stays as it was."""
    tags = {"team": "cpi", "director": "d-lifecycle"}
    plain = target.cpi("create_stemcell", *target.stemcell_args())  # v2: no tags
    try:
        before = target.stemcell_tags(plain)
        assert not set(tags) & set(before)
    finally:
        target.cpi("delete_stemcell", plain)
    stemcell_cid = target.cpi("create_stemcell", *target.stemcell_args(), {"tags": tags}, api_version=3)
    try:
        found = target.stemcell_tags(stemcell_cid)
        if target.tags_stemcells:
            assert {k: found.get(k) for k in tags} == tags
        else:
            assert found == before, "the CPI changed the tags of an image it does not own"
    finally:
        target.cpi("delete_stemcell", stemcell_cid)


def test_full_disk_chain(target, stemcell):
    """create_vm → disk → attach (twice) → snapshot → detach → resize → delete all, twice."""
    vm_cid = new_vm(target, stemcell, index=1)
    assert target.cpi("has_vm", vm_cid) is True
    assert target.vm_exists(vm_cid)
    target.cpi("set_vm_metadata", vm_cid, {"director": "d", "deployment": "dep", "name": "ig/0", "index": "0"})

    disk_cid = target.cpi("create_disk", 2048, target.disk_cloud_properties(), vm_cid)
    assert target.cpi("has_disk", disk_cid) is True
    assert target.disk_size_mib(disk_cid) == 2048

    hint = target.cpi("attach_disk", vm_cid, disk_cid)
    assert hint, "a v2 attach_disk must return a non-empty hint"
    assert isinstance(hint, (str, dict))
    assert target.cpi("attach_disk", vm_cid, disk_cid) == hint  # attaching again: same hint
    assert target.cpi("get_disks", vm_cid) == [disk_cid]
    assert target.disk_attached_to(disk_cid) == vm_cid
    target.cpi("set_disk_metadata", disk_cid, {"director": "d", "deployment": "dep", "instance_index": "0"})

    snapshot_cid = target.cpi(
        "snapshot_disk", disk_cid,
        {"deployment": "dep", "job": "ig", "index": 0, "director_name": "d", "agent_id": "a"},
    )
    assert isinstance(snapshot_cid, str) and snapshot_cid

    target.cpi("detach_disk", vm_cid, disk_cid)
    assert target.cpi("get_disks", vm_cid) == []
    assert target.disk_attached_to(disk_cid) is None
    assert error_of(target.cpi.call("detach_disk", vm_cid, disk_cid))["type"] == "Bosh::Clouds::DiskNotAttached"

    target.cpi("resize_disk", disk_cid, 4096)
    assert target.disk_size_mib(disk_cid) == 4096
    target.cpi("resize_disk", disk_cid, 4096)  # same size: no-op
    assert error_of(target.cpi.call("resize_disk", disk_cid, 1024))["type"] == "Bosh::Clouds::NotSupported"
    assert target.disk_size_mib(disk_cid) == 4096

    for _ in range(2):
        assert target.cpi("delete_snapshot", snapshot_cid) is None
        assert target.cpi("delete_vm", vm_cid) is None
        assert target.cpi("has_vm", vm_cid) is False
        assert target.cpi("delete_disk", disk_cid) is None
        assert target.cpi("has_disk", disk_cid) is False
    assert not target.vm_exists(vm_cid)


def test_delete_vm_releases_attached_disks(target, stemcell):
    vm_cid = new_vm(target, stemcell, index=2)
    disk_cid = target.cpi("create_disk", 1024, target.disk_cloud_properties(), vm_cid)
    target.cpi("attach_disk", vm_cid, disk_cid)
    target.cpi("delete_vm", vm_cid)
    assert target.disk_attached_to(disk_cid) is None
    # the disk outlives its VM and can go to a new one
    vm2 = new_vm(target, stemcell, index=2)  # and the IP is free again
    assert target.cpi("attach_disk", vm2, disk_cid)
    assert target.cpi("get_disks", vm2) == [disk_cid]
    target.cpi("delete_vm", vm2)
    target.cpi("delete_disk", disk_cid)


def test_api_v1_result_shapes(target, stemcell):
    vm_cid = target.cpi(
        "create_vm", "agent-v1", stemcell, target.vm_cloud_properties(), target.manual_network(3), [], {},
        api_version=1, stemcell_api_version=None,
    )
    assert isinstance(vm_cid, str)
    disk_cid = target.cpi("create_disk", 1024, target.disk_cloud_properties(), None, api_version=1)
    assert target.cpi("attach_disk", vm_cid, disk_cid, api_version=1) is None
    assert target.cpi("get_disks", vm_cid, api_version=1) == [disk_cid]
    target.cpi("detach_disk", vm_cid, disk_cid, api_version=1)
    target.cpi("delete_vm", vm_cid, api_version=1)
    target.cpi("delete_disk", disk_cid, api_version=1)


def test_v2_create_vm_returns_cid_and_networks(target, stemcell):
    networks = target.manual_network(4)
    result = target.cpi("create_vm", "agent-v2", stemcell, target.vm_cloud_properties(), networks, [], {})
    assert isinstance(result, list) and len(result) == 2
    vm_cid, networks_out = result
    assert isinstance(vm_cid, str) and isinstance(networks_out, dict)
    assert set(networks_out) == set(networks)
    target.cpi("delete_vm", vm_cid)


def test_dynamic_network(target, stemcell):
    vm_cid = new_vm(target, stemcell, networks=target.dynamic_network())
    assert target.cpi("has_vm", vm_cid) is True
    target.cpi("delete_vm", vm_cid)


def test_reboot_vm(target, stemcell):
    vm_cid = new_vm(target, stemcell, index=5)
    assert target.cpi("reboot_vm", vm_cid) is None
    assert target.cpi("has_vm", vm_cid) is True
    assert target.vm_exists(vm_cid)
    target.cpi("delete_vm", vm_cid)


def test_missing_resources(target):
    vm_cid, disk_cid = "vm-does-not-exist", "disk-does-not-exist"
    missing_vm = [f"{target.name}-missing-vm"]
    assert target.cpi("has_vm", vm_cid) is False
    assert target.cpi("has_disk", disk_cid) is False
    assert target.cpi("delete_vm", vm_cid) is None
    assert target.cpi("delete_disk", disk_cid) is None
    assert target.cpi("delete_snapshot", "snap-does-not-exist") is None
    assert target.cpi("delete_stemcell", "sc-does-not-exist") is None
    for method, args, wire in [
        ("reboot_vm", [vm_cid], "VMNotFound"),
        ("set_vm_metadata", [vm_cid, {"a": "b"}], "VMNotFound"),
        ("get_disks", [vm_cid], "VMNotFound"),
        ("attach_disk", [vm_cid, disk_cid], "VMNotFound"),
        ("resize_disk", [disk_cid, 2048], "DiskNotFound"),
        ("set_disk_metadata", [disk_cid, {"a": "b"}], "DiskNotFound"),
        ("snapshot_disk", [disk_cid, {}], "DiskNotFound"),
    ]:
        assert error_of(target.cpi.call(method, *args))["type"] == f"Bosh::Clouds::{wire}", (method, missing_vm)


def test_attach_missing_disk_and_detach_missing_disk(target, stemcell):
    vm_cid = new_vm(target, stemcell, index=6)
    assert error_of(target.cpi.call("attach_disk", vm_cid, "disk-gone"))["type"] == "Bosh::Clouds::DiskNotFound"
    assert target.cpi("detach_disk", vm_cid, "disk-gone") is None  # missing disk → success
    target.cpi("delete_vm", vm_cid)


def test_create_vm_with_missing_stemcell_leaves_nothing(target):
    before = target.leftovers()
    response = target.cpi.call(
        "create_vm", "agent-x", "sc-missing", target.vm_cloud_properties(), target.manual_network(7), [], {}
    )
    assert error_of(response)["type"] == "Bosh::Clouds::VMCreationFailed"
    assert target.leftovers() == before


def test_calculate_vm_cloud_properties(target):
    props = target.cpi("calculate_vm_cloud_properties", {"cpu": 2, "ram": 4096, "ephemeral_disk_size": 10240})
    offered = target.offered_resources(props)  # what the IaaS says a VM of this answer gets
    assert offered["cpu"] >= 2 and offered["ram"] >= 4096 and offered["ephemeral_disk"] >= 10240, (props, offered)
    err = error_of(target.cpi.call("calculate_vm_cloud_properties", {"cpu": 2}))
    assert "ram" in err["message"] and "ephemeral_disk_size" in err["message"]


def test_parallel_attach_detach(target, stemcell):
    """16 processes attach and detach 16 disks across 8 VMs at once; afterwards every VM's
    get_disks, every disk's attachment and the hints agree."""
    with ThreadPoolExecutor(8) as pool:
        vms = list(pool.map(lambda i: new_vm(target, stemcell, index=20 + i), range(8)))
        disks = list(pool.map(lambda i: target.cpi("create_disk", 1024, target.disk_cloud_properties(), None),
                              range(16)))

    def work(k):
        vm_cid, disk_cid = vms[k % 8], disks[k]
        first = target.cpi("attach_disk", vm_cid, disk_cid)
        target.cpi("detach_disk", vm_cid, disk_cid)
        second = target.cpi("attach_disk", vm_cid, disk_cid)
        if k >= 8:  # the second half ends detached
            target.cpi("detach_disk", vm_cid, disk_cid)
        return first, second

    with ThreadPoolExecutor(16) as pool:
        hints = list(pool.map(work, range(16)))
    assert all(first and second for first, second in hints)

    for i, vm_cid in enumerate(vms):
        assert target.cpi("get_disks", vm_cid) == [disks[i]]
        assert target.disk_attached_to(disks[i]) == vm_cid
        assert target.disk_attached_to(disks[i + 8]) is None

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda vm_cid: target.cpi("delete_vm", vm_cid), vms))
        list(pool.map(lambda disk_cid: target.cpi("delete_disk", disk_cid), disks))
    assert not any(target.cpi("has_disk", d) for d in disks)
