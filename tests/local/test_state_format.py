"""The state dir's format version (cpi/clouds/local/layout.py), through bin/cpi as the
director runs it: a new state dir gets `format`, one made before there was a version is
used as it is and gets it, a later format or a file that holds none is refused by every
call (never mis-read, never overwritten), many first calls at once agree, a first call
killed while it records the format leaves nothing the next call does not finish, and a
plan records nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.lifecycle.local_target import LocalTarget
from tests.local.test_kills import Run
from tests.support.runner import ROOT

SKELETON = ["disks", "format", "ips", "locks", "pending", "snapshots", "stemcells", "vms"]


@pytest.fixture
def local(tmp_path):
    target = LocalTarget(tmp_path)
    yield target
    target.cleanup()


def format_file(local: LocalTarget) -> Path:
    return local.state_dir / "format"


def root_entries(state_dir: Path) -> list[str]:
    """The state dir's root as an operator lists it, but the audit trail (cpi.audit)."""
    return sorted(e for e in os.listdir(state_dir) if not e.startswith("audit.log"))


def records(state_dir: Path) -> dict[str, bytes]:
    """What the calls wrote and read back: records, agent settings, IP reservations, the
    stemcell's image (not the disk files, which only grow, nor what the VM's process
    writes, nor the audit trail)."""
    found = {}
    for path in sorted(state_dir.rglob("*")):
        rel = path.relative_to(state_dir)
        if path.is_file() and not path.is_symlink() and (
                rel.parts[0] in ("ips", "pending") or path.suffix == ".json" or path.name == "image"):
            found[str(rel)] = path.read_bytes()
    return found


def test_a_fresh_state_dir_gets_format_1(local):
    assert not local.state_dir.exists()
    assert local.cpi("has_vm", "vm-none") is False
    info = os.lstat(format_file(local))
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert format_file(local).read_bytes() == b"1\n"
    assert root_entries(local.state_dir) == SKELETON  # no temp file beside it
    assert os.listdir(local.state_dir / "locks") == []


def test_a_state_dir_from_before_the_version_is_used_as_it_is_and_gets_format_1(local):
    stemcell = local.cpi("create_stemcell", *local.stemcell_args())
    vm_cid, _ = local.cpi("create_vm", "agent-old", stemcell, local.vm_cloud_properties(), local.manual_network(3),
                          [], {})
    disk_cid = local.cpi("create_disk", 16, {}, None)
    assert local.cpi("attach_disk", vm_cid, disk_cid) == {"path": "/dev/sdc"}
    snapshot_cid = local.cpi("snapshot_disk", disk_cid, {})
    format_file(local).unlink()  # what a release before the format file left
    before = records(local.state_dir)

    assert local.cpi("has_vm", vm_cid) is True
    assert format_file(local).read_bytes() == b"1\n"
    assert records(local.state_dir) == before  # format 1 is that layout: nothing else changed

    assert local.cpi("has_disk", disk_cid) is True
    assert local.cpi("get_disks", vm_cid) == [disk_cid]
    assert local.cpi("detach_disk", vm_cid, disk_cid) is None
    assert local.cpi("attach_disk", vm_cid, disk_cid) == {"path": "/dev/sdc"}
    assert local.cpi("detach_disk", vm_cid, disk_cid) is None
    for method, cid in [("delete_vm", vm_cid), ("delete_snapshot", snapshot_cid), ("delete_disk", disk_cid),
                        ("delete_stemcell", stemcell)]:
        assert local.cpi(method, cid) is None
    assert local.cpi("has_vm", vm_cid) is False and local.cpi("has_disk", disk_cid) is False
    assert local.leftovers() == {}


def test_a_later_format_is_refused_by_every_call(local):
    assert local.cpi("has_vm", "vm-none") is False
    format_file(local).write_bytes(b"2\n")
    (local.state_dir / "snapshots").rmdir()  # as a later layout might have: not made again
    message = f"state dir {local.state_dir} has format 2; this CPI knows up to 1: upgrade the CPI"
    for method, arguments in [("has_vm", ["vm-none"]), ("create_disk", [16, {}, None]),
                              ("create_stemcell", local.stemcell_args()), ("delete_vm", ["vm-none"])]:
        error = local.cpi.call(method, *arguments).error
        assert error == {"type": "Bosh::Clouds::CloudError", "message": message, "ok_to_retry": False}, method
    assert format_file(local).read_bytes() == b"2\n"
    assert not (local.state_dir / "snapshots").exists()
    assert local.leftovers() == {}


@pytest.mark.parametrize("content", [b"", b"\n", b"one\n", b"0\n", b"-1\n", b"1.0\n", b"1 1\n", b"\xff\n",
                                     b"1" * 40])
