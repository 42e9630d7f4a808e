"""Every input, however wrong, gets exactly one valid JSON response and exit code 0.

bin/cpi runs as the director runs it: environment wiped to PATH, no HOME, cwd "/".
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.runner import BIN_CPI, COLD_ENV, DIRECTOR_ENV, ROOT, WARM_ENV, WIPED_ENV, Cpi, run_raw


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": "local",
                                          "properties": {"local": {"state_dir": str(tmp_path / "state")}}}}))
    return path


BAD_INPUTS = {
    "empty stdin": (b"", "Bosh::Clouds::CpiError", "empty"),
    "whitespace": (b"  \n ", "Bosh::Clouds::CpiError", "empty"),
    "invalid json": (b'{"method": "info",', "Bosh::Clouds::CpiError", "valid JSON"),
    "json array": (b'[{"method": "info"}]', "Bosh::Clouds::CpiError", "not a JSON array"),
    "json string": (b'"info"', "Bosh::Clouds::CpiError", "not a JSON string"),
    "json null": (b"null", "Bosh::Clouds::CpiError", "not a JSON null"),
    "invalid utf-8": (b'{"method": "\xff\xfe"}', "Bosh::Clouds::CpiError", "valid JSON"),
    "missing method": (b'{"arguments": [], "context": {}}', "Bosh::Clouds::CpiError", "'method'"),
    "method not a string": (b'{"method": 42, "arguments": []}', "Bosh::Clouds::CpiError", "method"),
    "arguments not a list": (b'{"method": "info", "arguments": {"a": 1}}',
                             "Bosh::Clouds::CpiError", "'arguments' as a JSON array, not a JSON object"),
    "context not an object": (b'{"method": "info", "arguments": [], "context": []}',
                              "Bosh::Clouds::CpiError", "'context'"),
    "api_version not an int": (b'{"method": "info", "arguments": [], "api_version": "2"}',
                               "Bosh::Clouds::CpiError", "api_version"),
    "unknown method": (b'{"method": "make_coffee", "arguments": []}', "Bosh::Clouds::NotImplemented", "make_coffee"),
    "too few arguments": (b'{"method": "create_disk", "arguments": [1024]}',
                          "Bosh::Clouds::CpiError", "create_disk takes 2 to 3 arguments"),
    "too many arguments": (b'{"method": "has_vm", "arguments": ["a", "b"]}',
                           "Bosh::Clouds::CpiError", "has_vm takes 1 argument (vm_cid), got 2"),
    "wrong argument type": (b'{"method": "create_disk", "arguments": ["big", {}, null]}',
                            "Bosh::Clouds::CpiError", "create_disk argument 1 (size)"),
    "float size": (b'{"method": "create_disk", "arguments": [1.5, {}, null]}',
                   "Bosh::Clouds::CpiError", "argument 1 (size)"),
    "zero size": (b'{"method": "resize_disk", "arguments": ["disk-1", 0]}',
                  "Bosh::Clouds::CpiError", "resize_disk argument 2 (new_size): Input should be greater than 0"),
    "empty cid": (b'{"method": "delete_vm", "arguments": [""]}', "Bosh::Clouds::CpiError", "argument 1 (vm_cid)"),
    "networks not an object": (b'{"method": "create_vm", "arguments": ["a", "s", {}, [], [], {}]}',
                               "Bosh::Clouds::CpiError", "argument 4 (networks)"),
    "bad network ip": ((b'{"method": "create_vm", "arguments": ["a", "s", {}, '
                        b'{"n": {"type": "manual", "ip": "10.0.0.999"}}, [], {}]}'),
                       "Bosh::Clouds::CpiError", "argument 4 (networks).n.ip"),
    "bad network type": (b'{"method": "create_vm", "arguments": ["a", "s", {}, {"n": {"type": "weird"}}, [], {}]}',
                         "Bosh::Clouds::CpiError", "argument 4 (networks).n.type"),
    "configure_networks": (b'{"method": "configure_networks", "arguments": ["vm-1", {}]}',
                           "Bosh::Clouds::NotSupported", "configure_networks"),
    "create_network": (b'{"method": "create_network", "arguments": [{"type": "manual"}]}',
                       "Bosh::Clouds::NotImplemented", "create_network"),
    "delete_network": (b'{"method": "delete_network", "arguments": ["net-1"]}',
                       "Bosh::Clouds::NotImplemented", "delete_network"),
    "NaN": (b'{"method": "has_vm", "arguments": [NaN]}', "Bosh::Clouds::CpiError", "NaN is not a JSON number"),
    "Infinity": (b'{"method": "has_vm", "arguments": [Infinity]}',
                 "Bosh::Clouds::CpiError", "Infinity is not a JSON number"),
    "float overflow": (b'{"method": "create_disk", "arguments": [1e400, {}]}', "Bosh::Clouds::CpiError", "too large"),
    "integer of 5000 digits": (b'{"method": "create_disk", "arguments": [' + b"7" * 5000 + b', {}]}',
                               "Bosh::Clouds::CpiError", "5000 digits"),
    "size of 2^31 MiB": (b'{"method": "create_disk", "arguments": [2147483648, {}]}',
                         "Bosh::Clouds::CpiError", "argument 1 (size)"),
    "resize to 2^40 MiB": (b'{"method": "resize_disk", "arguments": ["disk-1", 1099511627776]}',
                           "Bosh::Clouds::CpiError", "argument 2 (new_size)"),
    "lone surrogate": (b'{"method": "has_vm", "arguments": ["\\udc80"]}', "Bosh::Clouds::CpiError", "surrogate"),
    "two documents": (b'{"method": "info"} {"method": "info"}', "Bosh::Clouds::CpiError", "Extra data"),
    "IPv6 zone with a NUL": ((b'{"method": "create_vm", "arguments": ["a", "s", {}, '
                              b'{"n": {"type": "manual", "ip": "fe80::1%\\u0000"}}, [], {}]}'),
                             "Bosh::Clouds::CpiError", "argument 4 (networks).n.ip"),
    "nested 500 deep": (b'{"method": "create_vm", "arguments": ["a", "s", {}, {"n": {"x": ' + b"[" * 500 + b"]" * 500
                        + b'}}, [], {}]}',
                        "Bosh::Clouds::CpiError", "nested deeper than 64"),
    "nested 100000 deep": (b'{"method": "info", "arguments": [' + b"[" * 100000 + b"]" * 100000 + b']}',
                           "Bosh::Clouds::CpiError", "nested deeper than 64"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_gets_one_clear_error(name, config):
    stdin, wire_type, words = BAD_INPUTS[name]
    response = run_raw(stdin, config)
    assert response.returncode == 0
    assert response.error["type"] == wire_type, response.doc
    assert words in response.error["message"], response.error["message"]
    assert response.error["ok_to_retry"] is False
    assert "Traceback" not in response.error["message"]


def test_state_dir_that_is_a_file_is_a_cpi_error_naming_it(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the state dir should be")
    path = tmp_path / "cpi.json"
    for state_dir in (blocker, blocker / "state", "relative/state", ""):
        path.write_text(json.dumps({"cloud": {"properties": {"local": {"state_dir": str(state_dir)}}}}))
        response = run_raw(json.dumps({"method": "has_vm", "arguments": ["vm-1"], "context": {}}).encode(), path)
        assert response.returncode == 0
        assert response.error["type"] == "Bosh::Clouds::CpiError", (state_dir, response.error)
        assert "state_dir" in response.error["message"]
        assert "Traceback" not in response.log


def test_stdout_is_exactly_one_json_document(config):
    response = run_raw(b'{"method":"info","arguments":[],"context":{}}', config)
    assert response.raw.count("\n") == 1 and response.raw.endswith("\n")
    assert json.loads(response.raw) == response.doc


def test_info_without_api_version_or_context(config):
    response = run_raw(b'{"method":"info","arguments":[]}', config)
    assert response.doc["result"] == {"stemcell_formats": ["dummy", "local-raw", "local-light"], "api_version": 3}


def test_info_same_whatever_api_version_and_context(config):
    answers = {
        json.dumps(run_raw(json.dumps({"method": "info", "arguments": [], "api_version": v, "context": ctx}).encode(),
                           config).doc["result"])
        for v in (1, 2, 3)
        for ctx in ({}, {"director_uuid": "x", "request_id": "cpi-1", "formats": ["a"], "cvcpkey": "v"})
    }
    assert len(answers) == 1


def test_no_config_path_uses_local_cloud_defaults():
    # No HOME either (a director sets none): the default state dir comes from the password
    # database. info writes nothing there.
    response = run_raw(b'{"method":"info","arguments":[],"context":{}}', None, env=WIPED_ENV)
    assert response.doc["result"]["stemcell_formats"] == ["dummy", "local-raw", "local-light"]


def test_extra_command_line_arguments_are_an_error(config):
    response = run_raw(b'{"method":"info","arguments":[]}', config, args=["surplus"])
    assert response.returncode == 0
    assert "usage" in response.error["message"]


@pytest.mark.parametrize(
    "content, words, info_reads_it",
    [
        ("{not json", "not valid JSON", True),
        ('["a"]', "must hold a JSON object", True),
        ('{"cloud": {"plugin": "nimbus"}}', "unknown cloud plugin 'nimbus'; available: aws, local, openstack, vsphere",
         True),
        ('{"cloud": {"plugin": 5}}', "cloud.plugin: Input should be a valid string", True),
        ('{"cloud": {"properties": {"debug": {"cpi": {"api_version": "three"}}}}}',
         "cloud.properties.debug.cpi.api_version", True),
        ('{"cloud": {"plugin": "local", "properties": {"local": {"state_dir": 5}}}}',
         "cloud.properties.local.state_dir", False),
        ('{"cloud": {"plugin": "local", "properties": {"validation": {"strict": true}, "local": {"stat_dir": "/x"}}}}',
         "cloud.properties.local.stat_dir: unknown property", False),
        ('{"cloud": {"plugin": "local", "properties": {"validation": {"strickt": true}}}}',
         "cloud.properties.validation.strickt: unknown property", False),
        ('{"cloud": {"plugin": "local", "properties": {"agent": {"ntp": "pool.ntp.org"}}}}',
         "cloud.properties.agent.ntp", False),
        ('{"cloud": {"plugin": "local", "properties": {"local": {"faults": [{"times": 1}]}}}}',
         "cloud.properties.local.faults[0].method: Field required", False),
        ('{"clouds": {}}', "clouds: unknown property", True),
    ],
)
def test_bad_config_names_the_field(tmp_path, content, words, info_reads_it):
    """Every call that uses the config names what is wrong in it. `info` reads only the
    plugin and debug.cpi.api_version (it runs before every operation and must stay cheap,
    issue #12): a mistake elsewhere is named by the next call, not by `info`."""
    path = tmp_path / "cpi.json"
    path.write_text(content)
    response = run_raw(b'{"method":"has_vm","arguments":["vm-1"],"context":{}}', path)
    assert response.returncode == 0
    assert response.error["type"] == "Bosh::Clouds::CpiError"
    assert words in response.error["message"]
    info = run_raw(b'{"method":"info","arguments":[],"context":{}}', path)
    if info_reads_it:
        assert info.error["type"] == "Bosh::Clouds::CpiError" and words in info.error["message"]
    else:
        assert info.doc["result"]["stemcell_formats"] == ["dummy", "local-raw", "local-light"]


def test_an_unknown_config_key_is_left_out_with_a_warning(tmp_path):
    """A cpi.json copied from the official CPI's job may hold keys this CPI does not know:
    the call goes on, and its log names each key and the closest known one."""
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(tmp_path / "state"), "stat_dir": "/x"}}}}))
    response = run_raw(b'{"method":"has_vm","arguments":["vm-1"],"context":{}}', path)
    assert response.error is None and response.result is False
    assert "cloud.properties.local.stat_dir: unknown property ignored, did you mean state_dir?" in response.log


