"""A CPI killed at any step leaves nothing that has_*/delete_* (or the next create) cannot
find and remove.

Each test runs one method through bin/cpi with CPI_KILL_AT=1, 2, 3, ... (cpi.failpoints:
the process SIGKILLs itself at the n-th state-changing step) until the call completes.
After each kill it looks at the state dir as an operator would, removes what it finds
with delete_* (or lets a fresh create of the same kind sweep it), and checks that no VM
process, mbus listener, file, IP reservation or lock file is left.

create_vm, attach/detach and delete_vm (not a create, but what an operator retries) are
killed at a chosen set of their points by default (named, to keep the suite short), and
at every one with CPI_TEST_LONG=1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.lifecycle.local_target import LocalTarget
from tests.support.runner import BIN_CPI, DIRECTOR_ENV, check_envelope

LONG = os.environ.get("CPI_TEST_LONG") == "1"
SKELETON = {"stemcells", "vms", "disks", "snapshots", "ips", "pending", "locks"}
KIND_DIRS = {"vm": "vms", "disk": "disks", "sc": "stemcells", "snap": "snapshots"}
DELETE = {"vm": "delete_vm", "disk": "delete_disk", "sc": "delete_stemcell", "snap": "delete_snapshot"}
HAS = {"vm": "has_vm", "disk": "has_disk"}
#: create_vm's windows that matter most: before anything, a bare directory, a record with no
#: IP, an IP reserved, a disk file, the process started but its pid unsaved, all done but the
#: answer not yet sent
CREATE_VM_POINTS = ["pending added", "mkdir vms", "wrote vm.json", "ip reserved", "created ephemeral.img",
                    "vm spawned", "pending removed"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """bin/cpi as the director runs it, optionally killed at a failpoint."""

    def __init__(self, local: LocalTarget):
        self.local = local

    def raw(self, method: str, *arguments, kill_at: str | int | None = None) -> tuple[int, dict | None, str]:
        env = dict(DIRECTOR_ENV)
        if kill_at is not None:
            env["CPI_KILL_AT"] = str(kill_at)
        request = self.local.cpi.request(method, *arguments)
        proc = subprocess.run([str(BIN_CPI), str(self.local.config_path)], input=json.dumps(request).encode(),
                              capture_output=True, env=env, cwd="/", timeout=120)
        doc = None
        if proc.returncode == 0:
            doc = json.loads(proc.stdout)
            check_envelope(doc)
        return proc.returncode, doc, proc.stderr.decode(errors="replace")

    def killed(self, method: str, *arguments, at: str | int) -> dict | None:
        """Run killed at `at`; None if it was, else the response (the call ran to its end)."""
        code, doc, stderr = self.raw(method, *arguments, kill_at=at)
        if doc is None:
            assert code == -9, f"{method} at {at}: exit {code}\n{stderr[-2000:]}"
            assert "failpoint" in stderr
            return None
        return doc

    def __call__(self, method: str, *arguments):
        code, doc, stderr = self.raw(method, *arguments)
        assert doc is not None, f"{method}: exit {code}\n{stderr[-2000:]}"
        assert doc["error"] is None, f"{method}: {doc['error']}\n{doc['log'][-3000:]}"
        return doc["result"]


def points(fixed: list[str] | None = None):
    """Kill points to walk: 1, 2, 3, ... until the call completes, or the named ones."""
    if fixed and not LONG:
        yield from fixed
        return
    n = 1
    while True:
        yield n
        n += 1


def marked_processes(state_dir: Path) -> list[int]:
    """Processes carrying the VM marker of any VM under this state dir."""
    prefix = f"BOSH_CPI_VM={state_dir}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and any(e.startswith(prefix) for e in environ.split(b"\0")):
            found.append(int(entry))
    return found


def listing(state_dir: Path) -> dict[str, list[str]]:
    """What an operator sees: every entry under the state dir's subdirectories."""
    return {sub: sorted(os.listdir(state_dir / sub)) for sub in sorted(SKELETON)}


