"""The local cloud on a shared machine and at the edges: a private state dir, private
files, sizes the file system cannot hold, deletes of half-made resources, one spelling per
IP, preallocation kept on resize, and a demo that reads only what it shows."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys

import pytest

from tests.lifecycle.local_target import LocalTarget

MIB = 1024 * 1024
SETTING = "cloud.properties.local.state_dir"


@pytest.fixture
def local(tmp_path):
    target = LocalTarget(tmp_path)
    yield target
    target.cleanup()


def _with_state_dir(local: LocalTarget, value) -> None:
    config = json.loads(local.config_path.read_text())
    config["cloud"]["properties"]["local"]["state_dir"] = value
    local.config_path.write_text(json.dumps(config))


@pytest.mark.parametrize("value", ["", "relative/state", "./state"])
def test_state_dir_must_be_absolute(local, value):
    _with_state_dir(local, value)
    err = local.cpi.call("create_disk", 10, {}, None).error
    assert err["type"] == "Bosh::Clouds::CpiError"
    assert SETTING in err["message"] and "absolute" in err["message"]


def test_state_dir_that_is_a_file_names_the_setting(local, tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    _with_state_dir(local, str(tmp_path / "a-file"))
    err = local.cpi.call("has_disk", "disk-x").error
    assert err["type"] == "Bosh::Clouds::CpiError" and SETTING in err["message"]


def test_state_dir_writable_by_others_or_a_symlink_is_refused(local, tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    _with_state_dir(local, str(open_dir))
    err = local.cpi.call("has_disk", "disk-x").error
    assert err["type"] == "Bosh::Clouds::CpiError" and SETTING in err["message"] and "writable" in err["message"]
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    _with_state_dir(local, str(tmp_path / "link"))
    err = local.cpi.call("has_disk", "disk-x").error
    assert err["type"] == "Bosh::Clouds::CpiError" and "symlink" in err["message"]
    assert os.listdir(tmp_path / "elsewhere") == []


def test_everything_is_private_whatever_the_source_mode(local):
    """`create_stemcell /etc/shadow` as root used to give a world-readable copy."""
    old_umask = os.umask(0o022)  # bin/cpi inherits it, as from a careless parent
    try:
        _check_private(local)
    finally:
        os.umask(old_umask)


def _check_private(local):
    local.image.chmod(0o644)
    stemcell = local.cpi("create_stemcell", *local.stemcell_args())
    vm_cid, _ = local.cpi("create_vm", "a", stemcell, local.vm_cloud_properties(), local.manual_network(2), [], {})
    disk = local.cpi("create_disk", 10, {}, None)
    snapshot = local.cpi("snapshot_disk", disk, {})
    root = local.state_dir
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath.startswith(str(root / "vms" / vm_cid / "bosh")):
            continue  # the agent's own
        for d in dirnames:
            if d != "bosh":
                assert stat.S_IMODE(os.lstat(os.path.join(dirpath, d)).st_mode) == 0o700, os.path.join(dirpath, d)
        for f in filenames:
            if f == "boots.jsonl":
                continue  # written by the VM process itself
            assert stat.S_IMODE(os.lstat(os.path.join(dirpath, f)).st_mode) == 0o600, os.path.join(dirpath, f)
    assert (root / "stemcells" / stemcell / "image").stat().st_mode & 0o077 == 0
    local.cpi("delete_snapshot", snapshot)
    local.cpi("delete_vm", vm_cid)


def test_a_record_replaced_by_a_symlink_is_not_followed(local, tmp_path):
    disk = local.cpi("create_disk", 10, {}, None)
    record = local.state_dir / "disks" / disk / "disk.json"
    target = tmp_path / "victim.json"
    target.write_text(record.read_text())
    record.unlink()
    record.symlink_to(target)
    err = local.cpi.call("set_disk_metadata", disk, {"a": "b"}).error
    assert err is not None
    assert json.loads(target.read_text())["metadata"] == {}


@pytest.mark.parametrize("disk_type", ["sparse", "preallocated"])
def test_a_size_the_file_system_cannot_hold_leaves_nothing(local, disk_type):
    """17 TiB is over ext4's per-file limit (EFBIG); the api accepts it (< 2^31 MiB)."""
    response = local.cpi.call("create_disk", 17 * 1024 * 1024, {"type": disk_type}, None)
    err = response.error
    if err is None:  # a file system that holds it (xfs, btrfs): nothing to prove here
        local.cpi("delete_disk", response.result)
        pytest.skip("this file system holds a 17 TiB file")
    assert err["type"] == "Bosh::Clouds::CloudError" and "unexpected" not in err["message"]
    assert os.listdir(local.state_dir / "disks") == [] and os.listdir(local.state_dir / "pending") == []
    assert os.listdir(local.state_dir / "locks") == []