def test_missing_config_file(tmp_path):
    response = run_raw(b'{"method":"info","arguments":[]}', tmp_path / "nope.json")
    assert response.error["type"] == "Bosh::Clouds::CpiError"
    assert "nope.json" in response.error["message"]


def test_context_may_not_override_commands_or_paths(tmp_path, config):
    """A cpi-config (sent in the context) must not choose what the CPI runs or where it
    writes: agent_command and state_dir in the context are ignored, and the log says so."""
    other = tmp_path / "other-state"
    image = tmp_path / "image"
    image.write_bytes(b"x")
    planted = tmp_path / "planted"
    response = Cpi(config).call("create_stemcell", str(image), {}, context={
        "state_dir": str(other), "agent_command": ["/bin/sh", "-c", f"touch {planted}"]})
    stemcell_cid = response.result
    assert (tmp_path / "state" / "stemcells" / stemcell_cid / "stemcell.json").exists()
    assert not other.exists() and not planted.exists()
    assert "context key 'state_dir' is ignored" in response.log
    assert "context key 'agent_command' is ignored" in response.log


def test_info_answers_the_same_whatever_the_context_holds(config):
    plain = Cpi(config)("info")
    assert Cpi(config)("info", context={"lock_timeout": "not a number", "state_dir": 5}) == plain


