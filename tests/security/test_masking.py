"""No secret in any form, and masking that stays readable (issue 33, point 4), through the
real executables: the operator CLI (`python -m cpi.cli`) and bin/cpi, as subprocesses.

- a config whose aws section is invalid and carries a secret: every operator command that
  reads it says what is wrong (key and reason) and shows the secret nowhere, as bin/cpi;
- the Basic-auth form of a password (base64 of user:password, standard and URL-safe, padded
  or not), echoed by a server on 127.0.0.1 in its error, is masked like the password;
- a password too short or too common to mask by value (`unused`, one letter) leaves
  `cpi.rpc` and the cids that hold it intact, and `cpi validate` warns of it by its key.
"""

from __future__ import annotations

import base64
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_CPI = str(REPO / "bin" / "cpi")
SECRET = "supersecret-Mask-Value-33"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpi.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=_env())


def call(config: Path, method: str, *arguments) -> tuple[dict, str]:
    """bin/cpi's response and stderr for one request."""
    request = json.dumps({"method": method, "arguments": list(arguments), "context": {"director_uuid": "d"}})
    done = subprocess.run([BIN_CPI, str(config)], input=request, capture_output=True, text=True, timeout=120,
                          env=_env())
    return json.loads(done.stdout), done.stderr


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def invalid_aws(tmp_path_factory) -> Path:
    """An aws section both invalid (static keys with credentials_source env_or_profile) and
    carrying a secret, as pydantic echoes the whole section when it says so."""
    path = tmp_path_factory.mktemp("invalid") / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": "aws", "properties": {"aws": {
        "secret_access_key": SECRET, "credentials_source": "env_or_profile", "region": "us-east-1",
        "access_key_id": "AKIAMASKTEST", "default_key_name": "k"}}}}))
    return path


COMMANDS = {
    "list": ["list", "vms"],
    "show": ["show", "vm", "i-0123456789abcdef0"],
    "avail": ["avail", "zones"],
    "audit": ["audit"],
    "validate": ["validate"],
    "orphans": ["orphans", "--director-uuid", "d", "--known", "KNOWN"],
    "certify": ["certify"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_invalid_section_is_named_without_its_secret(command, invalid_aws, tmp_path):
    known = tmp_path / "known.txt"
    known.write_text("vm-1\n")
    args = [str(known) if a == "KNOWN" else a for a in COMMANDS[command]]
    done = cli(*args, "--config", str(invalid_aws), cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert SECRET not in out and SECRET[:12] not in out, out
    assert "cloud.properties.aws" in out and "credentials_source env_or_profile" in out, out
    assert '"secret_access_key": "<redacted>"' in out, out  # by field, in the echo of the section


def test_bin_cpi_masks_the_same_error(invalid_aws):
    response, stderr = call(invalid_aws, "has_vm", "i-0123456789abcdef0")
    text = json.dumps(response) + stderr
    assert SECRET not in text and "credentials_source env_or_profile" in response["error"]["message"]


class EchoingKeystone:
    """Keystone's token endpoint as a misbehaving proxy in front of it answers: 401, with the
    Basic-auth form of the password it was sent (base64 of `user:password`) in its message,
    in the form `form` names."""

    FORMS: ClassVar[dict[str, Any]] = {
        "standard": lambda token: token,
        "unpadded": lambda token: token.rstrip("="),
        "urlsafe": lambda token: token.replace("+", "-").replace("/", "_").rstrip("="),
    }

    def __init__(self) -> None:
        standin = self
        self.form = "standard"
        self.echoed: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                user = body["auth"]["identity"]["password"]["user"]
                raw = base64.b64encode(f"{user['name']}:{user['password']}".encode()).decode()
                token = EchoingKeystone.FORMS[standin.form](raw)
                standin.echoed.append(token)
                answer = json.dumps({"error": {"code": 401, "title": "Unauthorized",
                                               "message": f"upstream refused Authorization: Basic {token}"}}).encode()
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v3"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def keystone():
    standin = EchoingKeystone()
    yield standin
    standin.server.shutdown()
    standin.server.server_close()


# "?>>" and "?~~" make base64's "+" and "/" appear, so the URL-safe form differs
@pytest.mark.parametrize("form,password", [("standard", "Adm1n-echo-pw?>>"), ("unpadded", "Adm1n-echo-pw?~~1"),
                                           ("urlsafe", "Adm1n-echo-pw?>>"), ("standard", "x")])
def test_the_basic_auth_form_of_a_password_is_masked(form, password, keystone, tmp_path):
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "openstack", "properties": {"openstack": {
        "auth_url": keystone.url, "username": "admin", "api_key": password, "project": "p", "domain": "Default",
        "default_key_name": "k", "default_security_groups": ["default"]}}}}))
    keystone.form = form
    response, stderr = call(config, "has_vm", "vm-1")
    listed = cli("list", "vms", "--config", str(config), cwd=tmp_path)
    assert keystone.echoed, "the stand-in was never asked"
    for text in (json.dumps(response) + stderr, listed.stdout + listed.stderr):
        assert "upstream refused Authorization: Basic <redacted>" in text, text
        for token in set(keystone.echoed):
            assert token not in text and token[:12] not in text, text
    keystone.echoed.clear()


@pytest.fixture
def short_secrets(tmp_path) -> Path:
    """A local cloud whose agent's passwords are `unused` (bosh-deployment's
    secondary-OpenStack ops file passes that word) and one letter (`p`, in the mbus URL)."""
    path = tmp_path / "cpi.json"
    path.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(tmp_path / "state")},
        "agent": {"mbus": "nats://nats:p@10.0.0.6:4222",
                  "blobstore": {"provider": "dav", "options": {"user": "agent", "password": "unused"}}}}}}))
    return path


def test_a_short_or_common_secret_leaves_the_rest_readable(short_secrets, tmp_path):
    response, stderr = call(short_secrets, "set_vm_metadata", "vm-unused-1", {"name": "unused"})
    assert response["error"]["message"] == "VM 'vm-unused-1' not found", response
    assert "cpi.rpc: 'set_vm_metadata' (api_version 1, 2 arguments)" in response["log"], response["log"]
    assert "c<redacted>" not in stderr and "cpi.rpc" in stderr, stderr
    shown = cli("show", "vm", "vm-unused-1", "--config", str(short_secrets), cwd=tmp_path)
    assert "vm-unused-1" in shown.stdout + shown.stderr and "<redacted>" not in shown.stdout + shown.stderr


def test_validate_warns_of_a_secret_too_short_to_mask(short_secrets, tmp_path):
    done = cli("validate", "--config", str(short_secrets), "--json", cwd=tmp_path)
    findings = json.loads(done.stdout)["findings"]
    warned = [f for f in findings if f["severity"] == "warning" and "too short to mask" in f["problem"]]
    assert sorted(f["problem"].split(":")[0] for f in warned) == ["mbus", "password"], findings
    assert all("unused" not in f["problem"] and "unused" not in f["path"] for f in warned), findings
    assert done.returncode == 0, done.stdout + done.stderr  # a warning, not an error
