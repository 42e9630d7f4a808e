"""The audit trail (cpi/audit.py, `cpi audit`): through real bin/cpi processes on the local
cloud, moto and the loopback OpenStack services."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from cpi import audit
from cpi import config as cpi_config
from tests.openstack.fixtures import openstack_cloud  # noqa: F401 - fixtures
from tests.support.runner import BIN_CPI, DIRECTOR_ENV, ROOT, Cpi, check_envelope

MBUS_PASSWORD = "mbus-pw-Zq81xk"
CONTEXT_PASSWORD = "ctx-pw-77Hq0r"
TAG_SECRET = "tag-secret-Lm29sd"


def local_config(tmp_path: Path, **audit_settings) -> Path:
    properties = {"local": {"state_dir": str(tmp_path / "state")},
                  "agent": {"mbus": f"nats://nats:{MBUS_PASSWORD}@127.0.0.1:4222"}}
    if audit_settings:
        properties["audit"] = audit_settings
    path = tmp_path / f"cpi-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": properties}}))
    return path


def entries(path: Path) -> list[dict]:
    return list(audit.read(path))


def by_request(lines: list[dict], prefix: str) -> list[tuple[str, str, str]]:
    return [(e["request_id"], e["action"], e["resource_type"]) for e in lines if e["request_id"].startswith(prefix)]


def call(cpi: Cpi, request_id: str, method: str, *arguments, **context):
    return cpi(method, *arguments, context={"request_id": request_id, **context})


# ---------------------------------------------------------------- local


def test_a_local_lifecycle_leaves_one_line_per_mutation_and_no_secret(tmp_path):
    config = local_config(tmp_path)
    cpi = Cpi(config, director_uuid="dir-1")
    image = tmp_path / "image"
    image.write_bytes(b"root image\n" * 100)
    network = {"default": {"type": "manual", "ip": "10.244.9.7", "netmask": "255.255.0.0", "gateway": "10.244.0.1",
                           "cloud_properties": {}}}
    sc = call(cpi, "r01", "create_stemcell", str(image), {"name": "s", "version": "1"})
    vm, _ = call(cpi, "r02", "create_vm", "agent-1", sc, {}, network, [], {}, password=CONTEXT_PASSWORD)
    disk = call(cpi, "r03", "create_disk", 64, {}, vm)
    hint = call(cpi, "r04", "attach_disk", vm, disk)
    call(cpi, "r05", "set_vm_metadata", vm, {"job": "web", "secret_token": TAG_SECRET, "note": CONTEXT_PASSWORD},
         password=CONTEXT_PASSWORD)
    snap = call(cpi, "r06", "snapshot_disk", disk, {})
    call(cpi, "r07", "delete_snapshot", snap)
    call(cpi, "r08", "resize_disk", disk, 128)
    call(cpi, "r09", "detach_disk", vm, disk)
    call(cpi, "r10", "reboot_vm", vm)
    call(cpi, "r11", "delete_disk", disk)
    call(cpi, "r12", "delete_vm", vm)
    call(cpi, "r13", "delete_stemcell", sc)
    call(cpi, "r14", "delete_vm", vm)  # already gone: no mutation, no line

    trail = tmp_path / "state" / "audit.log"
    assert stat.S_IMODE(trail.stat().st_mode) == 0o600
    lines = entries(trail)
    assert by_request(lines, "r") == [
        ("r01", "create", "stemcell"),
        ("r02", "reserve", "ip"), ("r02", "create", "vm"),
        ("r03", "create", "disk"),
        ("r04", "attach", "disk"),
        ("r05", "tag", "vm"),
        ("r06", "create", "snapshot"),
        ("r07", "delete", "snapshot"),
        ("r08", "resize", "disk"),
        ("r09", "detach", "disk"),
        ("r10", "reboot", "vm"),
        ("r11", "delete", "disk"),
        ("r12", "release", "ip"), ("r12", "delete", "vm"),
        ("r13", "delete", "stemcell"),
    ]
    line = {(e["request_id"], e["action"]): e for e in lines}
    for e in lines:
        assert e["director_uuid"] == "dir-1" and e["cloud"] == "local" and e["time"].endswith("Z")
    assert line["r02", "create"]["method"] == "create_vm" and line["r02", "create"]["resource_id"] == vm
    assert line["r02", "create"]["changes"]["new"]["ips"] == ["10.244.9.7"]
    assert line["r04", "attach"]["changes"] == {"old": None, "new": {"vm_cid": vm, "device": hint}}
    assert line["r09", "detach"]["changes"] == {"old": {"vm_cid": vm, "device": hint}, "new": None}
    assert line["r08", "resize"]["changes"] == {"old": {"size": 64}, "new": {"size": 128}}
    assert line["r05", "tag"]["changes"]["new"] == {"job": "web", "note": "<redacted>"}  # secret key dropped
    assert line["r10", "reboot"]["changes"]["new"]["boots"] == line["r10", "reboot"]["changes"]["old"]["boots"] + 1
    assert line["r12", "delete"]["changes"]["old"]["agent_id"] == "agent-1"
    text = trail.read_text()
    for secret in (MBUS_PASSWORD, CONTEXT_PASSWORD, TAG_SECRET):
        assert secret not in text

    # `cpi audit` reads it back, filtered
    out = cli("audit", "--config", str(config), "--request-id", "r04", "--json")
    assert [json.loads(x)["action"] for x in out.splitlines()] == ["attach"]
    out = cli("audit", "--config", str(config), "--resource", disk, "--json")
    assert [json.loads(x)["action"] for x in out.splitlines()] == ["create", "attach", "resize", "detach", "delete"]
    assert cli("audit", "--config", str(config), "--since", "2099-01-01T00:00Z", "--json") == ""
    # --column keeps only what it names, in JSON lines and YAML alike, the table's headings included
    picked = cli("audit", "--config", str(config), "--request-id", "r04", "--json", "--column", "request",
                 "--column", "resource", "--column", "action")
    assert [json.loads(x) for x in picked.splitlines()] == [{"request": "r04", "resource": disk, "action": "attach"}]
    assert yaml.safe_load(cli("audit", "--config", str(config), "--resource", disk, "--yaml", "--column",
                              "action")) == [{"action": a} for a in ("create", "attach", "resize", "detach", "delete")]
    table = cli("audit", "--config", str(config), "--action", "attach", "--tty")
    assert disk in table and table.rstrip().endswith("\n1 line")


def cli(*args: str, env: dict | None = None) -> str:
    proc = subprocess.run([sys.executable, "-m", "cpi.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _spawn(config: Path, method: str, arguments: list, request_id: str) -> subprocess.Popen:
    request = {"method": method, "arguments": arguments, "context": {"request_id": request_id}, "api_version": 2}
    proc = subprocess.Popen([str(BIN_CPI), str(config)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=DIRECTOR_ENV, cwd="/")
    proc.stdin.write(json.dumps(request).encode())
    proc.stdin.close()
    return proc


def _results(procs: list[subprocess.Popen]) -> list:
    results = []
    for proc in procs:
        doc = json.loads(proc.stdout.read())
        proc.wait(timeout=120)
        check_envelope(doc)
        assert doc["error"] is None, doc
        results.append(doc["result"])
    return results


def test_32_parallel_processes_rotating_at_a_small_size_tear_no_line(tmp_path):
    max_bytes = 4096
    config = local_config(tmp_path, max_bytes=max_bytes, keep=100)
    disks = _results([_spawn(config, "create_disk", [8, {}], f"p-create-{i}") for i in range(32)])
    _results([_spawn(config, "delete_disk", [disk], f"p-delete-{i}") for i, disk in enumerate(disks)])
    trail = tmp_path / "state" / "audit.log"
    files = audit.files(trail)
    assert len(files) > 3, "the trail was rotated several times"
    raw_lines = []
    for file in files:
        data = file.read_bytes()
        assert data.endswith(b"\n")
        assert len(data) <= max_bytes
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        raw_lines += data.splitlines()
    parsed = [json.loads(raw) for raw in raw_lines]  # every line whole
    assert len(parsed) == 64
    assert sorted(e["request_id"] for e in parsed) == sorted(
        [f"p-create-{i}" for i in range(32)] + [f"p-delete-{i}" for i in range(32)])
    created = {e["resource_id"] for e in parsed if e["action"] == "create"}
    deleted = {e["resource_id"] for e in parsed if e["action"] == "delete"}
    assert created == deleted == set(disks)


def test_rotation_keeps_the_newest_files_and_caps_long_lines(tmp_path):
    path = tmp_path / "trail" / "audit.log"
    audit.start(method="test", cloud="local", request_id="rot",
                config=audit.AuditConfig(path=path, max_bytes=2048, keep=2),
                path=path)
    try:
        for index in range(60):
            audit.record("create", f"res-{index}", {"old": None, "new": {"index": index}}, resource_type="disk")
        audit.record("tag", "huge", {"old": None, "new": {"blob": "x" * 100_000, "many": list(range(10_000))}})
    finally:
        audit.end()
    files = audit.files(path)
    assert [f.name for f in files] == ["audit.log.2", "audit.log.1", "audit.log"]
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    lines = [json.loads(raw) for f in files for raw in f.read_bytes().splitlines()]
    indexes = [e["changes"]["new"]["index"] for e in lines if e["action"] == "create"]
    assert indexes == list(range(indexes[0], 60)), "the newest lines, in order, none lost in between"
    huge = lines[-1]
    assert huge["resource_id"] == "huge" and len(json.dumps(huge)) < audit.MAX_LINE


def test_an_unwritable_audit_path_does_not_fail_the_call(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the audit directory should be\n")
    cpi = Cpi(local_config(tmp_path, path=str(blocker / "audit.log")))
    response = cpi.call("create_disk", 8, {}, None)
    disk = response.result
    assert "WARNING" in response.log and "audit: could not record create of" in response.log
    assert cpi("has_disk", disk) is True
    cpi("delete_disk", disk)


# ---------------------------------------------------------------- aws (moto) and openstack

try:
    from tests.aws import moto_env
    from tests.aws.conftest import VM_PROPS, account, ips, moto_server  # noqa: F401 - fixtures
except ImportError:  # moto missing: the aws test skips
    moto_env = None


def test_an_aws_lifecycle_is_audited(request, tmp_path):
    if moto_env is None:
        pytest.skip("moto is not installed")
    account = request.getfixturevalue("account")
    ips = request.getfixturevalue("ips")
    trail = tmp_path / "aws-audit" / "audit.log"
    document = account.config()
    document["cloud"]["properties"]["audit"] = {"path": str(trail)}
    config = tmp_path / "aws.json"
    config.write_text(json.dumps(document))
    cpi = Cpi(config, director_uuid="dir-aws")
    sc = call(cpi, "a1", "create_stemcell", "", {"name": moto_env.STEMCELL_NAME, "version": "1.0",
                                                 "ami": {moto_env.REGION: account.ami_id}})
    vm, _ = call(cpi, "a2", "create_vm", "agent-aws", sc, VM_PROPS, ips.network(), [], {})
    disk = call(cpi, "a3", "create_disk", 1024, {}, vm)
    call(cpi, "a4", "attach_disk", vm, disk)
    call(cpi, "a5", "detach_disk", vm, disk)
    call(cpi, "a6", "delete_disk", disk)
    call(cpi, "a7", "delete_vm", vm)
    call(cpi, "a8", "delete_stemcell", sc)
    lines = entries(trail)
    seen = {(e["request_id"], e["action"], e["resource_id"]) for e in lines}
    assert ("a2", "create", vm) in seen
    assert ("a3", "create", disk) in seen
    assert ("a4", "attach", disk) in seen and ("a5", "detach", disk) in seen
    assert ("a6", "delete", disk) in seen and ("a7", "delete", vm) in seen
    attach = next(e for e in lines if e["action"] == "attach")
    assert attach["changes"]["old"] is None and attach["changes"]["new"]["vm_cid"] == vm
    assert attach["request"] == "ec2:AttachVolume" and attach["cloud"] == "aws" and attach["director_uuid"] == "dir-aws"
    assert all(e["request_id"].startswith("a") for e in lines)
    assert {e["account"] for e in lines} == {audit.account_of(cpi_config.build(document))}  # offline: no STS call
    assert moto_env.SECRET_ACCESS_KEY not in trail.read_text() and moto_env.ACCESS_KEY_ID not in trail.read_text()


def test_an_openstack_lifecycle_is_audited(request, tmp_path):
    from tests.openstack import target as os_target

    cloud = request.getfixturevalue("openstack_cloud")
    trail = tmp_path / "os-audit" / "audit.log"
    config = os_target.write_config(tmp_path / "os.json", cloud.env)
    document = json.loads(config.read_text())
    document["cloud"]["properties"]["audit"] = {"path": str(trail)}
    config.write_text(json.dumps(document))
    cpi = Cpi(config, director_uuid="dir-os")
    sc = call(cpi, "o1", "create_stemcell", *cloud.stemcell_args())
    vm, _ = call(cpi, "o2", "create_vm", "agent-os", sc, cloud.vm_cloud_properties(), cloud.dynamic_network(), [], {})
    disk = call(cpi, "o3", "create_disk", 1024, {}, vm)
    call(cpi, "o4", "attach_disk", vm, disk)
    call(cpi, "o5", "detach_disk", vm, disk)
    call(cpi, "o6", "delete_disk", disk)
    call(cpi, "o7", "delete_vm", vm)
    call(cpi, "o8", "delete_stemcell", sc)
    lines = entries(trail)
    seen = {(e["request_id"], e["action"], e["resource_id"]) for e in lines}
    assert ("o2", "create", vm) in seen
    assert ("o3", "create", disk) in seen
    assert ("o4", "attach", disk) in seen and ("o5", "detach", disk) in seen
    assert ("o6", "delete", disk) in seen and ("o7", "delete", vm) in seen
    attach = next(e for e in lines if e["action"] == "attach")
    assert attach["changes"]["new"]["vm_cid"] == vm and attach["cloud"] == "openstack"
    assert {e["account"] for e in lines} == {audit.account_of(cpi_config.build(document))}
    assert cloud.env["password"] not in trail.read_text()


# ---------------------------------------------------------------- what each request's line says


def test_aws_requests_map_to_actions_and_changes():
    from cpi.clouds.aws.audited import lines

    assert lines("ModifyVolume", {"VolumeId": "vol-1", "Size": 20},
                 {"VolumeModification": {"OriginalSize": 10, "TargetSize": 20}}) == [
        ("resize", "disk", "vol-1", {"size_gib": 10}, {"size_gib": 20})]
    assert lines("AssociateAddress", {"PublicIp": "1.2.3.4", "InstanceId": "i-1"}, {"AssociationId": "a-1"}) == [
        ("associate", "address", "1.2.3.4", None, {"vm_cid": "i-1", "association_id": "a-1"})]
    assert lines("AssociateAddress", {"AllocationId": "eipalloc-1", "NetworkInterfaceId": "eni-2"},
                 {"AssociationId": "a-2"}) == [
        ("associate", "address", "eipalloc-1", None, {"network_interface_id": "eni-2", "association_id": "a-2"})]
    made = lines("CreateNetworkInterface", {"SubnetId": "subnet-1", "PrivateIpAddress": "10.0.0.9",
                                            "Ipv4Prefixes": [{"Ipv4Prefix": "10.0.0.32/28"}],
                                            "TagSpecifications": [{"ResourceType": "network-interface",
                                                                   "Tags": [{"Key": "agent_id", "Value": "a"}]}]},
                 {"NetworkInterface": {"NetworkInterfaceId": "eni-3", "MacAddress": "02:00:00:00:00:01"}})
    assert made == [("create", "interface", "eni-3", None,
                     {"subnet_id": "subnet-1", "private_ip": "10.0.0.9", "ipv6": [], "prefixes": ["10.0.0.32/28"],
                      "mac": "02:00:00:00:00:01", "tags": {"agent_id": "a"}})]
    assert lines("ModifyNetworkInterfaceAttribute", {"NetworkInterfaceId": "eni-3", "Attachment": {
        "AttachmentId": "eni-attach-1", "DeleteOnTermination": True}}, {}) == [
        ("update", "interface", "eni-3", None, {"delete_on_termination": True})]
    assert lines("DeleteNetworkInterface", {"NetworkInterfaceId": "eni-3"}, {})[0][:3] == (
        "delete", "interface", "eni-3")
    assert lines("CreateTags", {"Resources": ["i-1", "vol-2"], "Tags": [{"Key": "job", "Value": "web"}]}, {}) == [
        ("tag", "vm", "i-1", None, {"job": "web"}), ("tag", "disk", "vol-2", None, {"job": "web"})]
    assert lines("RebootInstances", {"InstanceIds": ["i-1"]}, {})[0][:3] == ("reboot", "vm", "i-1")
    assert lines("DeregisterImage", {"ImageId": "ami-1"}, {})[0][:3] == ("delete", "stemcell", "ami-1")


def test_aws_reads_dry_runs_and_snapshot_blocks_write_no_line(tmp_path, monkeypatch):
    from cpi.clouds.aws import audited

    seen = []
    monkeypatch.setattr(audit, "record", lambda *a, **k: seen.append(a))
    audited.after("ec2", "DescribeInstances", {}, {})
    audited.after("ebs", "PutSnapshotBlock", {"SnapshotId": "snap-1"}, {})
    audited.after("ec2", "RunInstances", {"DryRun": True}, {})
    assert seen == []
    audited.after("ec2", "TerminateInstances", {"InstanceIds": ["i-1"]}, {})
    assert seen == [("delete", "i-1", {"old": {"state": None}, "new": {"state": None}})]


def test_openstack_requests_map_to_actions_and_changes():
    from cpi.clouds.openstack.audited import lines

    class Answer:
        status_code, content = 200, b"x"

        def __init__(self, document):
            self.document = document

        def json(self):
            return self.document

    assert lines("POST", "/volumes/v-1/action", {"os-extend": {"new_size": 3}}, Answer({})) == [
        ("resize", "disk", "v-1", None, {"size_gib": 3})]
    assert lines("POST", "/servers/s-1/action", {"reboot": {"type": "SOFT"}}, Answer({})) == [
        ("reboot", "vm", "s-1", None, {"type": "SOFT"})]
    assert lines("PUT", "/v2.0/floatingips/f-1", {"floatingip": {"port_id": "p-1"}}, Answer({})) == [
        ("associate", "floating_ip", "f-1", None, {"port_id": "p-1"})]
    assert lines("POST", "/servers/s-1/metadata", {"metadata": {"job": "web"}}, Answer({})) == [
        ("tag", "vm", "s-1", None, {"job": "web"})]
    assert lines("POST", "/snapshots", {"snapshot": {"volume_id": "v-1"}}, Answer({"snapshot": {"id": "sn-1"}})) == [
        ("create", "snapshot", "sn-1", None, {"disk_cid": "v-1"})]
    assert lines("DELETE", "/images/i-1", None, Answer({})) == [("delete", "stemcell", "i-1", {"id": "i-1"}, None)]


def test_a_lock_held_too_long_is_a_warning_not_a_hang(tmp_path, monkeypatch, caplog):
    import fcntl

    path = tmp_path / "trail" / "audit.log"
    monkeypatch.setattr(audit, "LOCK_TIMEOUT", 0.2)
    audit.start(method="test", cloud="local", request_id="lock", path=path)
    try:
        audit.record("create", "first")
        with open(path, "rb") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # a stopped process holding it
            # a separate open file description: flock conflicts even within one process
            with caplog.at_level("WARNING", logger="cpi.audit"):
                audit.record("create", "second")
        assert "stayed locked by another process" in caplog.text
        audit.record("create", "third")
    finally:
        audit.end()
    assert [e["resource_id"] for e in audit.read(path)] == ["first", "third"]


# ---------------------------------------------------------------- at scale: bounded memory, cells whole

#: Lines of the trail the memory test reads (~20 MB): holding them as entries, as `cpi
#: audit` did before it streamed, takes ~140 MiB more than reading them one at a time.
BIG = 50_000


@pytest.fixture(scope="module")
def big_trail(tmp_path_factory):
    """A local config and a trail of BIG lines in the writer's own format: one line written
    by cpi.audit.record, copied with its time, request and resource changed (fast: no JSON
    encoding per line); each 1,000th line tags its disk with deployment `dep-N`."""
    work = tmp_path_factory.mktemp("big-trail")
    config = local_config(work)
    account = audit.account_of(cpi_config.build(json.loads(config.read_text())))
    trail = work / "trail" / "audit.log"
    audit.start(method="attach_disk", cloud="local", request_id="req-0000000", account=account, path=trail,
                deployment="dep-0")
    try:
        audit.record("attach", "disk-0000000", {"old": None, "new": {"vm_cid": "vm-1", "device": "/dev/sdf"}},
                     resource_type="disk")
    finally:
        audit.end()
    template = trail.read_bytes()
    attach = template.replace(b'"deployment": "dep-0"', b'"deployment": null')
    lines = []
    for index in range(BIG):
        line = template.replace(b'"dep-0"', b'"dep-%d"' % (index // 1000 % 7)) if index % 1000 == 0 else attach
        when = b"2026-01-%02dT%02d:%02d:%02d.000Z" % (1 + index // 86400, index // 3600 % 24, index // 60 % 60,
                                                       index % 60)
        lines.append(line[:10] + when + line[34:].replace(b"req-0000000", b"req-%07d" % index)
                     .replace(b"disk-0000000", b"disk-%07d" % index))
    trail.write_bytes(b"".join(lines))
    trail.chmod(0o600)
    return config, trail


def _peak(config: Path, *flags: str) -> tuple[bytes, int]:
    """What one `cpi audit` process printed, and its peak RSS in bytes (its own: os.wait4)."""
    proc = subprocess.Popen([sys.executable, "-m", "cpi.cli", "audit", "--config", str(config), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out, err = proc.stdout.read(), proc.stderr.read()  # little on stderr: it cannot fill while stdout is read
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, err
    return out, usage.ru_maxrss * 1024


def test_every_query_reads_the_trail_in_bounded_memory(big_trail):
    config, trail = big_trail
    _, baseline = _peak(config, "--file", str(trail), "--since", "2099-01-01T00:00Z", "--json")  # reads all, keeps none
    bound = baseline + 24 * 2**20
    out, rss = _peak(config, "--file", str(trail), "--json")
    assert len(out.splitlines()) == BIG and rss < bound, f"JSON lines: {rss / 2**20:.0f} MiB"
    out, rss = _peak(config, "--file", str(trail), "--tty")
    shown = out.decode().splitlines()
    assert shown[-1] == f"{BIG:,} lines" and len(shown) == BIG + 5 and rss < bound, f"table: {rss / 2**20:.0f} MiB"
    assert shown[3].split()[1] == "req-0000000" and shown[-3].split()[1] == f"req-{BIG - 1:07d}"
    out, rss = _peak(config, "--file", str(trail), "--deployment", "dep-3", "--since", "2026-01-01T06:00Z")
    tagged = [f"req-{i:07d}" for i in range(3000, BIG, 7000) if i >= 6 * 3600]
    assert [row.split("\t")[1] for row in out.decode().splitlines()] == tagged, "a table piped"
    assert rss < bound, f"deployment: {rss / 2**20:.0f} MiB"
    out, _ = _peak(config, "--file", str(trail), "--since", "2026-01-01T03:00:00Z", "--before",
                   "2026-01-01T03:00:10Z", "--json")  # seeks: the lines at 03:00:00-03:00:09, and only those
    assert [json.loads(line)["request_id"] for line in out.splitlines()] == [
        f"req-{i:07d}" for i in range(10800, 10810)]


def test_a_long_cell_is_printed_whole_on_a_terminal_and_piped(tmp_path):
    from tests.support import terminal

    config = local_config(tmp_path)
    cpi = Cpi(config)
    note = "a note longer than any terminal is wide " * 8
    disk = call(cpi, "long-1", "create_disk", 8, {}, None)
    try:
        call(cpi, "long-2", "set_disk_metadata", disk, {"deployment": "cf", "note": note})
        whole = json.dumps({"deployment": "cf", "note": note}, separators=(",", ":"), sort_keys=True)
        seen = terminal.run([sys.executable, "-m", "cpi.cli", "audit", "--config", str(config)], columns=80,
                            cwd=ROOT)
        assert seen.returncode == 0, seen.screen
        [tagged] = [line for line in seen.lines if "long-2" in line]
        assert tagged.rstrip().endswith(whole), "the cell is whole, on one line the terminal folds"
        assert "2 lines" in seen.lines
        [piped] = [line for line in cli("audit", "--config", str(config)).splitlines() if "long-2" in line]
        assert piped.split("\t")[-2] == whole
        yaml_lines = yaml.safe_load(cli("audit", "--config", str(config), "--yaml"))  # one item at a time
        assert yaml_lines == [json.loads(line) for line in cli("audit", "--config", str(config), "--json").splitlines()]
        assert yaml_lines[-1]["changes"]["new"]["note"] == note
    finally:
        cpi("delete_disk", disk)


def test_since_and_before_seek_to_the_same_lines_a_whole_read_finds(tmp_path):
    """Each file is searched for its first line at or after --since (less SEEK_SLACK): lines
    an older writer left up to LOCK_TIMEOUT out of order, a line that is not the writer's
    and a line without its time are all found as a read of every line finds them."""
    path = tmp_path / "trail" / "audit.log"
    path.parent.mkdir(mode=0o700)
    lines = []
    for index in range(400):
        second = index * 2 - (3 if index % 5 == 0 else 0)  # every 5th stamped 3 s before the line above it
        when = f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000Z" if second >= 0 else "2025-12-31T23:59:57.000Z"
        lines.append(json.dumps({"time": when, "request_id": f"r{index}"}))
        if index == 150:
            lines += ["not json", json.dumps({"request_id": "no time"}), "x" * (audit.MAX_LINE + 10)]
    path.write_text("\n".join(lines) + "\n")
    everything = list(audit.read(path))
    assert len(everything) == 401  # the line too long for the writer is skipped

    def whole(since: str | None, before: str | None) -> list[str]:
        return [e["request_id"] for e in everything if "time" in e and (since is None or e["time"] >= since)
                and (before is None or e["time"] < before)]

    times = sorted({e["time"] for e in everything if "time" in e})
    for since in [times[0], times[1], times[150], times[151], times[-1], "2027-01-01T00:00:00.000Z", None]:
        for before in [times[0], times[200], times[-1], "2027-01-01T00:00:00.000Z", None]:
            found = audit.read(path, not_before=since and since.encode(), before=before and before.encode())
            assert [e["request_id"] for e in found if "time" in e] == whole(since, before), (since, before)


def test_a_clock_set_back_starts_a_new_file_so_each_file_stays_in_time_order(tmp_path, monkeypatch):
    path = tmp_path / "trail" / "audit.log"
    clock = ["2026-01-01T10:00:00.000Z", "2026-01-01T10:00:01.000Z", "2026-01-01T09:00:00.000Z",
             "2026-01-01T09:00:02.000Z"]
    audit.start(method="test", cloud="local", request_id="clock", path=path)
    try:
        for index, when in enumerate(clock):
            monkeypatch.setattr(audit, "now", lambda when=when: when)
            audit.record("create", f"res-{index}")
    finally:
        audit.end()
    per_file = [[json.loads(line)["resource_id"] for line in file.read_text().splitlines()]
                for file in audit.files(path)]
    assert per_file == [["res-0", "res-1"], ["res-2", "res-3"]]
    assert [e["time"] for e in audit.read(path)][2:] == ["2026-01-01T09:00:00.000Z", "2026-01-01T09:00:02.000Z"]
    since = [e["resource_id"] for e in audit.read(path, not_before=b"2026-01-01T09:00:01.000Z")]
    assert since == ["res-0", "res-1", "res-3"]