def test_request_id_is_logged(config):
    response = Cpi(config).call("has_vm", "vm-x", context={"request_id": "cpi-987654"})
    assert "[cpi-987654]" in response.log and "[cpi-987654]" in response.stderr


def test_missing_request_id_and_stemcell_api_version_tolerated(config):
    stdin = json.dumps({"method": "has_vm", "arguments": ["vm-x"], "context": {"director_uuid": "u"}, "api_version": 2})
    assert run_raw(stdin.encode(), config).doc["result"] is False


def test_secrets_never_leak(tmp_path):
    """Config secrets (mbus password), env.bosh.password and a secret sent in context never
    reach stdout or stderr, even when a message would echo them."""
    secrets = ["mbus-pw-8c1f2e", "bosh-password-77d0", "context-secret-55aa"]
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(tmp_path / "state"), "faults": [
            {"method": "create_vm", "message": f"echo {secrets[0]} {secrets[1]} {secrets[2]}"}]},
        "agent": {"mbus": f"https://mbus:{secrets[0]}@127.0.0.1:6868"}}}}))
    env = {"bosh": {"password": secrets[1], "mbus": {"cert": {"private_key": "-----BEGIN KEY-----abc"}}}}
    request = {"method": "create_vm", "arguments": ["a", "sc-x", {}, {"n": {"type": "dynamic"}}, [], env],
               "context": {"director_uuid": "u", "secret_access_key": secrets[2]}, "api_version": 2}
    response = run_raw(json.dumps(request).encode(), path)
    assert response.error["message"].startswith("echo <redacted> <redacted> <redacted>")
    for secret in [*secrets, "-----BEGIN KEY-----abc"]:
        assert secret not in response.raw
        assert secret not in response.stderr


