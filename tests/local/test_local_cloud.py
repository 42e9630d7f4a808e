"""What only the local cloud can show: the real files, processes and settings behind each
CPI call, fault injection, and crash safety."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.lifecycle.local_target import LocalTarget, pid_alive
from tests.support.runner import BIN_CPI, DIRECTOR_ENV, start_helper

MIB = 1024 * 1024


def configured(tmp_path, **local_properties) -> LocalTarget:
    return LocalTarget(tmp_path, **local_properties)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stemcell_image_is_copied_with_its_sha1(local):
    stemcell_cid = local.cpi("create_stemcell", *local.stemcell_args())
    directory = local.state_dir / "stemcells" / stemcell_cid
    record = json.loads((directory / "stemcell.json").read_text())
    assert (directory / "image").read_bytes() == local.image.read_bytes()
    assert record["sha1"] == hashlib.sha1(local.image.read_bytes(), usedforsecurity=False).hexdigest()
    local.cpi("delete_stemcell", stemcell_cid)
    assert not directory.exists()


def test_light_stemcell_and_missing_image(local):
    assert local.cpi("create_stemcell", "", {"name": "light"})
    response = local.cpi.call("create_stemcell", str(local.workdir / "missing-image"), {})
    assert response.error["type"] == "Bosh::Clouds::CloudError"
    assert "missing-image" in response.error["message"]
    assert len(list((local.state_dir / "stemcells").iterdir())) == 1


def test_disks_are_sparse_files_and_resize_keeps_bytes(local):
    disk_cid = local.cpi("create_disk", 1024, {}, None)
    path = local.disk_file(disk_cid)
    assert path.stat().st_size == 1024 * MIB
    assert path.stat().st_blocks * 512 < MIB  # sparse: nothing allocated yet
    with open(path, "r+b") as f:
        f.seek(700 * MIB)
        f.write(b"persistent data")
    local.cpi("resize_disk", disk_cid, 3072)
    assert path.stat().st_size == 3072 * MIB
    with open(path, "rb") as f:
        f.seek(700 * MIB)
        assert f.read(15) == b"persistent data"


def test_preallocated_disk_type(local):
    disk_cid = local.cpi("create_disk", 16, {"type": "preallocated"}, None)
    path = local.disk_file(disk_cid)
    assert path.stat().st_size == 16 * MIB
    assert path.stat().st_blocks * 512 >= 16 * MIB
    bad = local.cpi.call("create_disk", 16, {"type": "ssd"}, None)
    assert bad.error["type"] == "Bosh::Clouds::CpiError"
    assert "type" in bad.error["message"] and "sparse" in bad.error["message"]


def test_snapshot_is_a_real_sparse_copy(local):
    disk_cid = local.cpi("create_disk", 512, {}, None)
    path = local.disk_file(disk_cid)
    with open(path, "r+b") as f:
        f.seek(100 * MIB)
        f.write(b"before snapshot")
    snapshot_cid = local.cpi("snapshot_disk", disk_cid, {"index": 0})
    with open(path, "r+b") as f:
        f.seek(100 * MIB)
        f.write(b"after  snapshot")
    copy = local.state_dir / "snapshots" / snapshot_cid / "disk.img"
    assert copy.stat().st_size == 512 * MIB
    assert copy.stat().st_blocks * 512 < 8 * MIB  # holes kept
    with open(copy, "rb") as f:
        f.seek(100 * MIB)
        assert f.read(15) == b"before snapshot"
    record = json.loads((copy.parent / "snapshot.json").read_text())
    assert record["disk_cid"] == disk_cid and record["metadata"] == {"index": 0}


def test_update_disk_grows_in_place(local):
    disk_cid = local.cpi("create_disk", 100, {}, None)
    assert local.cpi("update_disk", disk_cid, 200, {"type": "sparse"}) is None
    assert local.disk_size_mib(disk_cid) == 200
    assert local.cpi.call("update_disk", disk_cid, 50, {}).error["type"] == "Bosh::Clouds::NotSupported"


def test_vm_process_settings_and_detachment(local, stemcell):
    env = {"bosh": {"mbus": {"cert": {"ca": "CA"}}, "group": "g"}, "persistent_disk_fs": "ext4"}
    networks = local.manual_network(1)
    vm_cid, _ = local.cpi("create_vm", "agent-007", stemcell, local.vm_cloud_properties(), networks, [], env)
    base = local.vm_dir(vm_cid)
    settings = local.settings(vm_cid)
    assert settings == {
        "agent_id": "agent-007",
        "vm": {"name": vm_cid},
        "mbus": "nats://nats:nats-secret-pw@127.0.0.1:4222",
        "ntp": ["0.pool.ntp.org"],
        "blobstore": {"provider": "local", "options": {"blobstore_path": "/var/vcap/micro_bosh/data/cache"}},
        "networks": networks,
        "disks": {"system": "/dev/sda", "ephemeral": "/dev/sdb", "persistent": {}},
        "env": env,
    }
    assert json.loads((base / "agent.json").read_text()) == {
        "Infrastructure": {"Settings": {"Sources": [
            {"Type": "File", "SettingsPath": str(base / "cpi-agent-env.json")}]}}
    }
    assert (base / "ephemeral.img").stat().st_size == 64 * MIB
    pid = local.vm_record(vm_cid)["pid"]
    # fully detached: own session, no inherited stdout/stderr, minimal environment
    assert os.getsid(pid) == pid
    assert os.readlink(f"/proc/{pid}/fd/1") == str(base / "agent.log")
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    environ = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if e)
    assert set(environ) <= {"PATH", "TMPDIR", "LC_CTYPE", "BOSH_CPI_VM"} and environ["TMPDIR"] == str(base)
    assert environ["BOSH_CPI_VM"] == str(base)  # the marker that finds it even without its pid
    # the VM's process is the agent's supervisor; the agent its child, in its session
    agent = json.loads((base / "supervisor.json").read_text())["agent_pid"]
    assert os.getsid(agent) == pid and os.readlink(f"/proc/{agent}/fd/1") == str(base / "agent.log")
    assert os.readlink(f"/proc/{agent}/fd/0") == "/dev/null"
    agent_environ = dict(e.split("=", 1) for e in Path(f"/proc/{agent}/environ").read_bytes().decode().split("\0") if e)
    assert agent_environ == environ  # the same minimal environment, marker included
    boots = [json.loads(line) for line in (base / "boots.jsonl").read_text().splitlines()]
    assert boots[0]["agent_id"] == "agent-007" and boots[0]["pid"] == agent
    local.cpi("delete_vm", vm_cid)
    assert not pid_alive(pid) and not pid_alive(agent)
    assert not base.exists()


def test_attach_records_disk_for_next_boot_and_reboot_restarts(local, stemcell):
    vm_cid, _ = local.cpi("create_vm", "agent-1", stemcell, {}, local.dynamic_network(), [], {})
    disk_a = local.cpi("create_disk", 10, {}, vm_cid)
    disk_b = local.cpi("create_disk", 10, {}, vm_cid)
    assert local.cpi("attach_disk", vm_cid, disk_a) == {"path": "/dev/sdc"}
    assert local.cpi("attach_disk", vm_cid, disk_b) == {"path": "/dev/sdd"}
    assert local.settings(vm_cid)["disks"]["persistent"] == {disk_a: {"path": "/dev/sdc"}, disk_b: {"path": "/dev/sdd"}}
    assert local.settings(vm_cid)["disks"]["ephemeral"] is None  # no ephemeral_disk asked for
    def agent_pid() -> int:
        return json.loads((local.vm_dir(vm_cid) / "supervisor.json").read_text())["agent_pid"]

    old_pid, old_agent = local.vm_record(vm_cid)["pid"], agent_pid()
    local.cpi("reboot_vm", vm_cid)
    new_pid, new_agent = local.vm_record(vm_cid)["pid"], agent_pid()
    assert new_pid != old_pid and pid_alive(new_pid) and not pid_alive(old_pid) and not pid_alive(old_agent)
    boots = [json.loads(line) for line in (local.vm_dir(vm_cid) / "boots.jsonl").read_text().splitlines()]
    assert [b["pid"] for b in boots] == [old_agent, new_agent]
    assert set(boots[1]["persistent"]) == {disk_a, disk_b}  # the rebooted agent sees its disks
    local.cpi("detach_disk", vm_cid, disk_a)
    assert local.settings(vm_cid)["disks"]["persistent"] == {disk_b: {"path": "/dev/sdd"}}
    assert local.cpi("attach_disk", vm_cid, disk_a) == {"path": "/dev/sdc"}  # first free letter again
    local.cpi("delete_vm", vm_cid)


def test_disk_attached_elsewhere_cannot_be_attached_or_deleted(local, stemcell):
    vm1, _ = local.cpi("create_vm", "a1", stemcell, {}, local.dynamic_network(), [], {})
    vm2, _ = local.cpi("create_vm", "a2", stemcell, {}, local.dynamic_network(), [], {})
    disk = local.cpi("create_disk", 10, {}, None)
    local.cpi("attach_disk", vm1, disk)
    err = local.cpi.call("attach_disk", vm2, disk).error
    assert err["type"] == "Bosh::Clouds::CloudError" and vm1 in err["message"]
    assert local.cpi.call("delete_disk", disk).error["type"] == "Bosh::Clouds::CloudError"
    assert local.cpi.call("detach_disk", vm2, disk).error["type"] == "Bosh::Clouds::DiskNotAttached"
    assert local.disk_attached_to(disk) == vm1


def test_manual_ip_is_exclusive_and_nothing_is_created_on_conflict(local, stemcell):
    vm1, _ = local.cpi("create_vm", "a1", stemcell, {}, local.manual_network(9), [], {})
    before = sorted(p.name for p in (local.state_dir / "vms").iterdir())
    err = local.cpi.call("create_vm", "a2", stemcell, {}, local.manual_network(9), [], {}).error
    assert err["type"] == "Bosh::Clouds::VMCreationFailed" and err["ok_to_retry"] is False
    assert "10.244.0.11" in err["message"] and vm1 in err["message"]
    assert sorted(p.name for p in (local.state_dir / "vms").iterdir()) == before
    local.cpi("delete_vm", vm1)
    vm3, _ = local.cpi("create_vm", "a3", stemcell, {}, local.manual_network(9), [], {})
    assert (local.state_dir / "ips" / "10.244.0.11").read_text() == vm3


def test_concurrent_creates_with_one_ip_exactly_one_wins(local, stemcell):
    def create(i):
        return local.cpi.call("create_vm", f"agent-{i}", stemcell, {}, local.manual_network(42), [], {})

    with ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(create, range(6)))
    winners = [r for r in responses if r.error is None]
    assert len(winners) == 1
    assert all(r.error["type"] == "Bosh::Clouds::VMCreationFailed" for r in responses if r.error)
    assert len(list((local.state_dir / "vms").iterdir())) == 1


def test_fault_injection_next_n_calls_then_success(tmp_path):
    local = configured(tmp_path, faults=[
        {"method": "create_vm", "times": 2, "error": "VMCreationFailed", "ok_to_retry": True, "message": "injected"},
        {"method": "has_disk", "delay": 0.5, "error": None},
    ])
    try:
        stemcell = local.cpi("create_stemcell", *local.stemcell_args())
        for _ in range(2):
            err = local.cpi.call("create_vm", "a", stemcell, {}, local.dynamic_network(), [], {}).error
            assert err == {"type": "Bosh::Clouds::VMCreationFailed", "message": "injected", "ok_to_retry": True}
        vm_cid, _ = local.cpi("create_vm", "a", stemcell, {}, local.dynamic_network(), [], {})
        assert local.cpi("has_vm", vm_cid)
        started = time.monotonic()
        response = local.cpi.call("has_disk", "disk-x")
        assert time.monotonic() - started >= 0.5
        assert response.result is False and "delaying has_disk" in response.log
    finally:
        local.cleanup()


def test_fault_with_unknown_error_type_is_a_config_error(tmp_path):
    local = configured(tmp_path, faults=[{"method": "has_vm", "error": "Oops"}])
    err = local.cpi.call("has_vm", "vm-1").error
    assert err["type"] == "Bosh::Clouds::CpiError" and "Oops" in err["message"]


def test_https_mbus_port_is_held_by_one_vm(tmp_path):
    port = free_port()
    local = configured(tmp_path)
    config = json.loads(local.config_path.read_text())
    config["cloud"]["properties"]["agent"]["mbus"] = f"https://mbus:mbus-pw@0.0.0.0:{port}"
    local.config_path.write_text(json.dumps(config))
    try:
        stemcell = local.cpi("create_stemcell", *local.stemcell_args())
        vm1, _ = local.cpi("create_vm", "a1", stemcell, {}, local.dynamic_network(), [], {})
        socket.create_connection(("127.0.0.1", port), timeout=1).close()  # the agent listens
        err = local.cpi.call("create_vm", "a2", stemcell, {}, local.dynamic_network(), [], {}).error
        assert err["type"] == "Bosh::Clouds::VMCreationFailed" and "already in use" in err["message"]
        local.cpi("delete_vm", vm1)  # synchronous: the port is free when it returns
        vm2, _ = local.cpi("create_vm", "a2", stemcell, {}, local.dynamic_network(), [], {})
        local.cpi("delete_vm", vm2)
    finally:
        local.cleanup()


def test_failing_agent_command_reports_its_error_and_leaves_nothing(tmp_path):
    agent = tmp_path / "bad-agent"
    agent.write_text("#!/bin/sh\necho 'INFO - starting'\necho 'ERROR - cannot unmarshal settings' >&2\nexit 3\n")
    agent.chmod(0o755)
    local = configured(tmp_path, agent_command=[str(agent)])
    stemcell = local.cpi("create_stemcell", *local.stemcell_args())
    err = local.cpi.call("create_vm", "a", stemcell, {}, local.manual_network(3), [], {}).error
    assert err["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "code 3" in err["message"] and "cannot unmarshal settings" in err["message"]
    assert list((local.state_dir / "vms").iterdir()) == []
    assert list((local.state_dir / "ips").iterdir()) == []


def test_create_vm_killed_midway_can_be_cleaned_up(tmp_path):
    """SIGKILL a create_vm while it waits for the VM process; the VM it left is reported by
    has_vm and delete_vm removes it with its process and IP."""
    port = free_port()
    agent = tmp_path / "slow-agent"
    agent.write_text("#!/bin/sh\nexec sleep 60\n")  # never opens the mbus port
    agent.chmod(0o755)
    local = configured(tmp_path, agent_command=[str(agent)], agent_boot_timeout=30)
    config = json.loads(local.config_path.read_text())
    config["cloud"]["properties"]["agent"]["mbus"] = f"https://mbus:pw@127.0.0.1:{port}"
    local.config_path.write_text(json.dumps(config))
    try:
        stemcell = local.cpi("create_stemcell", *local.stemcell_args())
        if DIRECTOR_ENV.get("CPI_HELPER_IDLE_TIMEOUT") != "0":
            start_helper(local.config_path)  # the call below is then a worker's: kill it through its client
        request = local.cpi.request("create_vm", "a", stemcell, {}, local.manual_network(5), [], {})
        proc = subprocess.Popen([str(BIN_CPI), str(local.config_path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=DIRECTOR_ENV, cwd="/")
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
        deadline = time.monotonic() + 20
        records = []
        while time.monotonic() < deadline and not records:
            records = [r for r in (local.state_dir / "vms").glob("*/vm.json")
                       if json.loads(r.read_text()).get("ips")]
            time.sleep(0.05)
        time.sleep(0.3)  # let it reach the wait for the VM process
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        assert records, "create_vm never wrote its VM record"
        vm_cid = records[0].parent.name
        killed = time.monotonic()
        assert local.cpi("has_vm", vm_cid) is True
        assert local.cpi("delete_vm", vm_cid) is None
        # the call died with its process, warm or cold: nothing waited for the 30 s boot
        # timeout of a create_vm going on in the background with the VM's lock
        assert time.monotonic() - killed < 10
        assert not (local.state_dir / "vms" / vm_cid).exists()
        assert list((local.state_dir / "ips").iterdir()) == []
        sleepers = subprocess.run(["pgrep", "-f", f"{agent} -b"], capture_output=True, text=True).stdout.split()
        assert not [p for p in sleepers if pid_alive(int(p))]
    finally:
        local.cleanup()


def test_ip_held_by_a_vanished_vm_is_reclaimed(local, stemcell):
    (local.state_dir / "ips" / "10.244.0.13").write_text("vm-that-crashed-before-its-record")
    vm_cid, _ = local.cpi("create_vm", "a", stemcell, {}, local.manual_network(11), [], {})
    assert (local.state_dir / "ips" / "10.244.0.13").read_text() == vm_cid


def test_current_vm_id(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    local = configured(tmp_path / "a", current_vm_cid="vm-director")
    assert local.cpi("current_vm_id") == "vm-director"
    plain = configured(tmp_path / "b")
    assert plain.cpi.call("current_vm_id").error["type"] == "Bosh::Clouds::CloudError"


def test_bad_vm_cloud_properties_name_the_field(local, stemcell):
    err = local.cpi.call("create_vm", "a", stemcell, {"ephemeral_disk": {"size": "big"}},
                         local.dynamic_network(), [], {}).error
    assert err["type"] == "Bosh::Clouds::CpiError"
    assert "vm_type cloud_properties: ephemeral_disk.size" in err["message"]


def strict(target: LocalTarget) -> LocalTarget:
    """The same cloud with cloud.properties.validation.strict: true in its cpi.json."""
    doc = json.loads(target.config_path.read_text())
    doc["cloud"]["properties"]["validation"] = {"strict": True}
    target.config_path.write_text(json.dumps(doc))
    return target


def test_unknown_keys_are_ignored_with_a_warning_unless_strict(local, stemcell):
    """As the official CPIs do (a vm_extension written for another IaaS, a key this CPI
    lacks): the call succeeds, and its log names each key it left out and the closest known
    one; `validation.strict` refuses them, before anything is made."""
    props = {"cpu": 1, "rma": 256, "instance_type": "m5.large", "ephemeral_disk": {"size": 64, "sise": 1}}
    response = local.cpi.call("create_vm", "agent-lenient", stemcell, props, local.dynamic_network(), [], {})
    vm_cid, _ = response.result
    assert "vm_type cloud_properties.rma: unknown property ignored, did you mean ram?" in response.log
    assert "vm_type cloud_properties.ephemeral_disk.sise: unknown property ignored, did you mean size?" in response.log
    assert "vm_type cloud_properties.instance_type: unknown property ignored (" in response.log
    assert local.vm_record(vm_cid)["cloud_properties"] == props  # recorded as the director sent it
    local.cpi("delete_vm", vm_cid)
    err = strict(local).cpi.call("create_vm", "agent-strict", stemcell, props, local.dynamic_network(), [], {}).error
    assert err["type"] == "Bosh::Clouds::CpiError"
    assert "rma: unknown property" in err["message"] and "instance_type: unknown property" in err["message"]
    assert "vms" not in local.leftovers()
