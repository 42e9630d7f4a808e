"""The warm helper (cpi.warm): a call it makes is the call a cold bin/cpi makes (the same
stdout, stderr and exit status), and a helper that is missing, stale, killed, unsafe or
slow only means cold calls, never an error.

Each test drives bin/cpi as the director does (environment wiped to PATH, plus the setting
that turns the helper on). The helper is per user and install, so these tests share it with
any other call of this checkout made with the helper on: stopping or killing it mid-way only
sends those calls down the cold path, which is what the helper promises.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.lifecycle.local_target import LocalTarget
from tests.support.normalize import normalized
from tests.support.runner import (BIN_CPI, DIRECTOR_ENV, ROOT, WARM_ENV, check_envelope, helper_action,
                                 process_state, start_helper, start_stopped)

PYTHON = ROOT / ".venv" / "bin" / "python"
COLD = {**DIRECTOR_ENV, "CPI_HELPER_IDLE_TIMEOUT": "0"}
WARM = WARM_ENV


def helper_pid() -> int | None:
    code = ("import sys, _socket; sys.path.insert(0, sys.argv[1]); from cpi import warm\n"
            "s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM); s.connect(warm.socket_path())\n"
            "print(int.from_bytes(s.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)[:4], sys.byteorder))")
    out = subprocess.run([str(PYTHON), "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True,
                         env=COLD, cwd="/", timeout=30).stdout.strip()
    return int(out) if out else None


def run(config: Path | str, request: dict, env: dict, cwd: str | Path = "/", **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN_CPI), str(config)], input=json.dumps(request).encode(), capture_output=True,
                          env=env, cwd=cwd, timeout=120, **kw)


def done_in(proc: subprocess.CompletedProcess) -> float:
    return float(re.findall(rb"done in (\d+\.\d+)s", proc.stderr)[-1])


@pytest.fixture
def warm_helper(tmp_path):
    local = LocalTarget(tmp_path)
    start_helper(local.config_path)
    yield local
    local.cleanup()


def lifecycle(local: LocalTarget, env: dict) -> list[tuple[int, bytes, bytes]]:
    """One VM's life through bin/cpi: each call's exit status, stdout and stderr."""
    seen = []

    def call(method, *arguments, **kw):
        proc = run(local.config_path, local.cpi.request(method, *arguments, **kw), env)
        seen.append((proc.returncode, normalized(proc.stdout), normalized(proc.stderr)))
        doc = json.loads(proc.stdout)
        check_envelope(doc)
        return doc["result"]

    stemcell = call("create_stemcell", *local.stemcell_args())
    vm_cid, _ = call("create_vm", "agent-w", stemcell, local.vm_cloud_properties(), local.dynamic_network(), [], {})
    disk_cid = call("create_disk", 1024, {}, vm_cid)
    for method, arguments in [("info", []), ("has_vm", [vm_cid]), ("has_disk", [disk_cid]),
                              ("attach_disk", [vm_cid, disk_cid]), ("get_disks", [vm_cid]),
                              ("set_vm_metadata", [vm_cid, {"director": "d", "index": 0}]),
                              ("set_disk_metadata", [disk_cid, {"director": "d"}]), ("snapshot_disk", [disk_cid, {}]),
                              ("reboot_vm", [vm_cid]), ("detach_disk", [vm_cid, disk_cid]),
                              ("detach_disk", [vm_cid, disk_cid]), ("resize_disk", [disk_cid, 512]),
                              ("has_vm", ["vm-gone"]), ("nope", []), ("create_disk", [-1, {}, None]),
                              ("delete_disk", [disk_cid]), ("delete_vm", [vm_cid]), ("delete_stemcell", [stemcell])]:
        call(method, *arguments, api_version=1 if method == "attach_disk" else 2)
    call("attach_disk", "vm-gone", "disk-gone", api_version=2)
    return seen


def test_a_warm_call_is_the_cold_call(tmp_path):
    """A whole lifecycle, errors included, cold and warm: byte for byte the same stdout,
    stderr and exit status (once times, durations, random cids and the state dir's name
    are set aside), and the warm calls were made by the helper."""
    (tmp_path / "cold").mkdir()
    (tmp_path / "warm").mkdir()
    cold, warm = LocalTarget(tmp_path / "cold"), LocalTarget(tmp_path / "warm")
    try:
        start_helper(warm.config_path)
        cold_calls, warm_calls = lifecycle(cold, COLD), lifecycle(warm, WARM)
        assert len(cold_calls) == len(warm_calls)
        for number, (c, w) in enumerate(zip(cold_calls, warm_calls)):
            assert c == w, f"call {number}:\ncold {c}\nwarm {w}"
    finally:
        cold.cleanup()
        warm.cleanup()


def test_a_warm_call_is_made_by_the_helper_and_sees_the_clients_environment(warm_helper, tmp_path):
    local = warm_helper
    proc = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
    assert json.loads(proc.stdout)["result"] is False
    assert done_in(proc) < 0.05, "a warm has_vm imports nothing"
    quiet = run(local.config_path, local.cpi.request("has_vm", "vm-1"), {**WARM, "CPI_LOG_LEVEL": "warning"})
    assert json.loads(quiet.stdout)["log"] == "" and quiet.stderr == b""
    # a relative config path is found from the client's working directory
    relative = run(os.path.relpath(local.config_path, tmp_path), local.cpi.request("has_vm", "vm-1"), WARM,
                   cwd=tmp_path)
    assert json.loads(relative.stdout)["error"] is None


def test_the_worker_takes_on_the_clients_descriptors_directory_environment_and_umask(warm_helper, tmp_path):
    """Held at a failpoint, the worker that makes the call has the client's stdin, stdout
    and stderr (the same pipes), working directory, environment and umask."""
    local = warm_helper
    env = {**WARM, "CPI_KILL_AT": "image copied", "CPI_KILL_SIGNAL": "STOP"}
    client = _held(local, env, cwd=tmp_path, umask=0o027)
    try:
        worker = _worker_of(helper_pid())
        status = Path(f"/proc/{worker}/status").read_text()
        assert re.search(r"^Umask:\s+0027$", status, re.MULTILINE)
        assert os.readlink(f"/proc/{worker}/cwd") == str(tmp_path)
        # the environment: the failpoint that holds the worker is the client's CPI_KILL_AT
        # (/proc/<pid>/environ shows only the helper's own, from its start)
        mine = {fd: os.readlink(f"/proc/{client.pid}/fd/{fd}") for fd in (0, 1, 2)}
        theirs = {int(fd): os.readlink(f"/proc/{worker}/fd/{fd}") for fd in os.listdir(f"/proc/{worker}/fd")}
        assert theirs[0] == mine[0] and theirs[2] == mine[2]
        assert theirs[1] == mine[2] and mine[1] in theirs.values()  # fd 1 kept for the response, as cold
    finally:
        os.kill(client.pid, signal.SIGCONT)
        out, err = client.communicate(timeout=60)
    assert client.returncode == 0 and json.loads(out)["result"].startswith("sc-"), err


def _held(local: LocalTarget, env: dict, cwd: Path | str = "/", umask: int | None = None) -> subprocess.Popen:
    """A create_stemcell whose worker stops (SIGSTOP) at a failpoint; its client stops too."""
    return start_stopped(local.config_path, local.cpi.request("create_stemcell", str(local.image), {}), env, cwd=cwd,
                         preexec_fn=None if umask is None else (lambda: os.umask(umask)))


def _worker_of(helper: int | None) -> int:
    assert helper is not None
    children = Path(f"/proc/{helper}/task/{helper}/children").read_text().split()
    stopped = [int(pid) for pid in children if process_state(int(pid)) == "T"]
    assert len(stopped) == 1, children
    return stopped[0]


def test_thirty_two_parallel_warm_calls(warm_helper):
    local = warm_helper
    stemcell = local.cpi("create_stemcell", *local.stemcell_args())
    vm_cid, _ = local.cpi("create_vm", "agent-p", stemcell, {}, local.dynamic_network(), [], {})

    def create_and_delete(_):
        created = run(local.config_path, local.cpi.request("create_disk", 16, {}, vm_cid), WARM)
        disk_cid = json.loads(created.stdout)["result"]
        has = run(local.config_path, local.cpi.request("has_disk", disk_cid), WARM)
        deleted = run(local.config_path, local.cpi.request("delete_disk", disk_cid), WARM)
        return created.returncode, disk_cid, json.loads(has.stdout)["result"], json.loads(deleted.stdout)

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(create_and_delete, range(32)))
    assert len({disk for _, disk, _, _ in results}) == 32
    for code, disk, has, deleted in results:
        assert code == 0 and disk.startswith("disk-") and has is True and deleted["error"] is None
    local.cpi("delete_vm", vm_cid)


def test_a_helper_killed_mid_call_still_answers_its_calls_and_the_next_is_made_cold(warm_helper):
    """The worker holds the client's descriptors: killing the helper (not the worker) leaves
    the call in flight to finish and answer; the next call finds no helper and is made cold
    (and starts a new one)."""
    local = warm_helper
    client = _held(local, {**WARM, "CPI_KILL_AT": "image copied", "CPI_KILL_SIGNAL": "STOP"})
    pid = helper_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    os.kill(client.pid, signal.SIGCONT)  # continues the client, which continues its worker
    out, err = client.communicate(timeout=60)
    assert client.returncode == 0, err
    assert json.loads(out)["result"].startswith("sc-")
    after = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
    assert json.loads(after.stdout)["result"] is False
    assert done_in(after) > 0.05, "made cold: the helper is gone"


def test_a_slow_helper_means_a_cold_call_and_never_a_second_one(warm_helper):
    """A helper that does not start the call in time (here: stopped) leaves it to the
    client; when it wakes up, the worker it forks finds the client gone and does nothing."""
    local = warm_helper
    pid = helper_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        proc = run(local.config_path, local.cpi.request("create_disk", 16, {}, None), WARM)
        assert json.loads(proc.stdout)["result"].startswith("disk-")
        assert time.monotonic() - started >= 2  # waited START_TIMEOUT, then made it cold
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(1)  # the late worker: it must not make a second disk
    assert len(list((local.state_dir / "disks").iterdir())) == 1


def test_a_worker_killed_kills_its_client_with_the_same_signal(warm_helper):
    local = warm_helper
    proc = run(local.config_path, local.cpi.request("create_disk", 16, {}, None), {**WARM, "CPI_KILL_AT": "1"})
    assert proc.returncode == -signal.SIGKILL and proc.stdout == b""


def test_a_helper_of_changed_code_is_not_used(warm_helper):
    """A file of the CPI's code that changes after the helper loaded it (an install, an
    edit) makes the helper refuse the call (made cold) and exit."""
    local = warm_helper
    source = ROOT / "cpi" / "errors.py"
    before = source.stat()
    try:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        proc = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
        assert json.loads(proc.stdout)["result"] is False and done_in(proc) > 0.05
        deadline = time.monotonic() + 10
        while helper_action("running") == "True":
            assert time.monotonic() < deadline, "the stale helper did not exit"
            time.sleep(0.1)
    finally:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_an_unsafe_directory_means_no_helper(warm_helper):
    """A socket directory that others could enter is not used: cold calls, no error."""
    local = warm_helper
    directory = Path(f"/tmp/bosh-cpi-helper-{os.getuid()}")
    directory.chmod(0o755)
    try:
        proc = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
        assert json.loads(proc.stdout)["result"] is False and done_in(proc) > 0.05
    finally:
        directory.chmod(0o700)


def test_the_helper_exits_when_idle(tmp_path):
    local = LocalTarget(tmp_path)
    try:
        helper_action("stop")
        quick = {**WARM, "CPI_HELPER_IDLE_TIMEOUT": "1"}
        start_helper(local.config_path, env=quick)
        time.sleep(3)  # past the idle time (the helper looks every min(5 s, idle))
        assert helper_action("running") == "False"
    finally:
        local.cleanup()


def test_the_helper_preloads_every_clouds_sdk_without_connecting_or_starting_anything(tmp_path):
    """What the helper does before it forks (cpi.rpc.warm_up): the SDKs a warm AWS or
    OpenStack call would otherwise import (most of such a call's time, bench/calls.py), and
    a plugin cloud named by the call that started it; but no thread, socket or file is
    left open for the workers to share, and no credential is looked up (HOME points where
    an AWS config would be read)."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "config").write_text("[default]\ncredential_process = /bin/false\n")
    code = ("import sys, os, json, threading; sys.path.insert(0, sys.argv[1]); from cpi import rpc\n"
            "rpc.warm_up(['aws'])\n"
            "paths = [f'/proc/self/fd/{fd}' for fd in os.listdir('/proc/self/fd') if int(fd) > 2]\n"
            "fds = sorted(os.readlink(p) for p in paths if os.path.lexists(p))  # the listing's own fd is gone\n"
            "print(json.dumps({'threads': threading.active_count(), 'fds': fds,\n"
            "                  'modules': [m for m in ('botocore.client', 'openstack.connection',\n"
            "                              'keystoneauth1.session', 'requests', 'redis') if m in sys.modules]}))")
    out = subprocess.run([str(PYTHON), "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True,
                         env={**COLD, "HOME": str(home)}, cwd="/", timeout=60)
    assert out.returncode == 0 and "preloading" not in out.stderr, out.stderr
    state = json.loads(out.stdout.strip().splitlines()[-1])
    assert state["modules"] == ["botocore.client", "openstack.connection", "keystoneauth1.session", "requests", "redis"]
    assert state["threads"] == 1
    assert [fd for fd in state["fds"] if not fd.startswith("/proc/")] == [], state["fds"]