def test_bin_cpi_without_a_python_env_still_answers_json(tmp_path):
    """A copy of bin/cpi with no interpreter beside it reports that, as JSON, exit 0."""
    (tmp_path / "bin").mkdir()
    copy = tmp_path / "bin" / "cpi"
    copy.write_bytes(BIN_CPI.read_bytes())
    copy.chmod(0o755)
    env = dict(DIRECTOR_ENV, BOSH_PACKAGES_DIR=str(tmp_path / "nothing"))
    proc = subprocess.run([str(copy)], input=b'{"method":"info"}', capture_output=True, env=env, cwd="/")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert doc["result"] is None and "no Python environment" in doc["error"]["message"]


@pytest.mark.parametrize("plugin", ["local", "aws", "openstack", "vsphere"])
def test_info_imports_no_cloud_sdk(tmp_path, plugin):
    """`info` runs before every call: it must not load boto3, openstacksdk or pyVmomi."""
    minimal = {"local": {}, "aws": {"region": "us-east-1", "credentials_source": "env_or_profile"},
               "openstack": {"auth_url": "http://127.0.0.1:5000/v3", "username": "u", "api_key": "k", "project": "p",
                             "domain": "default"},
               "vsphere": {"host": "vc", "user": "u", "password": "p",
                           "datacenters": [{"name": "dc", "clusters": ["c"], "datastore_pattern": "ds",
                                            "persistent_datastore_pattern": "ds"}]}}[plugin]
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": plugin, "properties": {plugin: minimal}}}))
    python = ROOT / ".venv" / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-X", "importtime", "-c",
         "import sys; sys.path.insert(0, sys.argv.pop(1)); from cpi.entry import main; sys.exit(main())",
         str(ROOT), str(path)],
        input=b'{"method":"info","arguments":[],"context":{}}', capture_output=True, env=DIRECTOR_ENV, cwd="/",
    )
    doc = json.loads(proc.stdout)
    if doc["error"] and "not available in this build" in doc["error"]["message"]:
        pytest.skip(f"the {plugin} cloud is not in this build yet")
    assert doc["error"] is None, doc
    imported = {line.split("|")[-1].strip()
                for line in proc.stderr.decode().splitlines() if line.startswith("import time:")}
    heavy = {m for m in imported if m.split(".")[0] in ("boto3", "botocore", "openstack", "keystoneauth1", "pyVmomi",
                                                                  "pycdlib")}
    assert not heavy, f"info imported {sorted(heavy)}"


