"""`cpi plan` (cpi/plan.py) through the real `cpi` executable, on the local cloud, moto behind
the fault proxy, the loopback OpenStack services and VMware's simulator.

Each planned call is followed by the real one: the plan must have changed nothing (the
local state dir is byte for byte the same; the proxies saw no mutating request, EC2's only
as dry runs; the cloud's inventory is the same) and must list what the real call then did,
as its audit trail records it: the same actions on the same resources with the same
changes (ids the plan could only imagine mapped to the real ones, and values only the
cloud could tell, such as a dynamic IP or a process id, left open by the plan).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpi import audit
from tests.openstack.fixtures import openstack_cloud, openstack_loopback  # noqa: F401 - fixtures
from tests.support import suite
from tests.support.runner import ROOT, Cpi

DIRECTOR = "dir-plan"


def plan(config: Path, method: str, *arguments: Any, expect: int = 0) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cpi.cli", "plan", method, *(json.dumps(a) for a in arguments),
                           "--config", str(config), "--director-uuid", DIRECTOR, "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


class Trail:
    """The audit trail of the real calls, read one request at a time."""

    def __init__(self, path: Path, cpi: Cpi):
        self.path, self.cpi, self.number = path, cpi, 0

    def call(self, method: str, *arguments: Any) -> tuple[Any, list[dict]]:
        self.number += 1
        request_id = f"real-{self.number}"
        result = self.cpi(method, *arguments, context={"request_id": request_id})
        return result, [e for e in audit.read(self.path) if e.get("request_id") == request_id]


def _ids(value: Any, into: list[str]) -> list[str]:
    if isinstance(value, str):
        into.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _ids(item, into)
    elif isinstance(value, list):
        for item in value:
            _ids(item, into)
    return into


def _replace(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        for planned, real in mapping.items():
            value = value.replace(planned, real)
        return value
    if isinstance(value, dict):
        return {k: _replace(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, mapping) for v in value]
    return value


#: Names the CPI draws at random for each call (OpenStack's server, port and volume names;
#: vSphere's VM, stemcell, disk and snapshot names, which are also their cids).
_DRAWN = re.compile(r"\b(vm|volume|sc|disk|snap)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _agrees(planned: Any, real: Any) -> bool:
    """The plan's value is the real one, or None where only the cloud could tell."""
    if planned is None:
        return True
    if isinstance(planned, str) and isinstance(real, str):
        return _DRAWN.sub(r"\1-<drawn>", planned) == _DRAWN.sub(r"\1-<drawn>", real)
    if isinstance(planned, dict) and isinstance(real, dict):
        return set(planned) <= set(real) | {k for k, v in planned.items() if v is None} and all(
            _agrees(v, real.get(k)) for k, v in planned.items())
    if isinstance(planned, list) and isinstance(real, list):
        return len(planned) == len(real) and all(_agrees(p, r) for p, r in zip(planned, real, strict=True))
    return planned == real


def _known(value: Any) -> int:
    """How many values (leaves other than None) a change names."""
    if isinstance(value, dict):
        return sum(_known(v) for v in value.values())
    if isinstance(value, list):
        return sum(_known(v) for v in value) or 1
    return value is not None


def _undrawn(value: Any) -> Any:
    return _DRAWN.sub(r"\1-<drawn>", value) if isinstance(value, str) else value


