"""A secret scan over a debug-level lifecycle on every cloud.

Secrets are planted where a director and an operator put them — the config (mbus URL,
blobstore credentials under many key names), the request (env.bosh.password, the mbus
certificate's key, blobstores, context keys) — in many shapes: with quotes and
backslashes (escaped by JSON and repr()), longer than any message keeps, in lists, in
URLs. Then every byte the CPI writes (stdout and stderr, success and error paths, debug
level) is searched for each secret, its escaped forms and the head of the long ones.
"""

from __future__ import annotations

import json
import uuid

from tests.support.runner import DIRECTOR_ENV, Cpi

QUOTED = 'q"u\\o\'ted-5e1f'
LONG = "L0ng-" + "s3cr3t" * 40  # 245 characters: past every cut a message makes
SECRETS = {
    "mbus": "mbus-pw-0a9d71",
    "blobstore_password": "blob-pw-77c1",
    "json_key": '{"type": "service_account", "private_key": "gcs-json-key-4c2e"}',
    "encryption_key": "enc-key-91bd",
    "auth": "auth-hdr-2b6f",
    "bosh_password": QUOTED,
    "cert_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIE-agent-key-6d03\n-----END RSA PRIVATE KEY-----",
    "long": LONG,
    "in_list": "listed-pw-8e44",
    "context_token": "ctx-token-3f90",
    "url_in_blobstore": "url-pw-c5a2",
}


def _forms(secret: str) -> set[str]:
    forms = {secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]}
    if len(secret) > 40:
        forms.add(secret[:24])  # the head of a long secret that a cut message could keep
    return forms


def _config(target, tmp_path):
    config = json.loads(target.config_path.read_text())
    properties = config["cloud"].setdefault("properties", {})
    agent = properties.setdefault("agent", {})
    agent["mbus"] = f"nats://nats:{SECRETS['mbus']}@127.0.0.1:4222"
    agent["blobstore"] = {"provider": "dav", "options": {
        "endpoint": f"https://blob:{SECRETS['url_in_blobstore']}@10.0.0.6:25250",
        "password": SECRETS["blobstore_password"], "json_key": SECRETS["json_key"],
        "encryption_key": SECRETS["encryption_key"], "auth": SECRETS["auth"],
        # in the config, so every call knows them, including those that quote them back
        "secret_key": SECRETS["long"], "passphrase": SECRETS["bosh_password"],
    }}
    path = tmp_path / f"cpi-secrets-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(config))
    return path


ENV = {"bosh": {
    "password": SECRETS["bosh_password"],
    "mbus": {"cert": {"ca": "public-ca", "certificate": "public-cert", "private_key": SECRETS["cert_key"]}},
    "blobstores": [{"provider": "s3", "options": {"secret_access_key": SECRETS["context_token"],
                                                  "credentials": [SECRETS["in_list"]]}}],
}}
CONTEXT = {"some_api_token": SECRETS["context_token"]}


def test_no_secret_in_any_output_of_a_debug_lifecycle(target, tmp_path):
    cpi = Cpi(_config(target, tmp_path), env=dict(DIRECTOR_ENV, CPI_LOG_LEVEL="debug"))
    outputs: list[str] = []

    def call(method, *arguments, **kw):
        response = cpi.call(method, *arguments, context=CONTEXT, **kw)
        outputs.append(response.raw)
        outputs.append(response.stderr)
        return response

    stemcell_cid = call("create_stemcell", *target.stemcell_args()).result
    vm_cid = call("create_vm", f"agent-{uuid.uuid4()}", stemcell_cid, target.vm_cloud_properties(),
                  target.dynamic_network(), [], ENV).result[0]
    disk_cid = call("create_disk", 1024, target.disk_cloud_properties(), vm_cid).result
    call("attach_disk", vm_cid, disk_cid)
    call("set_vm_metadata", vm_cid, {"director": "d", "deployment": "dep", "name": "ig/0"})
    # error paths whose messages quote the request: every value shown must be masked
    bad_props = call("create_disk", 1024, {"type": QUOTED + LONG, "zzz_unknown": QUOTED}, vm_cid)
    assert bad_props.error is not None
    bad_vm = call("create_vm", "agent-x", stemcell_cid, {"zzz_unknown": SECRETS["in_list"], "cpu": LONG},
                  target.dynamic_network(), [], ENV)
    assert bad_vm.error is not None
    call("has_vm", f"vm-{LONG}")
    call("detach_disk", vm_cid, disk_cid)
    call("delete_vm", vm_cid)
    call("delete_disk", disk_cid)
    call("delete_stemcell", stemcell_cid)
    everything = "\n".join(outputs)
    assert "<redacted>" in everything  # the scan looks at real output
    for name, secret in SECRETS.items():
        for form in _forms(secret):
            assert form not in everything, f"secret {name} leaked as {form!r}"


def test_agent_output_quoted_in_an_error_is_masked(tmp_path):
    """A VM process that dies while booting has its last ERROR line quoted in
    VMCreationFailed; an agent that prints its settings prints every secret they hold."""
    script = 'echo "ERROR - refusing settings: $(tr -d "\\n" < "$2/cpi-agent-env.json")"; exit 1'
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(tmp_path / "state"), "agent_command": ["/bin/sh", "-c", script, "agent"]},
        "agent": {"mbus": f"nats://nats:{SECRETS['mbus']}@127.0.0.1:4222",
                  "blobstore": {"provider": "dav", "options": {"password": SECRETS["blobstore_password"]}}}}}}))
    image = tmp_path / "image"
    image.write_bytes(b"x")
    cpi = Cpi(config, env=dict(DIRECTOR_ENV, CPI_LOG_LEVEL="debug"))
    stemcell_cid = cpi("create_stemcell", str(image), {})
    response = cpi.call("create_vm", "agent-1", stemcell_cid, {}, {"n": {"type": "dynamic"}}, [], ENV)
    assert response.error["type"] == "Bosh::Clouds::VMCreationFailed"
    assert "refusing settings" in response.error["message"] and "<redacted>" in response.error["message"]
    for name in ("mbus", "blobstore_password", "bosh_password", "cert_key", "in_list", "context_token"):
        for form in _forms(SECRETS[name]):
            assert form not in response.raw and form not in response.stderr, f"{name} leaked as {form!r}"
    for name in ("mbus", "blobstore_password", "in_list", "context_token"):  # no head left by a cut either
        assert SECRETS[name][:8] not in response.raw and SECRETS[name][:8] not in response.stderr, name