def test_debug_api_version_caps_info(tmp_path):
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"properties": {"local": {"state_dir": str(tmp_path / "s")},
                                                          "debug": {"cpi": {"api_version": 2}}}}}))
    assert Cpi(path)("info")["api_version"] == 2
    path.write_text(json.dumps({"cloud": {"properties": {"debug": {"cpi": {"api_version": 9}}}}}))
    assert "cloud.properties.debug.cpi.api_version" in Cpi(path).call("info").error["message"]


def test_log_level_from_environment(config):
    quiet = run_raw(b'{"method":"has_vm","arguments":["vm-x"]}', config,
                    env=dict(DIRECTOR_ENV, CPI_LOG_LEVEL="warning"))
    assert quiet.doc["result"] is False and quiet.log == ""
    bad = run_raw(b'{"method":"has_vm","arguments":["vm-x"]}', config, env=dict(DIRECTOR_ENV, CPI_LOG_LEVEL="loud"))
    assert bad.error["type"] == "Bosh::Clouds::CpiError" and "CPI_LOG_LEVEL" in bad.error["message"]


def test_closed_stdin_gets_the_empty_stdin_error(config):
    proc = subprocess.run([str(BIN_CPI), str(config)], stdin=None, capture_output=True, env=DIRECTOR_ENV, cwd="/",
                          preexec_fn=lambda: os.close(0), timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["error"]["type"] == "Bosh::Clouds::CpiError" and "stdin was empty" in doc["error"]["message"]


def test_closed_stdout_and_stderr_still_exit_0(config):
    proc = subprocess.run([str(BIN_CPI), str(config)], input=b'{"method": "info"}', capture_output=False,
                          env=DIRECTOR_ENV, cwd="/", preexec_fn=lambda: (os.close(1), os.close(2)), timeout=60)
    assert proc.returncode == 0


@pytest.mark.parametrize("size", [80_000, 10_000_000])
def test_huge_cids_get_the_not_found_answers(config, size):
    """Over 255 bytes no cloud issues a cid: has_vm false, deletes null, others not found;
    a 10 MB request is answered (in seconds, linear in its size; bench/wire.py measures)."""
    cid = "a" * size
    for method, arguments, expected in [("has_vm", [cid], False), ("has_disk", [cid], False),
                                        ("delete_vm", [cid], None), ("delete_disk", [cid], None),
                                        ("delete_snapshot", [cid], None), ("delete_stemcell", [cid], None)]:
        response = run_raw(json.dumps({"method": method, "arguments": arguments}).encode(), config, timeout=60)
        assert response.error is None and response.doc["result"] is expected, response.error
        assert len(response.raw) < 20_000
    response = run_raw(json.dumps({"method": "reboot_vm", "arguments": [cid]}).encode(), config, timeout=60)
    assert response.error["type"] == "Bosh::Clouds::VMNotFound" and len(response.error["message"]) < 200
    response = run_raw(json.dumps({"method": "attach_disk", "arguments": ["vm-1", "d\n" * 200]}).encode(), config)
    assert response.error["type"] in ("Bosh::Clouds::VMNotFound", "Bosh::Clouds::DiskNotFound")


def test_a_request_500_deep_creates_nothing(config, tmp_path):
    image = tmp_path / "image"
    image.write_bytes(b"x")
    stemcell_cid = Cpi(config)("create_stemcell", str(image), {})
    deep: object = "leaf"
    for _ in range(500):
        deep = [deep]
    response = Cpi(config).call("create_vm", "agent-1", stemcell_cid, {},
                                {"n": {"type": "dynamic", "extra": deep}}, [], {})
    assert response.error["type"] == "Bosh::Clouds::CpiError"
    assert not any((tmp_path / "state" / "vms").iterdir())


def test_config_file_that_is_not_utf8_is_a_cpi_error(tmp_path):
    path = tmp_path / "cpi.json"
    path.write_bytes(b'{"cloud": {"plugin": "local", "properties": {"local": {"state_dir": "/tmp/\xff"}}}}')
    response = run_raw(b'{"method": "info"}', path)
    assert response.error["type"] == "Bosh::Clouds::CpiError"
    assert "is not valid JSON: not UTF-8" in response.error["message"] and "cpi.json" in response.error["message"]


def test_stemcell_tags_of_any_json_type_are_stored_as_strings(config, tmp_path):
    """The v3 director sends tags as given in the manifest; a number once failed validation
    after the stemcell directory was made."""
    image = tmp_path / "image"
    image.write_bytes(b"x")
    stemcell_cid = Cpi(config)("create_stemcell", str(image), {}, {"tags": {"build": 42, "lts": True, "team": "cpi"}},
                               api_version=3)
    record = json.loads((tmp_path / "state" / "stemcells" / stemcell_cid / "stemcell.json").read_text())
    assert record["tags"] == {"build": "42", "lts": "true", "team": "cpi"}


@pytest.mark.parametrize("where, properties, method, arguments, context", [
    ("cloud.properties.local.state_dir", {"local": {"state_dir": "/tmp/st\0ate"}}, "has_disk", ["disk-1"], {}),
    ("cloud.properties.throttle.state_dir", {"throttle": {"state_dir": "/tmp/a\0b"}}, "create_disk", [1, {}, None], {}),
    ("cloud.properties.audit.path", {"audit": {"path": "/tmp/a\0b"}}, "create_disk", [1, {}, None], {}),
    ("cloud.properties.local.agent_command[1]", {"local": {"agent_command": ["/bin/sh", "-c\0"]}}, "has_vm",
     ["vm-1"], {}),
    ("create_stemcell argument 1 (image_path)", {}, "create_stemcell", ["/tmp/x\0y", {}], {}),
    ("context.ec2_endpoint",
     {"aws": {"region": "us-east-1", "access_key_id": "AKIA1", "secret_access_key": "s3cr3t-k"}},
     "has_vm", ["i-0123456789abcdef0"], {"ec2_endpoint": "http://127.0.0.1\0:9", "secret_access_key": "own-s3cr3t"}),
], ids=["state_dir", "throttle", "audit", "agent_command", "image_path", "context"])
def test_a_nul_byte_that_would_reach_the_os_is_a_cpi_error_naming_the_field(tmp_path, where, properties, method,
                                                                           arguments, context):
    """Today: 'unexpected ValueError: embedded null byte' from deep inside the call."""
    plugin = "aws" if "aws" in properties else "local"
    sections = {"local": {"state_dir": str(tmp_path / "state")}} if plugin == "local" else {}
    for name, section in properties.items():
        sections[name] = {**sections.get(name, {}), **section}
    if plugin == "local":
        sections["local"] = {"state_dir": str(tmp_path / "state"), **sections["local"]}
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": plugin, "properties": sections}}))
    response = Cpi(config).call(method, *arguments, context=context)
    assert response.error is not None and response.error["type"] == "Bosh::Clouds::CpiError", response.error
    assert where in response.error["message"] and "NUL byte" in response.error["message"]
    assert "unexpected" not in response.error["message"]


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_request_that_never_ends_gets_one_answer(config, warm):
    """A writer that never stops (`< /dev/zero`) is read up to the request cap and answered,
    warm or cold, instead of being read until memory runs out."""
    from cpi import rpc
    from cpi.warm import where

    assert where.MAX_STDIN == rpc.REQUEST_LIMIT + 1
    env = WARM_ENV if warm else COLD_ENV
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([str(BIN_CPI), str(config)], stdin=zero, capture_output=True, env=env, cwd="/",
                              timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in proc.stdout
    doc = json.loads(proc.stdout)
    assert doc["error"]["type"] == "Bosh::Clouds::CpiError", doc["error"]
    assert "at most 32 MiB" in doc["error"]["message"]