def leftovers(state_dir: Path, keep: set[str] = frozenset()) -> list[str]:
    """Every file or directory under the state dir but the empty skeleton and `keep`'s."""
    found = []
    for dirpath, dirnames, filenames in os.walk(state_dir):
        rel = Path(dirpath).relative_to(state_dir)
        if len(rel.parts) == 1 and rel.parts[0] in SKELETON:
            dirnames[:] = [d for d in dirnames if d not in keep]
            found += [str(rel / d) for d in dirnames]
            found += [str(rel / f) for f in filenames if f not in keep]
        elif rel.parts:
            found += [str(rel / f) for f in filenames]
        else:
            # the audit trail (cpi.audit) is the operator's record, the format file part of
            # the skeleton: neither is a leftover
            found += [f for f in filenames if not f.startswith("audit.log") and f != "format"]
            found += [d for d in dirnames if d not in SKELETON]
    return sorted(set(found))


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


@pytest.fixture
def local(tmp_path):
    target = LocalTarget(tmp_path)
    target.port = free_port()
    config = json.loads(target.config_path.read_text())
    config["cloud"]["properties"]["agent"]["mbus"] = f"https://mbus:mbus-pw@127.0.0.1:{target.port}"
    target.config_path.write_text(json.dumps(config))
    yield target
    for pid in marked_processes(target.state_dir):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    target.cleanup()


def clean_up_after_kill(run: Run, n: int, kind: str) -> None:
    """As an operator would: has_*/delete_* what the listing shows. Resources whose create
    was pending are left to the next create's sweep on odd kills and deleted by cid on even
    ones, so both ways are proven."""
    state = run.local.state_dir
    seen = listing(state)
    pending = set(seen["pending"])
    for cid in sorted(set(seen[KIND_DIRS[kind]]) | pending):
        if cid in pending and n % 2:
            continue
        prefix = cid.split("-", 1)[0]
        assert run(DELETE[prefix], cid) is None
        if prefix in HAS:
            assert run(HAS[prefix], cid) is False


def assert_clean(local: LocalTarget, keep: set[str] = frozenset()) -> None:
    assert marked_processes(local.state_dir) == []
    assert not port_open(local.port)
    assert leftovers(local.state_dir, keep) == []


def test_create_vm_killed_at_every_point(local):
    run = Run(local)
    stemcell = run("create_stemcell", *local.stemcell_args())
    arguments = ("agent-k", stemcell, local.vm_cloud_properties(), local.manual_network(7), [], {})
    killed = 0
    for n in points(CREATE_VM_POINTS):
        done = run.killed("create_vm", *arguments, at=n)
        if done is not None:  # walked past the last point
            assert done["error"] is None, done["error"]
            run("delete_vm", done["result"][0])
            break
        killed += 1
        clean_up_after_kill(run, killed, "vm")
        # a fresh create on the same mbus port and IP sweeps what nobody knows of, and succeeds
        vm_cid, _ = run("create_vm", *arguments)
        assert port_open(local.port)
        assert run("delete_vm", vm_cid) is None
        assert_clean(local, keep={stemcell})
    assert killed >= (15 if LONG else len(CREATE_VM_POINTS))
    assert_clean(local, keep={stemcell})


def test_reboot_vm_killed_at_every_point(local):
    run = Run(local)
    stemcell = run("create_stemcell", *local.stemcell_args())
    vm_cid, _ = run("create_vm", "agent-r", stemcell, {}, local.manual_network(8), [], {})
    for n in points():
        done = run.killed("reboot_vm", vm_cid, at=n)
        if done is not None:
            assert done["error"] is None, done["error"]
            break
        assert n < 30, "reboot_vm never completed"
        if n % 2:
            # a retried reboot finds the process the killed one started: exactly one
            # supervisor runs, with its one agent
            run("reboot_vm", vm_cid)
            pids = marked_processes(local.state_dir)
            agent = json.loads((local.state_dir / "vms" / vm_cid / "supervisor.json").read_text())["agent_pid"]
            assert sorted(pids) == sorted([local.vm_record(vm_cid)["pid"], agent]), pids
            assert port_open(local.port)
        else:
            assert run("delete_vm", vm_cid) is None
            assert run("has_vm", vm_cid) is False
            assert_clean(local, keep={stemcell})
            vm_cid, _ = run("create_vm", "agent-r", stemcell, {}, local.manual_network(8), [], {})
    assert n >= 3
    run("delete_vm", vm_cid)
    assert_clean(local, keep={stemcell})