def assert_plan_matches(document: dict, result: Any, lines: list[dict], *, complete: bool = True) -> None:
    """The plan lists what the real call did (its audit `lines`). With `complete=False` the
    plan may have stopped at a read only the real change could answer (cpi.plan.Horizon):
    what it lists up to there is then what the real call did first."""
    planned = [s for s in document["steps"] if s["step"] == "mutation"]
    if complete:
        assert document["would_fail"] is None and document["complete"], document
    else:
        assert document["would_fail"] is None and document["stopped_at"], document
        assert planned, document
        lines = lines[:len(planned)]
    assert [(s["action"], s["resource_type"]) for s in planned] == \
        [(e["action"], e["resource_type"]) for e in lines], (planned, lines)
    mapping = {}
    for step, line in zip(planned, lines, strict=False):  # what the plan could only name, by where it stands
        if isinstance(step["resource_id"], str) and "planned" in step["resource_id"]:
            mapping[step["resource_id"]] = line["resource_id"]
    for placeholder, real in zip(_ids(document["would_return"], []), _ids(result, []), strict=False):
        if "planned" in placeholder:
            mapping[placeholder] = real
    for step, line in zip(planned, lines, strict=False):
        step = _replace(step, mapping)
        assert _undrawn(step["resource_id"]) == _undrawn(line["resource_id"]), (step, line)
        for side in ("old", "new"):
            assert _agrees(step["changes"][side], line["changes"][side]), (side, step, line)
        # and it says most of it: None (open) is only for what the cloud alone can tell
        assert 2 * _known(step["changes"]) >= _known(line["changes"]), (step, line)
        assert step["director_uuid"] == DIRECTOR and step["method"] == line["method"]
    if complete and document["would_return"] is not None:
        assert _agrees(_replace(document["would_return"], mapping), result), (document["would_return"], result)


# ---------------------------------------------------------------- local


def state_of(root: Path) -> dict[str, Any]:
    """Every file and directory under the state dir (locks aside), with its content's digest."""
    found = {}
    for directory, _dirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        if rel.split(os.sep)[0] == "locks":
            continue
        found[rel] = "dir"
        for name in files:
            path = Path(directory, name)
            found[os.path.join(rel, name)] = (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    return found


@pytest.fixture
def local(tmp_path):
    state = tmp_path / "state"
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(state)}}}}))
    yield config, state, Trail(state / "audit.log", Cpi(config, director_uuid=DIRECTOR))
    suite.stop_vms(state)  # what a failing test did not delete


def test_local_plans_change_nothing_and_list_what_the_real_calls_do(local, tmp_path):
    config, state, trail = local
    image = tmp_path / "image"
    image.write_bytes(b"stemcell bytes\n" * 64)
    network = {"default": {"type": "manual", "ip": "10.250.0.9", "netmask": "255.255.255.0",
                           "gateway": "10.250.0.1", "cloud_properties": {}}}

    def planned_then_real(method: str, *arguments: Any) -> Any:
        before = state_of(state)
        document = plan(config, method, *arguments)
        assert state_of(state) == before, f"plan of {method} changed the state dir"
        result, lines = trail.call(method, *arguments)
        assert lines, f"{method} made no change to compare with"
        assert_plan_matches(document, result, lines)
        return result

    stemcell = planned_then_real("create_stemcell", str(image), {"name": "s", "version": "1"})
    vm, _ = planned_then_real("create_vm", "agent-1", stemcell, {"ephemeral_disk": {"size": 64}}, network, [], {})
    disk = planned_then_real("create_disk", 32, {}, vm)
    planned_then_real("attach_disk", vm, disk)
    planned_then_real("set_vm_metadata", vm, {"job": "web", "index": "0"})
    snapshot = planned_then_real("snapshot_disk", disk, {})
    planned_then_real("resize_disk", disk, 64)
    planned_then_real("reboot_vm", vm)
    planned_then_real("detach_disk", vm, disk)
    planned_then_real("delete_snapshot", snapshot)
    planned_then_real("delete_disk", disk)
    planned_then_real("delete_vm", vm)
    planned_then_real("delete_stemcell", stemcell)


