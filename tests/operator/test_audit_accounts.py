"""The audit trail per cloud and account (#24): each line names its account, worked out
from the config alone; `cpi audit` shows the config's own account unless --all, and
--deployment follows a deployment's resources to their later lines. Through real bin/cpi
calls on two local clouds sharing one `audit.path`, and the real `cpi` process; the aws
and openstack accounts at the level of their cloud classes (no server needed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cpi import audit, config, logs
from tests.support import suite
from tests.support.runner import DIRECTOR_ENV, ROOT, Cpi

CPI = [str(ROOT / ".venv" / "bin" / "python"), "-m", "cpi.cli"]
MBUS_PASSWORD = "mbus-pw-Acct9x"
NETWORK = {"default": {"type": "manual", "ip": "10.244.7.{}", "netmask": "255.255.0.0", "gateway": "10.244.0.1",
                       "cloud_properties": {}}}


def run(*args: str, env: dict | None = None) -> str:
    proc = subprocess.run([*CPI, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**DIRECTOR_ENV, **(env or {})}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def lines(*args: str, env: dict | None = None) -> list[dict]:
    return [json.loads(line) for line in run("audit", *args, "--json", env=env).splitlines()]


def local_config(path: Path, state: Path, trail: Path) -> Path:
    path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(state)}, "agent": {"mbus": f"nats://nats:{MBUS_PASSWORD}@127.0.0.1:4222"},
        "audit": {"path": str(trail)}}}}))
    return path


def network(host: int) -> dict:
    return {"default": {**NETWORK["default"], "ip": NETWORK["default"]["ip"].format(host)}}


@pytest.fixture(scope="module")
def two_clouds(tmp_path_factory):
    """Two local clouds (two state dirs) writing one shared trail. Cloud a: deployment
    `cf` (a VM with a disk, both tagged, then the disk detached and deleted and the VM
    deleted) and deployment `other` (a disk); cloud b: a disk of its own deployment `cf`."""
    work = tmp_path_factory.mktemp("accounts")
    trail = work / "shared" / "audit.log"
    a = local_config(work / "a.json", work / "state-a", trail)
    b = local_config(work / "b.json", work / "state-b", trail)
    image = work / "image"
    image.write_bytes(b"root image\n" * 10)
    cpi_a, cpi_b = Cpi(a, director_uuid="dir-a"), Cpi(b, director_uuid="dir-b")

    def call(cpi: Cpi, request_id: str, method: str, *arguments):
        return cpi(method, *arguments, context={"request_id": request_id})

    stemcell = call(cpi_a, "a-01", "create_stemcell", str(image), {"name": "s", "version": "1"})
    vm, _ = call(cpi_a, "a-02", "create_vm", "agent-cf", stemcell, {}, network(5), [], {})
    disk = call(cpi_a, "a-03", "create_disk", 16, {}, vm)
    call(cpi_a, "a-04", "attach_disk", vm, disk)
    call(cpi_a, "a-05", "set_vm_metadata", vm, {"deployment": "cf", "job": "web", "index": "0"})
    call(cpi_a, "a-06", "set_disk_metadata", disk, {"deployment": "cf", "job": "web"})
    other = call(cpi_a, "a-07", "create_disk", 8, {}, None)
    call(cpi_a, "a-08", "set_disk_metadata", other, {"deployment": "other"})
    b_disk = call(cpi_b, "b-01", "create_disk", 8, {}, None)
    call(cpi_b, "b-02", "set_disk_metadata", b_disk, {"deployment": "cf"})
    call(cpi_a, "a-09", "detach_disk", vm, disk)
    call(cpi_a, "a-10", "delete_disk", disk)
    call(cpi_a, "a-11", "delete_vm", vm)
    yield {"a": a, "b": b, "trail": trail, "work": work, "vm": vm, "disk": disk, "other": other,
           "b_disk": b_disk, "stemcell": stemcell}
    cpi_a("delete_disk", other)
    cpi_a("delete_stemcell", stemcell)
    cpi_b("delete_disk", b_disk)
    suite.stop_vms(work / "state-a")


def test_each_line_names_its_cloud_account_and_deployment_and_no_secret(two_clouds):
    written = list(audit.read(two_clouds["trail"]))
    accounts = {e["request_id"][0]: e["account"] for e in written}
    assert accounts == {"a": str(two_clouds["work"] / "state-a"), "b": str(two_clouds["work"] / "state-b")}
    assert all(e["cloud"] == "local" and list(e)[:8] == ["time", "request_id", "director_uuid", "method", "cloud",
                                                            "account", "deployment", "action"] for e in written)
    named = {(e["request_id"], e["deployment"]) for e in written if e["deployment"]}
    assert named == {("a-05", "cf"), ("a-06", "cf"), ("a-08", "other"), ("b-02", "cf")}
    assert MBUS_PASSWORD not in two_clouds["trail"].read_text()


def test_each_config_shows_only_its_own_account_and_all_shows_both(two_clouds):
    mine = lines("--config", str(two_clouds["a"]))
    theirs = lines("--config", str(two_clouds["b"]))
    assert mine and {e["request_id"][0] for e in mine} == {"a"}
    assert [e["request_id"] for e in theirs] == ["b-01", "b-02"]
    everything = lines("--config", str(two_clouds["a"]), "--all")
    assert len(everything) == len(mine) + len(theirs) == len(list(audit.read(two_clouds["trail"])))
    # CPI_CONFIG names the config as --config does
    assert lines(env={"CPI_CONFIG": str(two_clouds["b"])}) == theirs

    narrow = run("audit", "--config", str(two_clouds["b"]), "--tty").splitlines()
    assert narrow[0] == f"audit trail {two_clouds['trail']} (local {two_clouds['work'] / 'state-b'})"
    assert narrow[2].split() == ["time", "request", "method", "action", "type", "resource", "old", "new"]
    assert narrow[-1] == "2 lines"
    wide = run("audit", "--config", str(two_clouds["b"]), "--all", "--tty").splitlines()
    assert wide[2].split()[:4] == ["time", "cloud", "account", "request"]
    assert wide[-1] == f"{len(everything)} lines"
    assert {row.split()[2] for row in wide[4:-2]} == {str(two_clouds["work"] / "state-a"),
                                                 str(two_clouds["work"] / "state-b")}
    piped = run("audit", "--config", str(two_clouds["a"]), "--all", "--column", "account",
                "--request-id", "b-02").splitlines()
    assert [row.strip() for row in piped] == [str(two_clouds["work"] / "state-b")]


def test_a_deployment_is_followed_to_its_resources_later_lines(two_clouds):
    vm, disk = two_clouds["vm"], two_clouds["disk"]
    found = [(e["request_id"], e["action"], e["resource_id"])
             for e in lines("--config", str(two_clouds["a"]), "--deployment", "cf")]
    # the VM's and the disk's every line, before and after the lines that name cf; not the
    # IP the VM reserved (no line ties it), not the other deployment's disk, not cloud b's
    assert found == [
        ("a-02", "create", vm), ("a-03", "create", disk), ("a-04", "attach", disk),
        ("a-05", "tag", vm), ("a-06", "tag", disk),
        ("a-09", "detach", disk), ("a-10", "delete", disk), ("a-11", "delete", vm)]
    assert [(e["request_id"], e["resource_id"]) for e in lines("--config", str(two_clouds["a"]), "--deployment",
                                                              "other")] == [("a-07", two_clouds["other"]),
                                                                            ("a-08", two_clouds["other"])]
    across = {e["request_id"] for e in lines("--config", str(two_clouds["a"]), "--deployment", "cf", "--all")}
    assert {"b-01", "b-02"} <= across and "a-08" not in across
    # a tie older than --since still counts: the later lines alone, through their resource
    tagged = next(e for e in audit.read(two_clouds["trail"]) if e["request_id"] == "a-06")["time"]
    later = lines("--config", str(two_clouds["a"]), "--deployment", "cf", "--since", tagged, "--action", "delete")
    assert [(e["request_id"], e["resource_id"]) for e in later] == [("a-10", disk), ("a-11", vm)]
    assert lines("--config", str(two_clouds["a"]), "--deployment", "no-such-deployment") == []


def test_before_takes_a_time_or_an_age(two_clouds):
    detached = next(e for e in audit.read(two_clouds["trail"]) if e["request_id"] == "a-09")["time"]
    earlier = lines("--config", str(two_clouds["a"]), "--before", detached)
    assert earlier and all(e["time"] < detached for e in earlier)
    assert "a-09" not in {e["request_id"] for e in earlier} and "a-01" in {e["request_id"] for e in earlier}
    assert lines("--config", str(two_clouds["a"]), "--before", "1h") == []
    bad = subprocess.run([*CPI, "audit", "--config", str(two_clouds["a"]), "--before", "yesterday"],
                         capture_output=True, text=True, cwd=ROOT, env=DIRECTOR_ENV, timeout=60)
    assert bad.returncode == 2 and "--before: 'yesterday' is neither" in bad.stderr


def test_a_line_of_the_old_shape_is_shown_only_with_all(tmp_path):
    trail = tmp_path / "trail" / "audit.log"
    cfg = local_config(tmp_path / "cpi.json", tmp_path / "state", trail)
    trail.parent.mkdir(mode=0o700)
    old = {"time": "2026-01-01T00:00:00.000Z", "request_id": "old-1", "director_uuid": "d", "method": "create_disk",
           "cloud": "local", "action": "create", "resource_type": "disk", "resource_id": "disk-old",
           "changes": {"old": None, "new": {"size": 8}}, "pid": 1}
    trail.write_text(json.dumps(old) + "\n")
    trail.chmod(0o600)
    disk = Cpi(cfg)("create_disk", 8, {}, None, context={"request_id": "new-1"})
    try:
        assert [e["request_id"] for e in lines("--config", str(cfg))] == ["new-1"]
        assert [e["request_id"] for e in lines("--config", str(cfg), "--all")] == ["old-1", "new-1"]
        assert lines("--config", str(cfg), "--resource", "disk-old") == []
        assert "before lines named their account are shown only with --all" in " ".join(run("audit", "--help").split())
    finally:
        Cpi(cfg)("delete_disk", disk)


# ---------------------------------------------------------------- aws and openstack accounts

AWS_SECRET = "aws-secret-Kq83LmZ0pp"
AWS_KEY_ID = "AKIAACCOUNTTEST00042"


def aws_account(**aws) -> str:
    from cpi.clouds.aws.cloud import AwsCloud

    cfg = config.build({"cloud": {"plugin": "aws", "properties": {"aws": aws}}})
    assert cfg.cloud_class is AwsCloud
    return audit.account_of(cfg)


def test_an_aws_account_names_endpoint_region_and_credentials_but_no_secret():
    static = {"region": "eu-west-1", "access_key_id": AWS_KEY_ID, "secret_access_key": AWS_SECRET,
              "session_token": "tok-Zx81"}
    account = aws_account(**static)
    assert account == audit.fingerprint(AWS_KEY_ID, "eu-west-1 key")
    assert account.startswith("eu-west-1 key-") and len(account.split()[1]) == len("key-") + 12
    assert AWS_SECRET not in account and AWS_KEY_ID not in account and "tok-Zx81" not in account
    assert aws_account(**{**static, "access_key_id": "AKIAOTHERKEY00000043"}) != account
    assert aws_account(**{**static, "region": "us-east-2"}).startswith("us-east-2 key-")
    endpoint = aws_account(**{**static, "ec2_endpoint": f"http://user:{AWS_SECRET}@127.0.0.1:5000/?x=1"})
    assert endpoint == f"http://127.0.0.1:5000 {account}"
    role = aws_account(**{**static, "role_arn": "arn:aws:iam::123456789012:role/bosh"})
    assert role == "eu-west-1 role arn:aws:iam::123456789012:role/bosh"
    assert aws_account(region="eu-west-1", credentials_source="env_or_profile") == "eu-west-1 env_or_profile"


def test_an_aws_line_holds_its_account_and_never_the_secret(tmp_path):
    raw = {"cloud": {"plugin": "aws", "properties": {"aws": {
        "region": "eu-west-1", "access_key_id": AWS_KEY_ID, "secret_access_key": AWS_SECRET}}}}
    cfg = config.build(raw)
    trail = tmp_path / "trail" / "audit.log"
    logs.active = logs.Redactor()
    logs.active.collect(raw)
    audit.start(method="create_disk", cloud="aws", request_id="aws-1", path=trail,
                account=lambda: audit.account_of(cfg))
    try:
        audit.record("create", "vol-1", {"old": None, "new": {"note": AWS_SECRET, "secret_access_key": AWS_SECRET}},
                     resource_type="disk")
    finally:
        audit.end()
        logs.active = None
    [line] = audit.read(trail)
    assert line["cloud"] == "aws" and line["account"] == audit.account_of(cfg)
    assert AWS_SECRET not in trail.read_text() and AWS_KEY_ID not in trail.read_text()


def test_an_openstack_account_names_keystone_and_the_project_but_no_password():
    from cpi.clouds.openstack.cloud import OpenStackCloud

    def account(**openstack) -> str:
        cfg = config.build({"cloud": {"plugin": "openstack", "properties": {"openstack": openstack}}})
        assert cfg.cloud_class is OpenStackCloud
        return audit.account_of(cfg)

    password = {"auth_url": "https://keystone.example.com:5000", "username": "bosh", "api_key": "os-pw-Vv61",
                "domain": "Default", "project": "cf"}
    assert account(**password) == "https://keystone.example.com:5000/v3 project Default/cf"
    assert account(**password, project_domain_name="Ops", region="RegionTwo") == (
        "https://keystone.example.com:5000/v3 project Ops/cf region RegionTwo")
    assert account(**{**password, "project": None}, project_id="0f3a") == (
        "https://keystone.example.com:5000/v3 project_id 0f3a")
    appcred = account(auth_url="https://keystone.example.com/v3", application_credential_id="ac-1",
                      application_credential_secret="ac-secret-Qq")
    assert appcred == "https://keystone.example.com/v3 application_credential ac-1"
    assert "os-pw-Vv61" not in account(**password)


def test_the_default_trail_of_aws_and_openstack_is_in_the_suites_home_not_the_real_one():
    """The suite's HOME (tests/support/suite.py): no test writes into the real
    ~/.cache/bosh-cpi/audit, and tests/conftest.py fails a run that changed it."""
    cfg = config.build({"cloud": {"plugin": "aws", "properties": {"aws": {
        "region": "eu-west-1", "access_key_id": AWS_KEY_ID, "secret_access_key": AWS_SECRET}}}})
    path = audit.default_path(cfg)
    assert path.is_relative_to(suite.root()) and not path.is_relative_to(suite.REAL_CACHE)
    assert Path(DIRECTOR_ENV["HOME"]) == Path.home()
