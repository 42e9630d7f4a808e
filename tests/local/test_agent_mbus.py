"""The built-in agent's HTTPS mbus as the director and bosh-cli use it: `ping`, `get_task`,
and an `update_settings` that rotates the mbus certificate, after which the agent exits on
purpose (bosh-agent's agent killer) and its supervisor starts it again with the new
certificate, as runit does on a stemcell."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl
import time
import urllib.error
import urllib.request

import pytest

from tests.lifecycle.local_target import LocalTarget, pid_alive
from tests.local.test_kills import free_port, marked_processes
from tests.local.test_supervisor import boots, supervised, until


def certificate_pair() -> dict[str, str]:
    """A CA and a server certificate it signed for 127.0.0.1, as env.bosh.mbus.cert holds them."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def pem(cert) -> str:
        return cert.public_bytes(serialization.Encoding.PEM).decode()

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mbus ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agent")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    private_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    return {"ca": pem(ca), "certificate": pem(leaf), "private_key": private_key}


class Mbus:
    """The director's side of the agent's HTTPS mbus: POST /agent, basic auth, the CA it trusts."""

    def __init__(self, port: int, password: str = "mbus-pw"):
        self.url = f"https://127.0.0.1:{port}/agent"
        self.auth = "Basic " + base64.b64encode(f"mbus:{password}".encode()).decode()

    def send(self, ca: str, method: str, *arguments) -> dict:
        body = json.dumps({"protocol": 3, "method": method, "arguments": list(arguments),
                           "reply_to": "director.test"}).encode()
        request = urllib.request.Request(self.url, data=body, method="POST",
                                         headers={"Authorization": self.auth, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=ssl.create_default_context(cadata=ca), timeout=5) as response:
            return json.loads(response.read())

    def answers(self, ca: str, method: str, *arguments) -> dict | None:
        """The answer, or None while the agent is down (restarting) or serves another certificate."""
        try:
            return self.send(ca, method, *arguments)
        except (urllib.error.URLError, ConnectionError, ssl.SSLError):
            return None


@pytest.fixture(scope="module")
def certificates():
    return certificate_pair(), certificate_pair()


def test_update_settings_rotates_the_mbus_certificate_through_a_restart(tmp_path, certificates):
    old, new = certificates
    port = free_port()
    local = LocalTarget(tmp_path)
    config = json.loads(local.config_path.read_text())
    config["cloud"]["properties"]["agent"]["mbus"] = f"https://mbus:mbus-pw@127.0.0.1:{port}"
    local.config_path.write_text(json.dumps(config))
    mbus = Mbus(port)
    try:
        stemcell = local.cpi("create_stemcell", *local.stemcell_args())
        vm_cid, _ = local.cpi("create_vm", "agent-m", stemcell, {}, local.dynamic_network(), [],
                              {"bosh": {"mbus": {"cert": old}}})
        assert mbus.send(old["ca"], "ping") == {"value": "pong"}
        with pytest.raises(urllib.error.HTTPError) as denied:
            Mbus(port, password="wrong").send(old["ca"], "ping")
        assert denied.value.code == 401
        assert "unknown message" in mbus.send(old["ca"], "fetch_logs")["exception"]["message"]
        first = supervised(local, vm_cid)["agent_pid"]

        sent = time.monotonic()
        task = mbus.send(old["ca"], "update_settings", {"mbus": {"cert": new, "urls": []}, "trusted_certs": ""})
        assert task["value"]["state"] == "running"
        task_id = task["value"]["agent_task_id"]
        # the agent exited on purpose; the supervisor started it again with the new certificate
        until(lambda: mbus.answers(new["ca"], "get_task", task_id) == {"value": "ok"}, 10,
              "the agent did not come back with the new certificate")
        back = time.monotonic() - sent
        assert back < 3, back
        state = supervised(local, vm_cid)
        assert state["restarts"] == 1 and state["last_exit"]["code"] == 0 and state["state"] == "running"
        assert not pid_alive(first) and pid_alive(state["agent_pid"])
        assert [b["pid"] for b in boots(local, vm_cid)] == [first, state["agent_pid"]]
        assert mbus.answers(old["ca"], "ping") is None  # the old certificate is gone
        saved = json.loads((local.vm_dir(vm_cid) / "bosh" / "update_settings.json").read_text())
        assert saved["mbus"]["cert"] == new
        assert (local.vm_dir(vm_cid) / "bosh" / "update_settings.json").stat().st_mode & 0o077 == 0
        log = (local.vm_dir(vm_cid) / "supervisor.log").read_text()
        assert "agent exited (code 0)" in log and "restart 1 in 0.10s" in log

        # the same settings again need no restart: the task is done at once
        again = mbus.send(new["ca"], "update_settings", {"mbus": {"cert": new, "urls": []}, "trusted_certs": ""})
        assert again["value"]["state"] == "done"
        assert supervised(local, vm_cid)["restarts"] == 1

        local.cpi("delete_vm", vm_cid)
        assert marked_processes(local.state_dir) == []
        assert mbus.answers(new["ca"], "ping") is None
    finally:
        local.cleanup()
