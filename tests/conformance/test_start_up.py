"""What a call costs before it does anything (issue #12): `info` runs before every director
operation and answers from the raw config with a handful of light modules (no pydantic, no
logging, no re, no cloud); every call skips `site` and the checkout's editable finder.

Each test runs bin/cpi's own interpreter command line (-I -S) under `-X importtime`.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.runner import COLD_ENV, ROOT, bin_cpi_argv, check_envelope, imported_modules, run_raw

#: Configs as a job template writes them, with secrets of the shapes that need escaped
#: forms masked (an AWS secret key holds "/" and "+", an mbus URL a password).
CONFIGS = {
    "local": {"local": {}, "agent": {"mbus": "https://mbus:mbus-pw-4f1e@0.0.0.0:6868"}},
    "aws": {"aws": {"region": "us-east-1", "access_key_id": "AKIAEXAMPLE",
                    "secret_access_key": "wJalr/XUtn+FEMI/K7MDENG"},
            "agent": {"mbus": "nats://nats:nats-pw-77@10.0.0.6:4222"}, "debug": {"cpi": {"api_version": 2}}},
    "openstack": {"openstack": {"auth_url": "http://127.0.0.1:5000/v3", "username": "u", "api_key": "k&ey p@ss",
                                "project": "p", "domain": "default"}},
    "vsphere": {"vsphere": {"host": "vc.example", "user": "administrator@vsphere.local", "password": "Vc/pw+42%",
                            "datacenters": [{"name": "dc", "clusters": ["c"], "datastore_pattern": "ds",
                                             "persistent_datastore_pattern": "ds"}]}},
}
FORMATS = {"local": ["dummy", "local-raw", "local-light"], "aws": ["aws-raw", "aws-light"],
           "openstack": ["openstack-raw", "openstack-qcow2", "openstack-light"],
           "vsphere": ["vsphere-ovf", "vsphere-ova"]}
#: Never on `info`'s path: each costs milliseconds of a budget of a few.
HEAVY = {"pydantic", "logging", "re", "json", "typing", "urllib.parse", "importlib.metadata", "dataclasses",
         "functools", "site", "boto3", "botocore", "openstack", "keystoneauth1", "pyVmomi", "pycdlib"}




def run_traced(config, request: dict) -> tuple[dict, set[str], str]:
    proc = subprocess.run(bin_cpi_argv(config, "-X", "importtime"), input=json.dumps(request).encode(),
                          capture_output=True, env=COLD_ENV, cwd="/", timeout=120)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    check_envelope(doc)
    return doc, imported_modules(proc.stderr.decode()), proc.stderr.decode()


@pytest.mark.parametrize("plugin", sorted(CONFIGS))
def test_info_of_a_builtin_cloud_imports_only_the_envelope(tmp_path, plugin):
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": plugin, "properties": CONFIGS[plugin]}}))
    request = {"method": "info", "arguments": [], "context": {"director_uuid": "d", "request_id": "cpi-123456"}}
    doc, modules, _ = run_traced(path, request)
    assert doc["error"] is None, doc
    assert doc["result"] == {"stemcell_formats": FORMATS[plugin], "api_version": 2 if plugin == "aws" else 3}
    assert not modules & HEAVY, sorted(modules & HEAVY)
    assert not {m for m in modules if m.startswith("cpi.clouds.")}, "a built-in cloud's formats need no import"


def test_a_call_runs_site_once_it_needs_the_dependencies(tmp_path):
    """bin/cpi starts without `site` (-S); a call that needs pydantic runs it then, as a
    plain start would have: the venv's site-packages, and sys.prefix the venv's."""
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"properties": {"local": {"state_dir": str(tmp_path / "state")}}}}))
    doc, modules, _ = run_traced(path, {"method": "has_vm", "arguments": ["vm-1"], "context": {}})
    assert doc["error"] is None and doc["result"] is False, doc
    assert {"site", "pydantic"} <= modules
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from cpi import site_packages; "
            "site_packages.enable(); import pydantic; print(sys.prefix); print(pydantic.__file__)")
    argv = bin_cpi_argv(None)
    proc = subprocess.run([*argv[:argv.index("-c") + 1], code, argv[-1]], capture_output=True, env=COLD_ENV,
                          cwd="/", timeout=60, check=True)
    prefix, pydantic_file = proc.stdout.decode().split()
    assert prefix == str(ROOT / ".venv") and pydantic_file.startswith(prefix + "/")


def test_info_masks_config_secrets_in_its_log(tmp_path):
    """The fast `info` logs through the same redaction as every call: a request_id that
    happens to hold a configured secret (here in each escaped form) is masked."""
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": CONFIGS["openstack"]}}))
    for request_id, secret_form in [("cpi-k&ey p@ss", "k&ey p@ss"), ("cpi-k%26ey%20p%40ss", "k%26ey%20p%40ss")]:
        response = run_raw(json.dumps({"method": "info", "arguments": [],
                                       "context": {"request_id": request_id}}).encode(), path)
        assert response.error is None
        assert "[cpi-<redacted>]" in response.log and secret_form not in response.log
        assert "[cpi-<redacted>]" in response.stderr and secret_form not in response.stderr


def test_info_of_an_unusual_config_shape_goes_through_the_models(tmp_path):
    """What the raw reading does not know (a string "2" where the models coerce an int, an
    empty debug section) gets the models' answer, the same as before `info` had a path of
    its own."""
    path = tmp_path / "cpi.json"
    for debug, expected in [({"cpi": {"api_version": "2"}}, 2), ([], 3), ({"cpi": {}}, 3),
                            ({"cpi": {"api_version": None}}, 3)]:
        path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"debug": debug}}}))
        response = run_raw(b'{"method": "info", "arguments": []}', path)
        assert response.error is None and response.doc["result"]["api_version"] == expected, (debug, response.doc)


def test_info_with_arguments_is_refused_as_before(tmp_path):
    response = run_raw(b'{"method": "info", "arguments": [1]}', None)
    assert response.error["type"] == "Bosh::Clouds::CpiError" and "info takes 0 arguments" in response.error["message"]


@pytest.mark.parametrize("context, words", [
    ({"request_id": 5}, "context.request_id: Input should be a valid string (got 5)"),
    ({"director_uuid": ["d"]}, "context.director_uuid: Input should be a valid string (got [\"d\"])"),
    ({"vm": "x"}, "context.vm: Input should be a valid dictionary (got 'x')"),
])
def test_a_context_field_of_the_wrong_type_is_named(context, words):
    for method, arguments in (("info", []), ("has_vm", ["vm-1"])):
        response = run_raw(json.dumps({"method": method, "arguments": arguments, "context": context}).encode(), None)
        assert response.error["type"] == "Bosh::Clouds::CpiError"
        assert response.error["message"] == f"invalid context: {words}", response.error


@pytest.mark.parametrize("request_, words", [
    ({"method": 5}, "invalid request: method: Input should be a valid string (got 5)"),
    ({"method": "info", "api_version": True},
     "invalid request: api_version: Input should be a valid integer (got true)"),
    ({"method": "info", "api_version": 2.0}, "invalid request: api_version: Input should be a valid integer (got 2.0)"),
    ({"method": None, "api_version": "2"}, ("invalid request: method: Input should be a valid string (got null); "
                                            "api_version: Input should be a valid integer (got '2')")),
])
def test_an_envelope_field_of_the_wrong_type_is_named(request_, words):
    response = run_raw(json.dumps(request_).encode(), None)
    assert response.error["type"] == "Bosh::Clouds::CpiError"
    assert response.error["message"] == words