@pytest.mark.parametrize("kind", ["disk", "stemcell", "snapshot"])
def test_create_killed_at_every_point(local, kind):
    run = Run(local)
    # the state dir as any earlier call left it: on a fresh one, the first call's first
    # points are the format file's (test_state_format walks those), and the walk would go
    # past the create's own first point without killing it there
    assert run("has_disk", "disk-none") is False
    keep: set[str] = set()
    if kind == "disk":
        method, arguments, key = "create_disk", (64, {"type": "preallocated"}, None), "disk"
    elif kind == "stemcell":
        local.image.write_bytes(os.urandom(3 * 1024 * 1024 + 17))  # more than one copy chunk
        method, arguments, key = "create_stemcell", tuple(local.stemcell_args()), "sc"
    else:
        source = run("create_disk", 32, {}, None)
        with open(local.disk_file(source), "r+b") as f:
            f.seek(5 * 1024 * 1024)
            f.write(b"snapshot me")
        keep.add(source)
        method, arguments, key = "snapshot_disk", (source, {"index": 0}), "snap"
    for n in points():
        done = run.killed(method, *arguments, at=n)
        if done is not None:
            assert done["error"] is None, done["error"]
            run(DELETE[key], done["result"])
            break
        assert n < 30, f"{method} never completed"
        clean_up_after_kill(run, n, key)
        if n % 2:  # what the kill left pending is still there: a fresh create sweeps it
            run(DELETE[key], run(method, *arguments))
        assert_clean(local, keep)
        assert listing(local.state_dir)["locks"] == []
    assert n >= 5
    assert_clean(local, keep)


@pytest.mark.parametrize("method", ["attach_disk", "detach_disk"])
def test_attach_and_detach_killed_at_every_point(local, method):
    run = Run(local)
    stemcell = run("create_stemcell", *local.stemcell_args())
    vm_cid, _ = run("create_vm", "agent-a", stemcell, {}, local.dynamic_network(), [], {})
    disk_cid = run("create_disk", 16, {}, vm_cid)
    fixed = {"attach_disk": ["locked*", "wrote disk.json", "wrote vm.json", "wrote cpi-agent-env.json"],
             "detach_disk": ["wrote vm.json", "wrote cpi-agent-env.json", "wrote disk.json"]}[method]
    killed = 0
    for n in points(fixed):
        if method == "detach_disk":
            run("attach_disk", vm_cid, disk_cid)
        done = run.killed(method, vm_cid, disk_cid, at=n)
        if done is not None:
            assert done["error"] is None, done["error"]
            if method == "attach_disk":
                run("detach_disk", vm_cid, disk_cid)
            break
        killed += 1
        assert killed < 30, f"{method} never completed"
        # the retry the director makes finishes the job, then the state is consistent
        if method == "attach_disk":
            assert run("attach_disk", vm_cid, disk_cid) == {"path": "/dev/sdc"}
            assert local.disk_attached_to(disk_cid) == vm_cid
            assert local.settings(vm_cid)["disks"]["persistent"] == {disk_cid: {"path": "/dev/sdc"}}
        # a detach killed after its last write did detach: its retry gets DiskNotAttached,
        # which the director takes as done
        _, doc, _ = run.raw("detach_disk", vm_cid, disk_cid)
        assert doc["error"] is None or doc["error"]["type"] == "Bosh::Clouds::DiskNotAttached", doc["error"]
        assert local.disk_attached_to(disk_cid) is None
        assert local.vm_record(vm_cid)["disks"] == {}
        assert local.settings(vm_cid)["disks"]["persistent"] == {}
    assert killed >= 3
    assert run("delete_vm", vm_cid) is None
    assert run("delete_disk", disk_cid) is None
    assert run("delete_stemcell", stemcell) is None
    assert_clean(local)
    assert listing(local.state_dir)["locks"] == []


def test_delete_vm_killed_at_every_point(local):
    """A delete killed half way is finished by the next delete (the director retries)."""
    run = Run(local)
    stemcell = run("create_stemcell", *local.stemcell_args())
    disk_cid = run("create_disk", 16, {}, None)
    killed = 0
    for n in points(["wrote disk.json", "ip released", "removed vm.json"]):
        vm_cid, _ = run("create_vm", "agent-d", stemcell, {}, local.manual_network(9), [], {})
        run("attach_disk", vm_cid, disk_cid)
        done = run.killed("delete_vm", vm_cid, at=n)
        if done is not None:
            assert done["error"] is None, done["error"]
            break
        killed += 1
        assert run("delete_vm", vm_cid) is None
        assert run("has_vm", vm_cid) is False
        assert local.disk_attached_to(disk_cid) is None
        assert_clean(local, keep={stemcell, disk_cid})
    assert killed >= 3
    assert_clean(local, keep={stemcell, disk_cid})
