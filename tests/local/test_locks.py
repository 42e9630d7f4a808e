"""Locks that leave no files, never admit two holders, and cannot deadlock delete_vm
against attach/detach."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cpi.locks import collect_stale, lock_path, locked, try_locked
from tests.lifecycle.local_target import LocalTarget
from tests.support.runner import BIN_CPI, DIRECTOR_ENV, start_stopped


@pytest.fixture
def local(tmp_path):
    target = LocalTarget(tmp_path)
    yield target
    target.cleanup()


def test_no_lock_files_after_a_lifecycle_and_calls_on_missing_cids(local):
    cpi = local.cpi
    stemcell = cpi("create_stemcell", *local.stemcell_args())
    vm_cid, _ = cpi("create_vm", "a", stemcell, {}, local.manual_network(1), [], {})
    disk_cid = cpi("create_disk", 10, {}, vm_cid)
    cpi("attach_disk", vm_cid, disk_cid)
    snapshot = cpi("snapshot_disk", disk_cid, {})
    cpi("set_vm_metadata", vm_cid, {"a": "b"})
    cpi("detach_disk", vm_cid, disk_cid)
    for method, cid in [("delete_snapshot", snapshot), ("delete_vm", vm_cid), ("delete_disk", disk_cid),
                        ("delete_stemcell", stemcell)]:
        cpi(method, cid)
    for method, cid in [("delete_vm", "vm-never-was"), ("delete_disk", "disk-never-was"),
                        ("delete_snapshot", "snap-never-was"), ("delete_stemcell", "sc-never-was"),
                        ("delete_vm", "x" * 300), ("has_vm", "vm-nope"), ("has_disk", "disk-nope")]:
        cpi.call(method, cid)
    cpi.call("detach_disk", "vm-nope", "disk-nope")
    cpi.call("resize_disk", "disk-nope", 10)
    assert os.listdir(local.state_dir / "locks") == []


def _contend(lock_dir: str, marker: str, rounds: int, errors) -> None:
    for _ in range(rounds):
        with locked(Path(lock_dir), "shared", timeout=30):
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails if another holds it
            except FileExistsError:
                errors.put("two holders at once")
                continue
            os.close(fd)
            time.sleep(0.0005)
            os.unlink(marker)


def test_two_processes_never_hold_one_lock_at_once_across_unlink(tmp_path):
    """Every release unlinks the file a waiter may already have open: the waiter must notice
    and lock the new file, or two processes would hold 'shared' at once."""
    errors = multiprocessing.get_context("fork").Queue()
    procs = [multiprocessing.get_context("fork").Process(
        target=_contend, args=(str(tmp_path / "locks"), str(tmp_path / "held"), 300, errors)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    assert errors.empty(), errors.get()
    assert os.listdir(tmp_path / "locks") == []


def test_lock_helpers(tmp_path):
    lock_dir = tmp_path / "locks"
    # odd and long names get their own files, never one shared by two names
    assert lock_path(lock_dir, "a/b") != lock_path(lock_dir, "a_b")
    assert len(lock_path(lock_dir, "v" * 1000).name) < 255
    with locked(lock_dir, "a/b", "a_b", "v" * 1000):
        with try_locked(lock_dir, "a/b") as free:
            assert free is False  # flock is per open file: the same process is refused too
        assert len(os.listdir(lock_dir)) == 3
    assert os.listdir(lock_dir) == []
    # a holder killed while holding leaves its file; collect_stale removes it
    (lock_dir / "vm-gone.lock").write_text("")
    collect_stale(lock_dir)
    assert os.listdir(lock_dir) == []


def test_delete_vm_and_detach_on_one_vm_do_not_deadlock(tmp_path):
    """delete_vm used to lock the VM, then its disks; detach locks disk and VM in sorted
    order. Stopped while holding its first locks, delete_vm let detach take the disk and
    wait for the VM, then waited for the disk itself: both sat out the lock timeout."""
    local = LocalTarget(tmp_path, lock_timeout=20)
    try:
        stemcell = local.cpi("create_stemcell", *local.stemcell_args())
        vm_cid, _ = local.cpi("create_vm", "a", stemcell, {}, local.dynamic_network(), [], {})
        disk_cid = local.cpi("create_disk", 10, {}, vm_cid)
        local.cpi("attach_disk", vm_cid, disk_cid)
        started = time.monotonic()
        env = {**DIRECTOR_ENV, "CPI_KILL_AT": "locked*", "CPI_KILL_SIGNAL": "STOP"}
        deleting = start_stopped(local.config_path, local.cpi.request("delete_vm", vm_cid), env, timeout=20)
        detaching = subprocess.Popen([str(BIN_CPI), str(local.config_path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=DIRECTOR_ENV, cwd="/")
        detaching.stdin.write(json.dumps(local.cpi.request("detach_disk", vm_cid, disk_cid)).encode())
        detaching.stdin.close()
        detaching.stdin = None
        time.sleep(0.5)  # detach now waits for the locks delete_vm holds
        os.kill(deleting.pid, signal.SIGCONT)
        out, _ = deleting.communicate(timeout=30)
        assert json.loads(out)["error"] is None
        out, _ = detaching.communicate(timeout=30)
        # delete_vm released the disk; detach then finds no VM, as after any delete
        assert json.loads(out)["error"]["type"] == "Bosh::Clouds::VMNotFound"
        assert time.monotonic() - started < 10
        assert local.disk_attached_to(disk_cid) is None
        local.cpi("delete_disk", disk_cid)
    finally:
        local.cleanup()
