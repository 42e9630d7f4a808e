"""Each local VM's agent runs under a supervisor (cpi/clouds/local/supervisor.py), as
bosh-agent runs under runit on a stemcell: an agent that exits (killed, crashed, or on
purpose after update_settings) is started again; one that keeps exiting is left down and
reported; delete_vm leaves no process; the supervisor outlives the call (and the warm
helper) that started it. Everything goes through bin/cpi and the operator's `cpi`."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

from tests.lifecycle.local_target import LocalTarget, pid_alive
from tests.local.test_kills import marked_processes
from tests.support.operator_cli import cli, listed
from tests.support.runner import COLD_ENV, WARM_ENV, helper_pid, run_raw, start_helper


def supervised(local: LocalTarget, vm_cid: str) -> dict:
    return json.loads((local.vm_dir(vm_cid) / "supervisor.json").read_text())


def boots(local: LocalTarget, vm_cid: str) -> list[dict]:
    return [json.loads(line) for line in (local.vm_dir(vm_cid) / "boots.jsonl").read_text().splitlines()]


def until(check: Callable[[], object], within: float, what: str) -> float:
    """Wait (polling) until `check()` holds; the seconds it took."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < within, f"{what}: not within {within}s"
        time.sleep(0.01)
    return time.monotonic() - start


def vm(local: LocalTarget, stemcell: str, agent_id: str = "agent-s") -> str:
    vm_cid, _ = local.cpi("create_vm", agent_id, stemcell, {}, local.dynamic_network(), [], {})
    return vm_cid


def test_killed_agent_comes_back_and_reboot_and_delete_leave_one_or_none(local, stemcell):
    vm_cid = vm(local, stemcell)
    record, state = local.vm_record(vm_cid), supervised(local, vm_cid)
    assert state["supervisor_pid"] == record["pid"] and state["state"] == "running" and state["restarts"] == 0
    first = state["agent_pid"]
    assert boots(local, vm_cid)[0]["pid"] == first
    assert os.getsid(first) == record["pid"]  # the agent is in its supervisor's session: stopped with it
    assert sorted(marked_processes(local.state_dir)) == sorted([record["pid"], first])

    killed = time.time()
    os.kill(first, signal.SIGKILL)
    until(lambda: len(boots(local, vm_cid)) == 2, 5, "the killed agent was not started again")
    back = boots(local, vm_cid)[1]
    assert back["pid"] != first and pid_alive(back["pid"]) and back["agent_id"] == "agent-s"
    assert back["booted_at"] - killed < 2  # the first restart waits 0.1 s
    state = supervised(local, vm_cid)
    assert state["restarts"] == 1 and state["last_exit"]["signal"] == "SIGKILL"
    log = (local.vm_dir(vm_cid) / "supervisor.log").read_text()
    assert f"agent started, pid {first}" in log and "agent exited (signal SIGKILL)" in log
    assert "restart 1 in 0.10s" in log
    for name in ("supervisor.log", "supervisor.json"):  # private, as every file of the VM
        assert (local.vm_dir(vm_cid) / name).stat().st_mode & 0o077 == 0, name
    assert listed(local.config_path, "vms")[vm_cid]["state"] == "running"
    assert local.cpi("has_vm", vm_cid) is True

    local.cpi("reboot_vm", vm_cid)
    rebooted = supervised(local, vm_cid)
    assert rebooted["supervisor_pid"] == local.vm_record(vm_cid)["pid"] != record["pid"]
    assert rebooted["restarts"] == 0  # a new supervisor: the counts start again
    assert sorted(marked_processes(local.state_dir)) == sorted([rebooted["supervisor_pid"], rebooted["agent_pid"]])

    local.cpi("delete_vm", vm_cid)
    assert marked_processes(local.state_dir) == []


def test_agent_that_keeps_exiting_is_left_down_and_reported_failing(tmp_path):
    agent = tmp_path / "short-lived-agent"
    agent.write_text("#!/bin/sh\nsleep 0.3\necho 'ERROR - lost my settings'\nexit 7\n")  # up, then gone
    agent.chmod(0o755)
    local = LocalTarget(tmp_path, agent_command=[str(agent)])
    try:
        stemcell = local.cpi("create_stemcell", *local.stemcell_args())
        vm_cid = vm(local, stemcell)  # it stays up past the settle time: create_vm succeeds
        took = until(lambda: supervised(local, vm_cid)["state"] == "failing", 15, "the VM never turned failing")
        assert took < 6  # 5 runs of 0.3 s and waits of 0.1 + 0.2 + 0.4 + 0.8 s
        state = supervised(local, vm_cid)
        assert state["restarts"] == 4 and state["last_exit"]["code"] == 7 and state["last_exit"]["signal"] is None
        assert pid_alive(state["supervisor_pid"])  # still there: the VM exists until delete_vm
        assert marked_processes(local.state_dir) == [state["supervisor_pid"]]
        log = (local.vm_dir(vm_cid) / "supervisor.log").read_text()
        assert log.count("agent exited (code 7)") == 5 and "not restarting it (state failing" in log

        assert local.cpi("has_vm", vm_cid) is True
        assert listed(local.config_path, "vms")[vm_cid]["state"] == "failing"
        shown = cli(local.config_path, "show", "vm", vm_cid, "--json")
        assert shown.returncode == 0, shown.stderr
        doc = json.loads(shown.stdout)
        assert doc["state"] == "failing"
        assert doc["details"]["agent"]["restarts"] == 4 and doc["details"]["agent"]["last_exit"]["code"] == 7

        local.cpi("delete_vm", vm_cid)
        assert marked_processes(local.state_dir) == []
        assert not local.vm_dir(vm_cid).exists()
    finally:
        local.cleanup()


def test_supervisor_outlives_the_warm_helper_that_started_it(local, stemcell):
    """create_vm made by a warm helper's worker: the VM's supervisor is in its own session,
    no child whose end the helper's would bring; killed, the helper takes no VM with it."""
    start_helper(local.config_path)
    response = run_raw(json.dumps(local.cpi.request("create_vm", "agent-w", stemcell, {}, local.dynamic_network(),
                                                    [], {})).encode(), local.config_path, env=WARM_ENV)
    vm_cid = response.result[0]
    helper = helper_pid()
    assert helper is not None
    state = supervised(local, vm_cid)
    assert os.getsid(state["supervisor_pid"]) == state["supervisor_pid"] != os.getsid(helper)
    os.kill(helper, signal.SIGKILL)
    until(lambda: not pid_alive(helper), 5, "the helper did not die")
    assert pid_alive(state["supervisor_pid"]) and pid_alive(state["agent_pid"])
    os.kill(state["agent_pid"], signal.SIGKILL)  # and it still supervises
    until(lambda: len(boots(local, vm_cid)) == 2, 5, "no restart after the helper's death")
    deleted = run_raw(json.dumps(local.cpi.request("delete_vm", vm_cid)).encode(), local.config_path, env=COLD_ENV)
    assert deleted.error is None
    assert marked_processes(local.state_dir) == []

