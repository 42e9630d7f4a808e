"""`cpi validate` through the real executable: offline on local and aws (no server needed),
online against moto and the OpenStack loopback services."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-Validate-Value"
#: what `cpi validate` says a call does with a key no model knows (validation.strict off)
IGNORES = " (every call ignores it, with a warning in its log)"


def run(cloud_config: dict | str, config: Path | None, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / f"cloud-config-{time.monotonic_ns()}.yml"
    path.write_text(cloud_config if isinstance(cloud_config, str) else yaml.safe_dump(cloud_config))
    argv = [sys.executable, "-m", "cpi.cli", "validate", str(path)] + (["--config", str(config)] if config else [])
    return subprocess.run(argv + list(args), capture_output=True, text=True, cwd=ROOT, timeout=60)


def findings(result: subprocess.CompletedProcess) -> dict[str, str]:
    doc = json.loads(result.stdout)
    return {f["path"]: f["problem"] for f in doc["findings"] if f["severity"] == "error"}


def aws_offline_config(tmp_path: Path) -> Path:
    path = tmp_path / "aws.json"
    path.write_text(json.dumps({"cloud": {"plugin": "aws", "properties": {"aws": {
        "region": "us-east-1", "access_key_id": "AKIAVALIDATE", "secret_access_key": SECRET}}}}))
    return path


LOCAL_CLEAN = {
    "azs": [{"name": "z1"}],
    "vm_types": [{"name": "small", "cloud_properties": {"cpu": 2, "ram": 2048, "ephemeral_disk": {"size": 1024}}}],
    "vm_extensions": [{"name": "big", "cloud_properties": {"ram": 8192}}],
    "disk_types": [{"name": "default", "disk_size": 1024, "cloud_properties": {"type": "sparse"}}],
    "networks": [{"name": "default", "type": "manual", "subnets": [
        {"range": "10.0.0.0/24", "gateway": "10.0.0.1", "azs": ["z1"], "cloud_properties": {}}]}],
    "compilation": {"workers": 2, "network": "default", "az": "z1", "vm_type": "small", "reuse_compilation_vms": True},
}


def test_local_clean_exits_0(tmp_path):
    result = run(LOCAL_CLEAN, None, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no problems found" in result.stdout
    result = run(LOCAL_CLEAN, None, "--json", tmp_path=tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout)["ok"] is True


def test_local_all_problems_at_once(tmp_path):
    doc = json.loads(json.dumps(LOCAL_CLEAN))
    doc["vm_types"][0]["cloud_properties"]["rma"] = 4096            # misspelt
    doc["vm_types"].append({"name": "small", "cloud_properties": {"cpu": "two"}})  # duplicate, wrong type
    doc["vm_extensions"][0]["cloud_properties"]["password"] = SECRET  # unknown, secret
    result = run(doc, None, "--json", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr
    found = findings(result)
    assert found["vm_types[name=small].cloud_properties.rma"] == "unknown property, did you mean ram?" + IGNORES
    assert found["vm_types[1].cloud_properties.cpu"].startswith("wrong type: expected an integer, got a string")
    assert "duplicate name 'small'" in found["vm_types[name=small]"]
    assert "vm_extensions[name=big].cloud_properties.password" in found
    assert SECRET not in result.stdout + result.stderr
    table = run(doc, None, tmp_path=tmp_path)  # the human table says the same
    assert table.returncode == 1 and "did you mean ram?" in table.stdout and SECRET not in table.stdout
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    local = tmp_path / "local.json"
    local.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(state)}}}}))
    online = run(LOCAL_CLEAN, local, "--online", "--json", tmp_path=tmp_path)
    assert online.returncode == 0
    assert "nothing to check online" in online.stdout


def test_structure(tmp_path):
    result = run("- just\n- a list\n", None, "--json", tmp_path=tmp_path)
    assert result.returncode == 1 and "must be a YAML mapping" in result.stdout
    result = run({"vm_types": [{"cloud_properties": {}}], "networks": [{"name": "n", "subnets": [
        {"range": "10.0.0.0/24", "az": "z9"}]}], "compilation": {"network": "m"}}, None, "--json", tmp_path=tmp_path)
    found = findings(result)
    assert found["vm_types[0]"] == "missing name"
    assert found["networks[name=n].subnets[0].az"] == "unknown AZ 'z9'"
    assert found["compilation.network"].startswith("unknown network 'm'")


AWS_BAD = {
    "azs": [{"name": "z1", "cloud_properties": {"availability_zone": "us-east-1a"}}],
    "vm_types": [
        {"name": "web", "cloud_properties": {"instance_tpye": "m5.large"}},
        {"name": "web", "cloud_properties": {"instance_type": "m5.large", "ephemeral_disk": {"size": "ten"}}},
    ],
    "vm_extensions": [{"name": "lb", "cloud_properties": {"elbs": "not-a-list", "secret_access_key": SECRET}}],
    "disk_types": [{"name": "fast", "disk_size": 10240, "cloud_properties": {"type": "gp9"}}],
    "networks": [{"name": "default", "subnets": [
        {"range": "10.0.0.0/24", "az": "z1", "cloud_properties": {"subnet": "subnet-1", "securty_groups": ["bosh"]}}]}],
}


def test_aws_offline_all_problems_at_once(tmp_path):
    result = run(AWS_BAD, aws_offline_config(tmp_path), "--json", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr
    found = findings(result)
    assert found["vm_types[name=web].cloud_properties.instance_tpye"] == (
        "unknown property, did you mean instance_type?" + IGNORES)
    assert found["vm_types[name=web].cloud_properties.instance_type"] == "required property missing"
    assert "duplicate name 'web'" in found["vm_types[name=web]"]
    assert found["vm_types[1].cloud_properties.ephemeral_disk.size"] == \
        "wrong type: expected an integer, got a string 'ten'"
    assert found["vm_extensions[name=lb].cloud_properties.elbs"].startswith("wrong type: expected a list")
    assert "vm_extensions[name=lb].cloud_properties.secret_access_key" in found
    assert "gp9" in found["disk_types[name=fast].cloud_properties.type"]
    assert found["networks[name=default].subnets[0].cloud_properties.securty_groups"] == (
        "unknown property, did you mean security_groups?" + IGNORES)
    assert not any(p.startswith("azs") for p in found)  # a partial vm_type: no instance_type needed
    assert SECRET not in result.stdout + result.stderr


# ---------------------------------------------------------------- online: moto


@pytest.fixture(scope="module")
def moto_account(tmp_path_factory):
    from tests.aws import moto_env

    server = moto_env.MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    try:
        account = moto_env.seed(server.url)
        iam = moto_env.client("iam", server.url)
        iam.create_instance_profile(InstanceProfileName="bosh-profile")
        yield account
    finally:
        server.stop()


def test_aws_online(moto_account, tmp_path):
    from tests.aws import moto_env

    config = moto_account.write_config(tmp_path / "cpi.json")
    good = {
        "azs": [{"name": "z1", "cloud_properties": {"availability_zone": moto_env.ZONE}}],
        "vm_types": [{"name": "web", "cloud_properties": {
            "instance_type": "m5.large", "key_name": moto_account.key_name,
            "security_groups": [moto_account.security_group_id, moto_account.extra_group_name],
            "iam_instance_profile": "bosh-profile"}}],
        "disk_types": [{"name": "d", "disk_size": 1024, "cloud_properties": {"type": "gp3"}}],
        "networks": [{"name": "default", "subnets": [{"range": "10.0.0.0/24", "az": "z1", "cloud_properties": {
            "subnet": moto_account.subnet_id, "security_groups": [moto_account.security_group_name]}}]}],
    }
    result = run(good, config, "--online", "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    bad = json.loads(json.dumps(good))
    bad["azs"][0]["cloud_properties"]["availability_zone"] = "us-east-1q"
    vm = bad["vm_types"][0]["cloud_properties"]
    vm.update(instance_type="m5.gigantic", key_name="nokey", iam_instance_profile="noprofile",
              security_groups=["sg-00000000deadbeef", "nosuchgroup"])
    bad["networks"][0]["subnets"][0]["cloud_properties"]["subnet"] = "subnet-0000deadbeef"
    result = run(bad, config, "--online", "--json", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr
    found = findings(result)
    assert found["networks[name=default].subnets[0].cloud_properties.subnet"] == \
        "subnet 'subnet-0000deadbeef' does not exist"
    vm_path = "vm_types[name=web].cloud_properties"
    assert found[f"{vm_path}.instance_type"].startswith("instance type 'm5.gigantic' does not exist")
    assert found[f"{vm_path}.security_groups[0]"].startswith("security group 'sg-00000000deadbeef' does not exist")
    assert found[f"{vm_path}.security_groups[1]"].startswith("security group 'nosuchgroup' does not exist")
    assert found[f"{vm_path}.key_name"].startswith("key pair 'nokey' does not exist")
    assert found.get(f"{vm_path}.iam_instance_profile"), result.stdout
    assert found[f"{vm_path}.iam_instance_profile"] == "IAM instance profile 'noprofile' does not exist"
    assert found["azs[name=z1].cloud_properties.availability_zone"].startswith(
        "availability zone 'us-east-1q' does not exist")
    assert moto_env.SECRET_ACCESS_KEY not in result.stdout + result.stderr
    assert "slim" not in result.stderr  # no warning about the model DescribeKeyPairs needs


def test_sizes_are_listed_in_natural_order(moto_account, tmp_path):
    """#32 (`cpi avail`, here for this module's moto): m5.12xlarge was listed before
    m5.2xlarge, the cloud sorting names as text; the numbers in a name now compare as
    numbers."""
    config = moto_account.write_config(tmp_path / "cpi.json")
    sizes = subprocess.run([sys.executable, "-m", "cpi.cli", "avail", "sizes", "--config", str(config),
                            "--filter", "m5.*", "--json", "--column", "name"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert sizes.returncode == 0, sizes.stderr
    names = [row["name"] for row in json.loads(sizes.stdout)]
    assert {"m5.2xlarge", "m5.4xlarge", "m5.12xlarge", "m5.24xlarge"} <= set(names), names
    assert names.index("m5.2xlarge") < names.index("m5.4xlarge") < names.index("m5.12xlarge") < \
        names.index("m5.24xlarge")


def test_a_cloud_without_online_checks_says_so():
    from cpi.clouds.base import Cloud
    from cpi.errors import NotImplemented as CpiNotImplemented
    from cpi.operator.cloud_config import check_online

    class Plugin(Cloud):
        name = "plugin"

    with pytest.raises(CpiNotImplemented, match="online checks are not implemented by the plugin cloud"):
        check_online(Plugin.__new__(Plugin), [])


# ---------------------------------------------------------------- online: the OpenStack loopback services


@pytest.fixture(scope="module")
def os_config(tmp_path_factory):
    from tests.openstack import target as os_target

    env = os_target.prepare()  # skips, saying why, without the services
    return env, os_target.write_config(tmp_path_factory.mktemp("openstack") / "cpi.json", env)


def test_openstack_online(os_config, tmp_path):
    env, config = os_config
    keypair = env["keypair"]["name"] if isinstance(env["keypair"], dict) else env["keypair"]
    group = env["security_groups"]["test"]["name"]
    good = {
        "azs": [{"name": "z1", "cloud_properties": {"availability_zone": env["availability_zone"]}}],
        "vm_types": [{"name": "small", "cloud_properties": {
            "instance_type": env["flavor"], "key_name": keypair, "security_groups": [group]}}],
        "disk_types": [{"name": "d", "disk_size": 1024, "cloud_properties": {"type": env["volume_type"]["name"]}}],
        "networks": [{"name": "default", "subnets": [{"range": env["subnet"]["cidr"], "az": "z1",
                                                      "cloud_properties": {"net_id": env["network"]["id"]}}]}],
    }
    result = run(good, config, "--online", "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    bad = json.loads(json.dumps(good))
    bad["vm_types"][0]["cloud_properties"].update(instance_type="m1.tinny", security_groups=["no-such-group"])
    bad["networks"][0]["subnets"][0]["cloud_properties"]["net_id"] = "00000000-0000-4000-8000-000000000000"
    bad["disk_types"][0]["cloud_properties"]["type"] = "no-such-type"
    result = run(bad, config, "--online", "--json", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr
    found = findings(result)
    assert found["networks[name=default].subnets[0].cloud_properties.net_id"] == (
        "network '00000000-0000-4000-8000-000000000000' does not exist")
    assert found["vm_types[name=small].cloud_properties.instance_type"] == (
        "flavor 'm1.tinny' does not exist, did you mean m1.tiny?")
    assert found["vm_types[name=small].cloud_properties.security_groups[0]"].startswith(
        "security group 'no-such-group' does not exist")
    assert found["disk_types[name=d].cloud_properties.type"].startswith("volume type 'no-such-type' does not exist")
    assert env["password"] not in result.stdout + result.stderr


def test_openstack_offline_network_types(tmp_path):
    config = tmp_path / "openstack.json"
    config.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": {"openstack": {
        "auth_url": "https://keystone.invalid:5000/v3", "username": "bosh", "api_key": SECRET,
        "project": "bosh", "domain": "Default"}}}}))
    doc = {
        "vm_types": [{"name": "small",
                      "cloud_properties": {"instance_type": "m1.small", "availability_zones": "nova"}}],
        "networks": [
            {"name": "dyn", "type": "dynamic", "cloud_properties": {"net_id": "n1", "security_group": ["x"]}},
            {"name": "vip", "type": "vip", "cloud_properties": {"net_id": "n1"}},
            {"name": "odd", "type": "manul"},
        ],
    }
    result = run(doc, config, "--json", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr
    found = findings(result)
    assert found["vm_types[name=small].cloud_properties.availability_zones"].startswith("wrong type: expected a list")
    assert found["networks[name=dyn].cloud_properties.security_group"] == \
        "unknown property, did you mean security_groups?" + IGNORES
    assert found["networks[name=vip].cloud_properties.net_id"] == "unknown property (nothing can be set here)" + IGNORES
    assert found["networks[name=odd].type"].startswith("must be one of manual, dynamic, vip")
    assert SECRET not in result.stdout + result.stderr


def test_required_key_set_by_an_extension_is_a_warning(tmp_path):
    doc = {"vm_types": [{"name": "m5.web", "cloud_properties": {"key_name": "bosh"}}],
           "vm_extensions": [{"name": "sized", "cloud_properties": {"instance_type": "m5.large"}}]}
    result = run(doc, aws_offline_config(tmp_path), "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    [warning] = json.loads(result.stdout)["findings"]
    assert warning["path"] == "vm_types[name=m5.web].cloud_properties.instance_type"
    assert warning["severity"] == "warning" and "vm_extensions[name=sized]" in warning["problem"]


def test_vsphere_managed_networks_are_checked_against_create_network_s_keys(tmp_path):
    """A managed network (made by create_network) may leave its subnets' ranges to the CPI,
    and its cloud_properties are create_network's, not a VM's network's."""
    config = tmp_path / "vsphere.json"
    config.write_text(json.dumps({"cloud": {"plugin": "vsphere", "properties": {"vsphere": {
        "host": "vcenter.invalid", "user": "bosh", "password": SECRET,
        "datacenters": [{"name": "DC0", "clusters": ["C0"], "datastore_pattern": "^ds",
                         "persistent_datastore_pattern": "^ds"}]}}}}))
    made = {"t0_router_id": "t0-1", "transport_zone_id": "tz-1", "ip_block_id": "block-1"}
    doc = {"networks": [
        {"name": "made", "type": "manual", "managed": True,
         "subnets": [{"netmask_bits": 26, "cloud_properties": made}]},
        {"name": "typo", "type": "manual", "managed": True, "subnets": [
            {"netmask_bits": 26, "cloud_properties": {"t0_router": "t0-1", "transport_zone_id": "tz-1"}}]},
        {"name": "plain", "type": "manual", "subnets": [{"cloud_properties": {"name": "VM Network"}}]},
    ]}
    result = run(doc, config, "--json", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr
    found = findings(result)
    assert not [path for path in found if path.startswith("networks[name=made]")], found
    assert found["networks[name=typo].subnets[0].cloud_properties.t0_router"].startswith(
        "unknown property, did you mean t0_router_id?"), found
    assert "networks[name=typo].subnets[0].cloud_properties.t0_router_id" in found
    assert found["networks[name=plain].subnets[0]"] == "missing range"


# ---------------------------------------------------------------- what the call itself would do (#32)

#: a line of the call's log naming a key it ignored: the path and the key it likely means
_IGNORED = re.compile(r"(?m)cpi\.validation: (\S+): unknown property ignored(, did you mean \S+\?)?")


def ignored_by_the_call(config: Path, method: str, *arguments) -> dict[str, str]:
    """{path: hint} of each key bin/cpi's own call leaves out, read off its log."""
    from tests.support.runner import Cpi

    response = Cpi(config).call(method, *arguments)
    assert response.error is None, response.error
    return {m.group(1): m.group(2) or "" for m in _IGNORED.finditer(response.log)}


def reported(result: subprocess.CompletedProcess) -> dict[str, str]:
    """validate's findings in cpi.json, by the path the call's log names."""
    prefix = "cpi.json: "
    return {path.removeprefix(prefix): problem for path, problem in findings(result).items() if path.startswith(prefix)}


def cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpi.cli", *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, input=stdin)


def plan_warnings(config: Path, method: str, *arguments) -> list[str]:
    """`cpi plan`'s warnings on stderr (the call's own, as its log words them)."""
    proc = cli("plan", method, *(json.dumps(a) for a in arguments), "--config", str(config))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    prefix = "cpi plan: warning: "
    return [line.removeprefix(prefix) for line in proc.stderr.splitlines() if line.startswith(prefix)]


def assert_validate_says_what_the_call_does(config: Path, method: str, *arguments) -> dict[str, str]:
    """Every key of cpi.json bin/cpi's call ignores is an error of `cpi validate`, with the
    same path and the same likely key, and no other; `cpi plan` of the call warns of each.
    Returns validate's {path: problem}."""
    ignored = ignored_by_the_call(config, method, *arguments)
    assert ignored, "the config holds no key the call ignores"
    result = cli("validate", "--config", str(config), "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    found = reported(result)
    assert set(found) == set(ignored), (found, ignored)
    for path, hint in ignored.items():
        assert found[path] == f"unknown property{hint}{IGNORES}"
    warned = plan_warnings(config, method, *arguments)
    assert [w.split(": unknown property ignored")[0] for w in warned] == list(ignored), warned
    return found


def test_local_cpi_json_keys_the_call_ignores_are_errors(tmp_path):
    """`stat_dir` passed `cpi validate` while the call used the default state dir: now each
    key the call leaves out is an error naming it and the key meant, at every level."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(state), "stat_dir": str(tmp_path / "elsewhere"),
                  "faults": [{"method": "create_vm", "tims": 1}]},
        "agent": {"ntpp": ["pool.ntp.org"], "password": SECRET},
        "audit": {"max_byte": 1024}, "agnet": {"mbus": "https://mbus:6868"}}}}))
    found = assert_validate_says_what_the_call_does(config, "has_vm", "vm-1")
    assert found["cloud.properties.agnet"].startswith("unknown property, did you mean agent?")
    assert found["cloud.properties.local.stat_dir"].startswith("unknown property, did you mean state_dir?")
    assert found["cloud.properties.local.faults[0].tims"].startswith("unknown property, did you mean times?")
    assert found["cloud.properties.audit.max_byte"].startswith("unknown property, did you mean max_bytes?")
    assert "cloud.properties.agent.password" in found

    # the table says the same, with the verdict; a cloud-config on stdin adds its own findings
    table = cli("validate", "--config", str(config))
    assert table.returncode == 1 and "did you mean state_dir?" in table.stdout and "6 errors" in table.stdout
    typo = yaml.safe_dump({"vm_types": [{"name": "small", "cloud_properties": {"rma": 1024}}]})
    both = cli("validate", "-", "--config", str(config), "--json", stdin=typo)
    assert both.returncode == 1
    assert set(reported(both)) == set(found)
    assert findings(both)["vm_types[name=small].cloud_properties.rma"] == (
        "unknown property, did you mean ram?" + IGNORES)
    assert SECRET not in table.stdout + both.stdout + both.stderr

    # validation.strict: the call refuses the file, and validate says so, naming the same key
    strict = json.loads(config.read_text())
    strict["cloud"]["properties"]["validation"] = {"strict": True}
    config.write_text(json.dumps(strict))
    result = cli("validate", "-", "--config", str(config), "--json", stdin=typo)
    assert result.returncode == 1, result.stdout + result.stderr
    problem = findings(result)["cpi.json"]
    assert "cloud.properties.local.stat_dir: unknown property, did you mean state_dir?" in problem
    from tests.support.runner import Cpi

    refused = Cpi(config).call("has_vm", "vm-1").error
    assert refused is not None and refused["message"] in problem
    assert not (tmp_path / "elsewhere").exists()


def test_aws_cpi_json_and_cloud_properties_keys_the_call_ignores(moto_account, tmp_path):
    config = moto_account.write_config(tmp_path / "cpi.json", defualt_key_name="bosh", max_retry=3)
    # the official aws_cpi job's sections no CPI acts on (registry, and stemcell beside aws)
    # are no finding; a misspelt section is, as its keys would be
    document = json.loads(config.read_text())
    document["cloud"]["properties"].update({"registry": {"endpoint": "http://127.0.0.1:25777", "user": "r"},
                                            "stemcell": {"kernel_id": "aki-1"}, "throtle": {}})
    config.write_text(json.dumps(document))
    found = assert_validate_says_what_the_call_does(config, "has_vm", "i-0123456789abcdef0")
    assert found["cloud.properties.throtle"].startswith("unknown property, did you mean throttle?")
    assert not any(path.startswith(("cloud.properties.registry", "cloud.properties.stemcell")) for path in found)
    assert found["cloud.properties.aws.defualt_key_name"].startswith("unknown property, did you mean default_key_name?")

    # a cloud_properties key: the plan of create_disk warns of it as the call's log does,
    # and validate reports it in the cloud-config, the same key meant
    warned = plan_warnings(config, "create_disk", 1024, {"tpye": "gp3"}, None)
    assert "disk_type cloud_properties.tpye: unknown property ignored, did you mean type?" in " ".join(warned)
    result = run({"disk_types": [{"name": "d", "disk_size": 1024, "cloud_properties": {"tpye": "gp3"}}]},
                 config, "--json", tmp_path=tmp_path)
    assert findings(result)["disk_types[name=d].cloud_properties.tpye"].startswith(
        "unknown property, did you mean type? (every call ignores it")
    assert moto_env_secret() not in result.stdout + result.stderr


def moto_env_secret() -> str:
    from tests.aws import moto_env

    return moto_env.SECRET_ACCESS_KEY


def test_a_yaml_error_is_one_line_naming_file_line_and_column(tmp_path):
    path = tmp_path / "cloud-config.yml"
    path.write_text("vm_types:\n- name: a\n  cloud_properties: {cpu: 1\nnetworks: []\n")
    proc = cli("validate", str(path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [(
        f"cpi validate: error: not valid YAML: {path}:4:9: expected ',' or '}}', but got ':' "
        "(while parsing a flow mapping at 3:21)")], proc.stderr
    piped = cli("validate", "-", stdin="a: [1,\n")
    assert piped.returncode == 2 and len(piped.stderr.splitlines()) == 1
    assert piped.stderr.startswith("cpi validate: error: not valid YAML: <stdin>:2:1: "), piped.stderr