def test_no_space_is_a_cloud_error_and_leaves_nothing(tmp_path, monkeypatch):
    """ENOSPC cannot be provoked safely on a shared disk: fake it in-process."""
    from cpi.clouds.local import fileops
    from cpi.errors import CloudError

    cloud = _in_process(tmp_path)

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileops.os, "posix_fallocate", full)
    with pytest.raises(CloudError, match="No space left"):
        cloud.create_disk(64, {"type": "preallocated"}, None)
    assert os.listdir(cloud.store.root / "disks") == [] and os.listdir(cloud.store.root / "pending") == []


def _in_process(tmp_path):
    from cpi.clouds.local import LocalCloud
    from cpi.clouds.local.props import LocalProperties
    from cpi.config import AgentConfig
    from cpi.models import CallContext

    return LocalCloud(LocalProperties(state_dir=tmp_path / "state"), AgentConfig(), CallContext())


def test_delete_removes_what_has_no_record(local):
    """A create killed before its record leaves a directory; delete_* of its cid removes it
    (it used to answer null and leave it)."""
    local.cpi("has_vm", "vm-x")  # makes the state dir
    for kind, method in [("disks", "delete_disk"), ("snapshots", "delete_snapshot"),
                         ("stemcells", "delete_stemcell"), ("vms", "delete_vm")]:
        prefix = {"disks": "disk", "snapshots": "snap", "stemcells": "sc", "vms": "vm"}[kind]
        cid = f"{prefix}-00000000-0000-0000-0000-000000000001"
        (local.state_dir / kind / cid).mkdir(mode=0o700)
        (local.state_dir / kind / cid / "disk.img").write_bytes(b"x" * 4096)
        if kind == "disks":
            assert local.cpi("has_disk", cid) is False
        assert local.cpi(method, cid) is None
        assert os.listdir(local.state_dir / kind) == []


def test_preallocated_disks_stay_preallocated_when_they_grow(local):
    disk = local.cpi("create_disk", 8, {"type": "preallocated"}, None)
    local.cpi("resize_disk", disk, 24)
    path = local.disk_file(disk)
    assert path.stat().st_size == 24 * MIB and path.stat().st_blocks * 512 >= 24 * MIB
    sparse = local.cpi("create_disk", 8, {}, None)
    local.cpi("update_disk", sparse, 16, {"type": "preallocated"})
    path = local.disk_file(sparse)
    assert path.stat().st_size == 16 * MIB and path.stat().st_blocks * 512 >= 16 * MIB
    same_size = local.cpi("create_disk", 8, {}, None)
    local.cpi("update_disk", same_size, 8, {"type": "preallocated"})
    assert local.disk_file(same_size).stat().st_blocks * 512 >= 8 * MIB


def test_one_ipv6_address_in_two_spellings_is_one_reservation(local):
    stemcell = local.cpi("create_stemcell", *local.stemcell_args())

    def network(ip):
        return {"default": {"type": "manual", "ip": ip, "netmask": "ffff:ffff:ffff:ffff::", "gateway": "fd00::1",
                            "default": ["dns", "gateway"], "cloud_properties": {}}}

    vm_cid, _ = local.cpi("create_vm", "a", stemcell, {}, network("fd00::5"), [], {})
    err = local.cpi.call("create_vm", "b", stemcell, {}, network("FD00:0:0:0:0:0:0:5"), [], {}).error
    assert err["type"] == "Bosh::Clouds::VMCreationFailed" and vm_cid in err["message"]
    assert os.listdir(local.state_dir / "ips") == ["fd00::5"]
    local.cpi("delete_vm", vm_cid)
    assert os.listdir(local.state_dir / "ips") == []


def test_demo_reads_only_what_it_shows(tmp_path):
    """`cpi lifecycle` makes 2 and 4 GiB sparse disk files; it used to read them whole."""
    code = (
        "import resource, subprocess, sys;"
        "p = subprocess.run([sys.executable, '-m', 'cpi.cli', 'lifecycle', '--state-dir', sys.argv[1]],"
        " capture_output=True);"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
        "sys.stderr.write(p.stdout.decode()[-3000:] + p.stderr.decode()[-3000:])"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          timeout=300)
    returncode, max_rss_kib = map(int, proc.stdout.split())
    assert returncode == 0, proc.stderr
    assert max_rss_kib < 150 * 1024, f"a child of the demo used {max_rss_kib // 1024} MiB"