def test_a_local_plan_says_what_the_call_would_fail_on(local, tmp_path):
    config, _state, trail = local
    image = tmp_path / "image"
    image.write_bytes(b"x")
    stemcell, _ = trail.call("create_stemcell", str(image), {})
    network = {"default": {"type": "manual", "ip": "10.250.0.9", "netmask": "255.255.255.0",
                           "gateway": "10.250.0.1", "cloud_properties": {}}}
    (vm, _), _ = trail.call("create_vm", "agent-1", stemcell, {}, network, [], {})

    taken = plan(config, "create_vm", "agent-2", stemcell, {}, network, [], {}, expect=1)
    assert taken["would_fail"]["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "10.250.0.9" in taken["would_fail"]["message"] and vm in taken["would_fail"]["message"]
    missing = plan(config, "attach_disk", vm, "disk-00000000-0000-0000-0000-000000000000", expect=1)
    assert missing["would_fail"]["type"] == "Bosh::Clouds::DiskNotFound" and missing["mutations"] == 0

    # what a person reads
    proc = subprocess.run([sys.executable, "-m", "cpi.cli", "plan", "create_disk", "128", '{"type": "preallocated"}',
                           json.dumps(vm), "--config", str(config)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "plan of create_disk: 1 change (nothing was changed)" in proc.stdout
    assert "1. create disk disk-planned1" in proc.stdout and "size: 128" in proc.stdout
    assert "would return: \"disk-planned1\"" in proc.stdout
    trail.call("delete_vm", vm)
    trail.call("delete_stemcell", stemcell)


def test_plan_usage_errors_exit_2(local):
    config, _, _ = local
    proc = subprocess.run([sys.executable, "-m", "cpi.cli", "plan", "has_vm", "vm-unquoted", "--config", str(config)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "is not JSON" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "cpi.cli", "plan", "info", "--config", "/nonexistent/cpi.json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "no such file" in proc.stderr


# ---------------------------------------------------------------- aws (moto behind the fault proxy)

try:
    from tests.aws import moto_env
    from tests.aws.conftest import VM_PROPS, account, ips, moto_server  # noqa: F401 - fixtures
    from tests.faults.proxy import FaultProxy
except ImportError:  # moto missing: the aws tests skip
    moto_env = None

READS = ("Describe", "Get", "List")


def test_aws_plans_send_only_dry_runs_and_list_what_the_real_calls_do(request, tmp_path):
    if moto_env is None:
        pytest.skip("moto is not installed")
    account = request.getfixturevalue("account")
    ips = request.getfixturevalue("ips")
    trail_path = tmp_path / "audit" / "audit.log"
    with FaultProxy(account.endpoint, flavor="aws") as proxy:
        document = account.config(ec2_endpoint=proxy.url)
        document["cloud"]["properties"]["audit"] = {"path": str(trail_path)}
        config = tmp_path / "aws.json"
        config.write_text(json.dumps(document))
        trail = Trail(trail_path, Cpi(config, director_uuid=DIRECTOR))
        stemcell, _ = trail.call("create_stemcell", "", {"ami": {moto_env.REGION: account.ami_id}})
        ec2 = account.ec2()

        def planned_then_real(method: str, *arguments: Any) -> Any:
            before, seen = moto_env.inventory(ec2), len(proxy.seen)
            document = plan(config, method, *arguments)
            requests = proxy.seen[seen:]
            changing = [r for r in requests if not r.action.startswith(READS) and not r.dry_run]
            assert not changing, f"plan of {method} sent {changing}"
            # one dry run per request (a CreateTags of a VM and its volumes is one request, several
            # lines), but for a request naming what the plan only imagines (EC2 would not know it)
            mutations = [s for s in document["steps"] if s["step"] == "mutation"]
            imagined = [s for s in mutations if s["permission"].startswith("not checked: it names ")]
            assert {f"ec2:{r.action}" for r in requests if r.dry_run} == \
                {s["request"] for s in mutations if s not in imagined}, requests
            assert all(s.get("permission") == "allowed (EC2 dry run)" for s in mutations if s not in imagined), \
                document["steps"]
            assert moto_env.inventory(ec2) == before
            result, lines = trail.call(method, *arguments)
            assert_plan_matches(document, result, lines)
            return result

        # a VM of two interfaces: made before it, then attached for good
        two = {**ips.network(), "replication": ips.network()["default"]}
        vm, _ = planned_then_real("create_vm", "agent-plan-nics", stemcell, VM_PROPS, two, [], {})
        planned_then_real("delete_vm", vm)
        for interface in ec2.describe_network_interfaces(  # moto keeps them; EC2 deletes them with the VM
                Filters=[{"Name": "tag:agent_id", "Values": ["agent-plan-nics"]}])["NetworkInterfaces"]:
            ec2.delete_network_interface(NetworkInterfaceId=interface["NetworkInterfaceId"])
        vm, _ = planned_then_real("create_vm", "agent-plan", stemcell, VM_PROPS, ips.network(), [], {})
        disk = planned_then_real("create_disk", 2048, {"type": "gp3"}, vm)
        planned_then_real("attach_disk", vm, disk)
        planned_then_real("set_vm_metadata", vm, {"job": "web"})
        planned_then_real("detach_disk", vm, disk)
        planned_then_real("delete_disk", disk)
        planned_then_real("delete_vm", vm)

        # a change the credentials may not make: EC2's dry run says so, and the plan fails
        proxy.inject(r"^CreateVolume$", "error", code="UnauthorizedOperation", status=403)
        denied = plan(config, "create_disk", 1024, {}, None, expect=1)
        step = next(s for s in denied["steps"] if s["step"] == "mutation")
        assert step["permission"].startswith("denied: UnauthorizedOperation"), step
        assert denied["denied"] == 1
        # what it would fail on: an AMI that is not there
        gone = plan(config, "create_vm", "agent-x", "ami-0000000000000dead", VM_PROPS, ips.network(), [], {}, expect=1)
        assert gone["would_fail"] is not None and gone["mutations"] == 0


# ---------------------------------------------------------------- openstack (the loopback services)


def test_openstack_plans_send_no_change_and_list_what_the_real_calls_do(request, tmp_path):
    import urllib.parse

    from tests.openstack import target as os_target

    cloud = request.getfixturevalue("openstack_loopback")
    proxies, overrides = [], {}
    for service, url in cloud.env["endpoints"].items():
        if service not in ("compute", "network", "image", "volumev3"):
            continue  # the services the CPI changes things through (a token request is no change)
        parts = urllib.parse.urlsplit(url)
        proxy = FaultProxy(f"{parts.scheme}://{parts.netloc}", flavor="openstack")
        proxy.start()
        proxies.append(proxy)
        overrides[{"volumev3": "block-storage"}.get(service, service)] = proxy.url + parts.path
    try:
        trail_path = tmp_path / "audit" / "audit.log"
        config = os_target.write_config(tmp_path / "os.json", cloud.env, endpoint_overrides=overrides)
        document = json.loads(config.read_text())
        document["cloud"]["properties"]["audit"] = {"path": str(trail_path)}
        config.write_text(json.dumps(document))
        trail = Trail(trail_path, Cpi(config, director_uuid=DIRECTOR))
        stemcell, _ = trail.call("create_stemcell", *cloud.stemcell_args())
        client = os_target.Client(cloud.env)

        def planned_then_real(method: str, *arguments: Any) -> Any:
            before, seen = client.inventory(), [len(p.seen) for p in proxies]
            document = plan(config, method, *arguments)
            sent = [r for p, n in zip(proxies, seen, strict=False) for r in p.seen[n:]]
            assert sent and all(r.method in ("GET", "HEAD") for r in sent), f"plan of {method} sent {sent}"
            assert client.inventory() == before
            assert all(s["permission"].startswith("not checked") for s in document["steps"] if s["step"] == "mutation")
            result, lines = trail.call(method, *arguments)
            assert_plan_matches(document, result, lines)
            return result

        vm, _ = planned_then_real("create_vm", "agent-plan", stemcell, cloud.vm_cloud_properties(),
                                  cloud.dynamic_network(), [], {})
        disk = planned_then_real("create_disk", 1024, {}, vm)
        planned_then_real("attach_disk", vm, disk)
        planned_then_real("detach_disk", vm, disk)
        planned_then_real("delete_disk", disk)
        planned_then_real("delete_vm", vm)
        trail.call("delete_stemcell", stemcell)
    finally:
        for proxy in proxies:
            proxy.stop()


# ---------------------------------------------------------------- vsphere (VMware's simulator)


def test_vsphere_plans_change_nothing_and_list_what_the_real_calls_do(vcsim, si, tmp_path):
    from tests.vsphere import stemcell
    from tests.vsphere import target as vs_target

    trail_path = tmp_path / "audit" / "audit.log"
    config = vs_target.write_config(tmp_path / "vsphere.json", vcsim)
    document = json.loads(config.read_text())
    document["cloud"]["properties"]["audit"] = {"path": str(trail_path)}
    # a plan and its real call each draw a datastore at random (place.pick): one to draw from
    datacenter = document["cloud"]["properties"]["vsphere"]["datacenters"][0]
    datacenter["datastore_pattern"] = datacenter["persistent_datastore_pattern"] = "^LocalDS_0$"
    config.write_text(json.dumps(document))
    trail = Trail(trail_path, Cpi(config, director_uuid=DIRECTOR))
    vcenter = vs_target.Vcenter(vcsim, si)
    image = stemcell.build(tmp_path / "stemcell")

    def planned_then_real(method: str, *arguments: Any, complete: bool = True) -> Any:
        before = vcenter.state()
        document = plan(config, method, *arguments)
        assert vcenter.state() == before, f"plan of {method} changed the vCenter"
        mutations = [s for s in document["steps"] if s["step"] == "mutation"]
        assert mutations, document
        # each withheld change names its target, and says no dry run checked it
        assert all(s["resource_id"] and s["permission"] == "not checked: vSphere has no dry run"
                   for s in mutations), mutations
        assert document["complete"] is complete, document
        result, lines = trail.call(method, *arguments)
        assert_plan_matches(document, result, lines, complete=complete)
        return document, result

    # the import stops at the lease's upload URLs, which only the vCenter hands out; the
    # template folder and the vCenter extension are made by the session's first create_stemcell
    folder_made = vcenter.find(f"{vs_target.DATACENTER}/vm/{vs_target.TEMPLATE_FOLDER}") is None
    document, sc = planned_then_real("create_stemcell", *vs_target.stemcell_args(image),
                                     complete=False)
    assert [(s["action"], s["resource_type"]) for s in document["steps"]
            if s["step"] == "mutation" and s["resource_type"] != "extension"] == \
        [("create", "folder")] * folder_made + [("import", "stemcell")]
    assert "import lease of sc-" in next(s["what"] for s in document["steps"] if s["step"] == "wait")
    # the clone stops where the new VM's devices are read
    network = {"default": {"type": "manual", "ip": "10.0.0.31", "netmask": "255.255.255.0", "gateway": "10.0.0.1",
                           "cloud_properties": {"name": vs_target.NETWORK}}}
    document, (vm, _) = planned_then_real("create_vm", "agent-plan", sc, {"cpu": 1, "ram": 512, "disk": 1024},
                                          network, [], {}, complete=False)
    clone = [s for s in document["steps"] if s["step"] == "mutation"][-1]
    assert (clone["action"], clone["resource_type"]) == ("create", "vm") and clone["resource_id"].startswith("vm-")
    _, disk = planned_then_real("create_disk", 1024, {}, vm)
    # the attachment stops where the VM's new devices are read
    planned_then_real("attach_disk", vm, disk, complete=False)
    planned_then_real("set_vm_metadata", vm, {"job": "web", "index": "0"})
    document, _ = planned_then_real("delete_vm", vm)
    actions = [(s["action"], s["resource_type"]) for s in document["steps"] if s["step"] == "mutation"]
    assert actions == [("power_off", "vm"), ("reconfigure", "vm"), ("delete", "vm"), ("delete", "file")], actions
    planned_then_real("delete_disk", disk)
    templates = {ref._moId for name, ref in vcenter.vms(vs_target.TEMPLATE_FOLDER).items() if name.startswith(sc)}
    document, _ = planned_then_real("delete_stemcell", sc)
    assert {(s["action"], s["resource_id"]) for s in document["steps"] if s["step"] == "mutation"} == \
        {("delete", ref) for ref in templates}
