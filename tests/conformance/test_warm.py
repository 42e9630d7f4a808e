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
from tests.support.runner import (
    BIN_CPI,
    DIRECTOR_ENV,
    ROOT,
    WARM_ENV,
    check_envelope,
    helper_action,
    helper_pid,
    process_state,
    start_helper,
    start_stopped,
    stop_helper,
)

PYTHON = ROOT / ".venv" / "bin" / "python"
COLD = {**DIRECTOR_ENV, "CPI_HELPER_IDLE_TIMEOUT": "0"}
WARM = WARM_ENV


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
        for number, (c, w) in enumerate(zip(cold_calls, warm_calls, strict=False)):
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
    directory = Path(DIRECTOR_ENV["HOME"]) / ".cache/bosh-cpi/helper"
    directory.chmod(0o755)
    try:
        proc = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
        assert json.loads(proc.stdout)["result"] is False and done_in(proc) > 0.05
        assert b"the warm helper is not used: " + str(directory).encode() + b" is not a private directory" \
            in proc.stderr
    finally:
        directory.chmod(0o700)


@pytest.mark.skipif(os.geteuid() != 0, reason="plants a directory as another user: needs root")
def test_a_neighbour_cannot_switch_the_helper_off(warm_helper):
    """The socket directory was a predictable /tmp name: any local user who made it first
    turned the helper off for root, silently. It is in the CPI user's home now."""
    import pwd

    local = warm_helper
    nobody = pwd.getpwnam("nobody")
    planted = Path(f"/tmp/bosh-cpi-helper-{os.getuid()}")
    made = not planted.exists()
    if made:
        planted.mkdir(mode=0o777)
        os.chown(planted, nobody.pw_uid, nobody.pw_gid)
    try:
        proc = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
        assert json.loads(proc.stdout)["result"] is False
        assert done_in(proc) < done_in(run(local.config_path, local.cpi.request("has_vm", "vm-1"), COLD)), \
            "the call was made cold"
    finally:
        if made:
            planted.rmdir()


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
    """What the helper does before it forks (cpi.warm.boot.warm_up): the SDKs a warm AWS or
    OpenStack call would otherwise import (most of such a call's time, bench/calls.py), a
    plugin cloud named by the call that started it, and every model's validator; but no thread, socket or file is
    left open for the workers to share, and no credential is looked up (HOME points where
    an AWS config would be read)."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "config").write_text("[default]\ncredential_process = /bin/false\n")
    code = ("import sys, os, json, threading; sys.path.insert(0, sys.argv[1]); from cpi.warm import boot\n"
            "boot.warm_up(['aws'])\n"
            "paths = [f'/proc/self/fd/{fd}' for fd in os.listdir('/proc/self/fd') if int(fd) > 2]\n"
            "fds = sorted(os.readlink(p) for p in paths if os.path.lexists(p))  # the listing's own fd is gone\n"
            "from pydantic import BaseModel\n"
            "deferred = [f'{n}.{v.__qualname__}' for n, m in list(sys.modules.items()) if n.startswith('cpi.')\n"
            "            for v in vars(m).values() if isinstance(v, type) and issubclass(v, BaseModel)\n"
            "            and v.__module__ == n and not v.__pydantic_complete__]\n"
            "print(json.dumps({'threads': threading.active_count(), 'fds': fds, 'deferred': deferred,\n"
            "                  'modules': [m for m in ('botocore.client', 'openstack.connection',\n"
            "                              'keystoneauth1.session', 'requests', 'redis') if m in sys.modules]}))")
    out = subprocess.run([str(PYTHON), "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True,
                         env={**COLD, "HOME": str(home)}, cwd="/", timeout=60)
    assert out.returncode == 0 and "preloading" not in out.stderr, out.stderr
    state = json.loads(out.stdout.strip().splitlines()[-1])
    assert state["modules"] == ["botocore.client", "openstack.connection", "keystoneauth1.session", "requests", "redis"]
    assert state["threads"] == 1
    assert [fd for fd in state["fds"] if not fd.startswith("/proc/")] == [], state["fds"]
    # the validators the models defer for a cold call are built once here, not in each worker
    assert state["deferred"] == [], state["deferred"]


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_client_ends_its_call_at_once(tmp_path, signum):
    """A director that kills bin/cpi kills the call, as cold: the worker must not finish a
    create_disk in the background (here a 20 s one) holding its locks."""
    local = LocalTarget(tmp_path, faults=[{"method": "create_disk", "error": None, "delay": 20}])
    try:
        start_helper(local.config_path)
        helper = helper_pid()
        # the worker of a ping that start_helper sent may not be gone (or reaped) yet: this
        # call's worker is the child that was not there before it
        before = set(_children(helper))
        client = subprocess.Popen([str(BIN_CPI), str(local.config_path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=WARM, cwd="/")
        client.stdin.write(json.dumps(local.cpi.request("create_disk", 16, {}, None)).encode())
        client.stdin.close()
        client.stdin = None
        _until(lambda: set(_children(helper)) - before, 10, "no worker took the call")
        (worker,) = set(_children(helper)) - before
        time.sleep(0.5)  # in the fault's delay
        client.send_signal(signum)
        client.communicate(timeout=10)
        _until(lambda: process_state(worker) in (None, "Z"), 3, "the worker outlived its client")
        assert not (local.state_dir / "disks").exists() or list((local.state_dir / "disks").iterdir()) == []
        started = time.monotonic()
        assert local.cpi("has_disk", "disk-none") is False and time.monotonic() - started < 10  # no lock held
    finally:
        local.cleanup()


def test_a_worker_continued_or_killed_while_stopped_never_leaves_its_client_stopped(warm_helper):
    """The helper mirrors its worker's stops and continuations on the client, in order: a
    worker stopped then continued directly (not through its client), or killed while
    stopped, left the client stopped for ever (the director hung)."""
    local = warm_helper
    client = _held(local, {**WARM, "CPI_KILL_AT": "image copied", "CPI_KILL_SIGNAL": "STOP"})
    worker = _worker_of(helper_pid())
    os.kill(worker, signal.SIGCONT)
    out, err = client.communicate(timeout=20)
    assert client.returncode == 0 and json.loads(out)["result"].startswith("sc-"), err

    client = _held(local, {**WARM, "CPI_KILL_AT": "image copied", "CPI_KILL_SIGNAL": "STOP"})
    os.kill(_worker_of(helper_pid()), signal.SIGKILL)
    client.communicate(timeout=20)
    assert client.returncode == -signal.SIGKILL


def test_a_client_never_waits_on_a_connection_another_call_holds(warm_helper):
    """Workers inherited the other in-flight clients' connections: with the helper gone, a
    client whose worker died waited for the end of a connection another worker kept open."""
    local = warm_helper
    held = {**WARM, "CPI_KILL_AT": "image copied", "CPI_KILL_SIGNAL": "STOP"}
    first = _held(local, held)
    first_worker = _worker_of(helper_pid())
    second = _held(local, held)  # forked while the first call's connection is open in the helper
    helper = helper_pid()
    second_worker = next(p for p in _children(helper) if p != first_worker)
    try:
        os.kill(helper, signal.SIGKILL)
        os.kill(first_worker, signal.SIGKILL)
        os.kill(first.pid, signal.SIGCONT)
        first.communicate(timeout=10)  # ends: nobody else holds its connection
        assert first.returncode != 0
    finally:
        os.kill(second_worker, signal.SIGKILL)
        os.kill(second.pid, signal.SIGCONT)
        second.communicate(timeout=10)


def test_the_helper_keeps_nothing_of_the_call_that_started_it(tmp_path):
    """Its starter's descriptors above 2 (a caller waiting for end-of-file on fd 3, an flock
    held around bin/cpi) and its working directory."""
    local = LocalTarget(tmp_path)
    try:
        stop_helper()
        read_end, write_end = os.pipe()
        subprocess.run([str(BIN_CPI), str(local.config_path)], input=b'{"method": "has_vm", "arguments": ["vm-1"]}',
                       capture_output=True, env=WARM, cwd=tmp_path, pass_fds=(write_end,), timeout=60)
        os.close(write_end)
        _until(lambda: helper_pid() is not None, 30, "no helper started")
        os.set_blocking(read_end, False)
        _until(lambda: _eof(read_end), 5, "the helper holds its starter's pipe")
        os.close(read_end)
        assert os.readlink(f"/proc/{helper_pid()}/cwd") == "/"
    finally:
        local.cleanup()


def _eof(fd: int) -> bool:
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:
        return False


def test_a_helper_serves_what_is_on_disk_now(warm_helper):
    """A dependency or plugin installed into the venv (an entry added to site-packages), or a
    file of the CPI changed while the helper was loading it, is picked up by the next call."""
    import sysconfig

    local = warm_helper
    site = Path(sysconfig.get_paths(vars={"base": str(ROOT / ".venv"), "platbase": str(ROOT / ".venv")})["purelib"])
    before = site.stat()
    try:
        os.utime(site, ns=(before.st_atime_ns, time.time_ns()))  # what pip install does to it
        proc = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
        assert json.loads(proc.stdout)["result"] is False and done_in(proc) > 0.05, "served by the stale helper"
    finally:
        os.utime(site, ns=(before.st_atime_ns, before.st_mtime_ns))
    _until(lambda: helper_action("running") != "True", 10, "the stale helper did not exit")
    source = ROOT / "cpi" / "errors.py"
    was = source.stat()
    try:
        # changed after the next helper starts reading it: its time is later than the start
        os.utime(source, ns=(was.st_atime_ns, time.time_ns() + 5_000_000_000))
        stop_helper()
        run(local.config_path, local.cpi.request("has_vm", "v"), WARM)  # cold: starts a helper, which loads it
        time.sleep(3)
        assert helper_action("running") != "True", "a helper serves code that changed while it loaded it"
    finally:
        os.utime(source, ns=(was.st_atime_ns, was.st_mtime_ns))
    start_helper(local.config_path, timeout=30)  # the same start, the file as it was: a helper serves


def test_a_helper_exits_once_its_install_is_gone(tmp_path):
    """After `bosh delete-env` a helper ran on with its executable deleted until its idle
    time ran out: a copy of the checkout, its helper started, then the copy removed."""
    import shutil

    copy = tmp_path / "install"
    shutil.copytree(ROOT / "cpi", copy / "cpi", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "bin", copy / "bin")
    (copy / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "cloud").mkdir()
    local = LocalTarget(tmp_path / "cloud")
    try:
        start = {**WARM, "CPI_HELPER_IDLE_TIMEOUT": "300"}
        for _ in range(100):
            subprocess.run([str(copy / "bin/cpi"), str(local.config_path)],
                           input=b'{"method": "ping", "arguments": []}',
                           capture_output=True, env=start, cwd="/", timeout=60)
            helpers = [p for p in _pids_with(str(copy)) if "from cpi.warm.boot import helper" in _cmdline(p)]
            if helpers:
                break
            time.sleep(0.3)
        assert helpers, "the copy's helper did not start"
        shutil.rmtree(copy / "cpi")
        _until(lambda: all(process_state(p) in (None, "Z") for p in helpers), 10, "the helper outlived its install")
    finally:
        local.cleanup()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _pids_with(text: str) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and text in _cmdline(int(p))]


def _socket_path() -> str:
    code = "import sys; sys.path.insert(0, sys.argv[1]); from cpi.warm import where; print(where.socket_path())"
    return subprocess.run([str(PYTHON), "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True,
                          env=COLD, cwd="/", timeout=30, check=True).stdout.strip()


def test_connections_that_send_nothing_park_no_worker(warm_helper):
    """64 connections that send nothing got a worker each, kept for the helper's idle time:
    each worker now gives up after REQUEST_TIMEOUT (5 s) and a real call is still warm."""
    import socket

    local, helper = warm_helper, helper_pid()
    assert helper is not None
    idle, path = [], _socket_path()
    try:
        for _ in range(64):
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(path)
            idle.append(connection)
        _until(lambda: len(_children(helper)) >= 32, 10, "the helper forked no workers for the connections")
        started = time.monotonic()
        _until(lambda: not _children(helper), 12, f"idle workers are still parked: {len(_children(helper))}")
        assert time.monotonic() - started < 8
    finally:
        for connection in idle:
            connection.close()
    proc = run(local.config_path, local.cpi.request("has_vm", "vm-1"), WARM)
    assert json.loads(proc.stdout)["result"] is False and done_in(proc) < 0.05, "not answered warm"
    assert helper_pid() == helper


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_worker_killed_after_its_helper_kills_its_client_alike(warm_helper, signum):
    """The helper killed first cannot tell the client how its worker ended: the client
    exited 1 with nothing on stdout, where a cold process would have died of the signal."""
    local = warm_helper
    client = _held(local, {**WARM, "CPI_KILL_AT": "image copied", "CPI_KILL_SIGNAL": "STOP"})
    helper = helper_pid()
    worker = _worker_of(helper)
    assert helper is not None
    os.kill(helper, signal.SIGKILL)
    os.kill(worker, signum)
    os.kill(worker, signal.SIGCONT)
    os.kill(client.pid, signal.SIGCONT)
    out, err = client.communicate(timeout=60)
    assert client.returncode == -signum and out == b"", err


def test_a_dependency_rewritten_in_place_is_not_served_from_the_old_code(tmp_path):
    """A file of a dependency rewritten in place (same name, size and mtime: `touch -r`)
    in site-packages left the helper serving the old code while a cold call ran the new.
    A copy of the checkout whose venv puts a scratch site-packages, holding its own copy of
    annotated_types (which pydantic imports, so the helper loads it), before the real one;
    the rewrite makes importing it say so on stderr."""
    import shutil
    import sysconfig

    copy = tmp_path / "install"
    shutil.copytree(ROOT / "cpi", copy / "cpi", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "bin", copy / "bin")
    subprocess.run([str(PYTHON), "-m", "venv", "--without-pip", str(copy / ".venv")], check=True, timeout=60)
    real = Path(sysconfig.get_paths(vars={"base": str(ROOT / ".venv"), "platbase": str(ROOT / ".venv")})["purelib"])
    site = Path(sysconfig.get_paths(vars={"base": str(copy / ".venv"), "platbase": str(copy / ".venv")})["purelib"])
    (site / "real.pth").write_text(f"{real}\n")
    shutil.copytree(real / "annotated_types", site / "annotated_types", ignore=shutil.ignore_patterns("__pycache__"))
    module = site / "annotated_types" / "__init__.py"
    new = b'import os; os.write(2, b"annotated_types rewritten\\n")\n'
    module.write_bytes(module.read_bytes() + b"#" * (len(new) - 1) + b"\n")
    (tmp_path / "cloud").mkdir()
    local = LocalTarget(tmp_path / "cloud")

    def call() -> subprocess.CompletedProcess:
        return subprocess.run([str(copy / "bin/cpi"), str(local.config_path)],
                              input=json.dumps(local.cpi.request("has_vm", "vm-1")).encode(),
                              capture_output=True, env=WARM, cwd="/", timeout=120)

    stop = [str(copy / ".venv/bin/python"), "-I", "-S", "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); from cpi.warm import client; print(client.running())",
            str(copy)]
    try:
        _until(lambda: call() and subprocess.run(stop, capture_output=True, text=True, env=WARM,
                                                   timeout=30).stdout.strip() == "True", 60, "no helper started")
        warm = call()
        assert done_in(warm) < 0.05 and b"rewritten" not in warm.stderr, "the copy's calls are not warm"
        before = module.stat()
        data = module.read_bytes()
        with module.open("r+b") as rewrite:  # in place: the same inode, size and (below) mtime
            rewrite.write(data[:-len(new)] + new)
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
        shutil.rmtree(module.parent / "__pycache__", ignore_errors=True)  # else a cold call runs the old .pyc too
        after = module.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
        proc = call()
        assert json.loads(proc.stdout)["result"] is False
        assert b"annotated_types rewritten" in proc.stderr, "served by the old code"
    finally:
        stop[-2] = stop[-2].replace("print(client.running())", "client.stop()")
        subprocess.run(stop, capture_output=True, env=WARM, timeout=30)
        local.cleanup()