def test_deletes_touch_only_their_own_kind_and_never_step_outside(local, tmp_path):
    disk = local.cpi("create_disk", 10, {}, None)
    stemcell = local.cpi("create_stemcell", *local.stemcell_args())
    outside = local.state_dir / "pending" / ".." / ".." / "outside"
    outside.write_text("keep me")
    for method in ("delete_vm", "delete_snapshot", "delete_stemcell"):
        assert local.cpi(method, disk) is None
    for method in ("delete_vm", "delete_disk", "delete_snapshot"):
        assert local.cpi(method, stemcell) is None
    for method, cid in [("delete_vm", "vm-/../../outside"), ("delete_disk", "disk-/../../../outside"),
                        ("delete_stemcell", "sc-/../../outside"), ("delete_snapshot", "snap-/../../outside")]:
        local.cpi.call(method, cid)
    assert local.cpi("has_disk", disk) is True
    assert (local.state_dir / "stemcells" / stemcell / "image").exists()
    assert (tmp_path / "outside").read_text() == "keep me"


def test_stemcell_tag_values_are_stringified_and_a_failed_create_leaves_nothing(tmp_path, monkeypatch):
    from cpi.clouds.local import fileops
    from cpi.clouds.local.store import StemcellRecord
    from cpi.errors import CloudError

    cloud = _in_process(tmp_path)
    stemcell = cloud.create_stemcell("", {}, {"version": 3, "light": True})
    assert cloud.store.load(StemcellRecord, stemcell).tags == {"version": "3", "light": "True"}
    image = tmp_path / "image"
    image.write_bytes(b"x" * 100)

    real_new_file = fileops.new_file

    class Full:
        """The image file, on a file system that fills up at the first write."""

        def __init__(self, path):
            self.file = real_new_file(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileops, "new_file", Full)
    with pytest.raises(CloudError, match="No space"):
        cloud.create_stemcell(str(image), {}, {})
    assert os.listdir(cloud.store.root / "stemcells") == [stemcell]
    assert os.listdir(cloud.store.root / "pending") == [] and os.listdir(cloud.store.root / "locks") == []


def test_an_empty_reservation_left_by_an_older_cpi_is_reclaimed(tmp_path):
    cloud = _in_process(tmp_path)
    (cloud.store.root / "ips" / "10.0.0.9").write_bytes(b"")
    (cloud.store.root / "vms" / "vm-1").mkdir()
    cloud.store.reserve_ip("10.0.0.9", "vm-1")
    assert cloud.store.ip_owner("10.0.0.9") == "vm-1"
    assert cloud.store.ips_of("vm-1") == ["10.0.0.9"]


def test_a_faults_count_write_killed_before_its_rename_is_swept(tmp_path):
    cloud = _in_process(tmp_path)
    (cloud.store.root / ".faults.json.abc123.tmp").write_text("{}")
    cloud.create_disk(1, {}, None)
    assert sorted(os.listdir(cloud.store.root)) == sorted(["stemcells", "vms", "disks", "snapshots", "ips",
                                                           "pending", "locks", "format"])


def _plant(path, kind: str) -> None:
    """Replace the state file at `path` by a directory, a FIFO or a link to a file elsewhere."""
    path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(path.parent.parent / "format")


def _assert_names_planted(err, path) -> None:
    assert err is not None and err["type"] == "Bosh::Clouds::CloudError", err
    assert f"state entry {path} is" in err["message"] and "unexpected" not in err["message"], err


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_an_entry_planted_where_a_state_file_was_fails_only_the_calls_that_need_it(local, kind):
    """Issue #33, point 6: a directory at a VM's ips/ entry made every delete_vm fail with
    "unexpected IsADirectoryError" (a FIFO hung it). Only the VM that owns the address (and
    the disk whose record was replaced) fails now, naming the path; the others go on."""
    stemcell = local.cpi("create_stemcell", *local.stemcell_args())
    mine, _ = local.cpi("create_vm", "a", stemcell, {}, local.manual_network(2), [], {})
    other, _ = local.cpi("create_vm", "b", stemcell, {}, local.manual_network(3), [], {})
    entry = local.state_dir / "ips" / local.vm_record(mine)["ips"][0]
    _plant(entry, kind)
    disk, kept = local.cpi("create_disk", 10, {}, None), local.cpi("create_disk", 10, {}, None)
    record = local.state_dir / "disks" / disk / "disk.json"
    _plant(record, kind)

    assert local.cpi("has_vm", mine) is True and local.cpi("has_vm", other) is True
    assert local.cpi.call("delete_vm", other, timeout=30).error is None  # a FIFO used to hang it
    assert local.cpi("has_vm", other) is False
    _assert_names_planted(local.cpi.call("delete_vm", mine, timeout=30).error, entry)
    _assert_names_planted(local.cpi.call("set_disk_metadata", disk, {"a": "b"}, timeout=30).error, record)
    local.cpi("set_disk_metadata", kept, {"a": "b"})
    local.cpi("delete_disk", kept)
    assert os.path.lexists(entry) and os.path.lexists(record)  # named, never removed or followed

    for planted in (entry, record):
        if kind == "directory":
            planted.rmdir()
        else:
            planted.unlink()
    local.cpi("delete_vm", mine)
    local.cpi("delete_disk", disk)