def test_a_format_file_that_holds_no_format_is_refused(local, content):
    assert local.cpi("has_vm", "vm-none") is False
    format_file(local).write_bytes(content)
    error = local.cpi.call("create_disk", 16, {}, None).error
    assert error["type"] == "Bosh::Clouds::CloudError"
    assert error["message"].startswith(f"state dir {local.state_dir}: its format file {format_file(local)} holds ")
    assert error["message"].endswith(", not a format number (this CPI writes 1)")
    assert format_file(local).read_bytes() == content
    assert local.leftovers() == {}


def test_a_link_or_a_directory_in_place_of_the_format_file_is_refused_and_never_followed(local, tmp_path):
    assert local.cpi("has_vm", "vm-none") is False
    format_file(local).unlink()
    elsewhere = tmp_path / "elsewhere"
    for target in (elsewhere, tmp_path / "not-there"):  # a link to a file, and one to nothing yet
        elsewhere.write_bytes(b"1\n")
        format_file(local).symlink_to(target)
        error = local.cpi.call("has_vm", "vm-none").error
        assert error["type"] == "Bosh::Clouds::CloudError"
        assert f"cannot read its format file {format_file(local)}" in error["message"]
        assert format_file(local).is_symlink() and elsewhere.read_bytes() == b"1\n"
        assert not (tmp_path / "not-there").exists()
        format_file(local).unlink()
    format_file(local).mkdir()
    error = local.cpi.call("has_vm", "vm-none").error
    assert f"its format file {format_file(local)} is not a regular file" in error["message"]


def test_first_calls_at_once_agree_on_the_format(local):
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: local.cpi.call("create_disk", 1, {}, None), range(8)))
    disks = [response.result for response in responses]
    assert len(set(disks)) == 8
    assert format_file(local).read_bytes() == b"1\n"
    assert root_entries(local.state_dir) == SKELETON
    assert os.listdir(local.state_dir / "locks") == []
    for disk_cid in disks:
        local.cpi("delete_disk", disk_cid)


def test_a_first_call_killed_while_it_records_the_format_is_finished_by_the_next(tmp_path):
    """has_vm changes nothing but the format: its kill points are the format's own."""
    killed = []
    for n in range(1, 10):
        (tmp_path / f"kill-{n}").mkdir()
        local = LocalTarget(tmp_path / f"kill-{n}")
        try:
            run = Run(local)
            done = run.killed("has_vm", "vm-none", at=n)
            if done is not None:
                assert done["error"] is None and done["result"] is False, done
                break
            killed.append(n)
            assert run("has_vm", "vm-none") is False
            assert format_file(local).read_bytes() == b"1\n"
            assert run("delete_vm", "vm-none") is None  # what an operator runs: stale locks go too
            assert root_entries(local.state_dir) == SKELETON
            assert os.listdir(local.state_dir / "locks") == []
        finally:
            local.cleanup()
    assert killed == [1, 2, 3]  # locked format, write format (the temp file made), wrote format


def test_a_plan_records_no_format(local):
    def plan(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cpi.cli", "plan", *arguments, "--config",
                               str(local.config_path), "--json"], capture_output=True, text=True, cwd=ROOT,
                              timeout=300)

    proc = plan("create_disk", "16", "{}", "null")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not local.state_dir.exists()  # a plan makes nothing, not even the state dir
    assert local.cpi("has_vm", "vm-none") is False
    format_file(local).unlink()
    proc = plan("create_disk", "16", "{}", "null")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not format_file(local).exists()
    format_file(local).write_bytes(b"7\n")
    proc = plan("has_vm", json.dumps("vm-none"))
    assert "has format 7; this CPI knows up to 1: upgrade the CPI" in proc.stdout + proc.stderr
    assert proc.returncode != 0


def test_a_later_layout_adds_one_step(tmp_path, monkeypatch):
    """The migration table, in-process: a format-2 build on a state dir of format 1, and on
    one from before the version, runs each missing step once, in order, recording each."""
    from cpi.clouds.local import layout
    from cpi.clouds.local.store import Store

    steps = []
    monkeypatch.setattr(layout, "FORMAT", 2)
    monkeypatch.setattr(layout, "MIGRATIONS", {0: lambda root: steps.append((0, (root / "format").exists())),
                                               1: lambda root: steps.append((1, (root / "format").read_bytes()))})
    old = tmp_path / "old"
    old.mkdir(mode=0o700)
    (old / "format").write_bytes(b"1\n")
    Store(old)
    assert steps == [(1, b"1\n")] and (old / "format").read_bytes() == b"2\n"
    Store(old)
    assert steps == [(1, b"1\n")]
    steps.clear()
    Store(tmp_path / "unversioned")
    assert steps == [(0, False), (1, b"1\n")] and (tmp_path / "unversioned" / "format").read_bytes() == b"2\n"
