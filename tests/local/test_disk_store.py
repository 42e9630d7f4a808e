"""The local cloud's persistent disks hold what the VM writes (cpi/clouds/local/mounts.py):
a job's files under BASE/store (/var/vcap/store; bosh-agent's dummy platform records its
mount there) land on the disk attached and outlive the VM, through bin/cpi."""

from __future__ import annotations

import json

import pytest

from tests.lifecycle.local_target import LocalTarget


@pytest.fixture
def local(tmp_path):
    target = LocalTarget(tmp_path)
    target.stemcell_cid = target.cpi("create_stemcell", *target.stemcell_args())
    yield target
    target.cleanup()


def new_vm(local: LocalTarget, index: int) -> str:
    return local.cpi("create_vm", f"agent-{index}", local.stemcell_cid, local.vm_cloud_properties(),
                     local.manual_network(index), [], {})[0]


def write_as_the_job(local: LocalTarget, vm_cid: str, name: str, text: str) -> None:
    """What a job's pre-start does: write into /var/vcap/store (BASE/store)."""
    job = local.vm_dir(vm_cid) / "store" / "db"
    job.mkdir(exist_ok=True)
    (job / name).write_text(text)


def seen_at_boot(local: LocalTarget, vm_cid: str) -> list[str] | None:
    """What the VM's agent saw in BASE/store at its last boot."""
    return json.loads((local.vm_dir(vm_cid) / "boots.jsonl").read_text().splitlines()[-1])["store"]


def test_a_disk_keeps_what_the_vm_wrote_across_reboot_delete_and_a_new_vm(local):
    vm = new_vm(local, 1)
    disk = local.cpi("create_disk", 64, {}, vm)
    local.cpi("attach_disk", vm, disk)
    write_as_the_job(local, vm, "data.txt", "kept\n")
    local.cpi("reboot_vm", vm)
    assert seen_at_boot(local, vm) == ["db"]
    local.cpi("detach_disk", vm, disk)
    assert not (local.vm_dir(vm) / "store" / "db").exists(), "a detached disk is still seen"
    local.cpi("delete_vm", vm)  # a recreate: the VM goes, the disk stays
    again = new_vm(local, 2)
    local.cpi("attach_disk", again, disk)
    assert (local.vm_dir(again) / "store" / "db" / "data.txt").read_text() == "kept\n"
    local.cpi("reboot_vm", again)
    assert seen_at_boot(local, again) == ["db"]
    snapshot = local.cpi("snapshot_disk", disk, {})
    write_as_the_job(local, again, "data.txt", "changed after the snapshot\n")
    copy = local.state_dir / "snapshots" / snapshot / "store" / "db" / "data.txt"
    assert copy.read_text() == "kept\n"
    local.cpi("delete_snapshot", snapshot)
    local.cpi("delete_vm", again)
    local.cpi("delete_disk", disk)
    assert not (local.state_dir / "disks" / disk).exists()


def test_a_migration_sees_two_disks_apart_and_ends_on_the_new_one(local):
    """The agent mounts a second disk at BASE/store_migration_target, copies, then the old
    disk is detached and the new one is the store."""
    vm = new_vm(local, 3)
    old = local.cpi("create_disk", 64, {}, vm)
    local.cpi("attach_disk", vm, old)
    write_as_the_job(local, vm, "old.txt", "on the old disk\n")
    new = local.cpi("create_disk", 128, {}, vm)
    local.cpi("attach_disk", vm, new)
    base = local.vm_dir(vm)
    assert (base / "store" / "db" / "old.txt").exists()
    assert list((base / "store_migration_target").iterdir()) == []  # the new disk, empty and apart
    (base / "store_migration_target" / "db").mkdir()
    (base / "store_migration_target" / "db" / "old.txt").write_text("copied\n")  # the agent's copy
    local.cpi("detach_disk", vm, old)
    assert (base / "store" / "db" / "old.txt").read_text() == "copied\n"  # the new disk is the store now
    assert not (base / "store_migration_target").exists()
    assert (local.state_dir / "disks" / old / "store" / "db" / "old.txt").read_text() == "on the old disk\n"
    local.cpi("delete_vm", vm)
    for disk in (old, new):
        local.cpi("delete_disk", disk)


def test_what_the_vm_kept_before_a_disk_comes_back_when_it_goes(local):
    vm = new_vm(local, 4)
    base = local.vm_dir(vm)
    (base / "store").mkdir()
    (base / "store" / "root-disk.txt").write_text("on the root disk\n")
    disk = local.cpi("create_disk", 64, {}, vm)
    local.cpi("attach_disk", vm, disk)
    assert list((base / "store").iterdir()) == []  # the disk's files, not the root disk's
    local.cpi("detach_disk", vm, disk)
    assert (base / "store" / "root-disk.txt").read_text() == "on the root disk\n"
    local.cpi("delete_vm", vm)
    local.cpi("delete_disk", disk)


def test_a_disk_made_by_an_earlier_release_gets_its_store_on_attach(local):
    vm = new_vm(local, 5)
    disk = local.cpi("create_disk", 64, {}, vm)
    (local.state_dir / "disks" / disk / "store").rmdir()  # as an earlier release made it: disk.img only
    local.cpi("attach_disk", vm, disk)
    write_as_the_job(local, vm, "a.txt", "x")
    assert (local.state_dir / "disks" / disk / "store" / "db" / "a.txt").exists()
    local.cpi("delete_vm", vm)
    assert (local.state_dir / "disks" / disk / "store" / "db" / "a.txt").exists(), "delete_vm took the disk's files"
    local.cpi("delete_disk", disk)
