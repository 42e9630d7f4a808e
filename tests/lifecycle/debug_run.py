"""One lifecycle at debug level on a cloud, with secrets planted where a director and an
operator put them and traces on, run once per cloud (the `debug_lifecycle` fixture) for two
scans: test_secrets.py searches every byte it wrote for the secrets, test_traces.py reads
the traces the collector received.

Secrets are planted in the config (mbus URL, blobstore credentials under many key names,
the tracing collector's API key), the request (env.bosh.password, the mbus certificate's
key, blobstores, context keys) — in many shapes: with quotes and backslashes (escaped by
JSON and repr()), longer than any message keeps, in lists, in URLs.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from tests.support.otlp import Collector
from tests.support.runner import DIRECTOR_ENV, Cpi, Response

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
    "tracing_header": "otel-key-19ae",
}


def forms(secret: str) -> set[str]:
    forms = {secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]}
    if len(secret) > 40:
        forms.add(secret[:24])  # the head of a long secret that a cut message could keep
    return forms


def _config(target, tmp_path, collector_url: str):
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
    # traces on, to a collector that needs an API key in a header (tests/lifecycle/test_traces.py)
    properties["tracing"] = {"endpoint": collector_url, "headers": {"x-api-key": SECRETS["tracing_header"]}}
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


@dataclass
class Run:
    """What one debug lifecycle on a cloud gave: every response in order, and the
    collector that received its traces."""

    calls: list[tuple[str, Response]] = field(default_factory=list)
    collector: Collector | None = None
    cids: dict[str, str] = field(default_factory=dict)

    def outputs(self) -> str:
        return "\n".join(response.raw + "\n" + response.stderr for _, response in self.calls)


def run(target, tmp_path, collector: Collector) -> Run:
    """A lifecycle at debug level with traces on, error paths included."""
    cpi = Cpi(_config(target, tmp_path, collector.url), env=dict(DIRECTOR_ENV, CPI_LOG_LEVEL="debug"))
    done = Run(collector=collector)

    def call(method, *arguments, **kw):
        response = cpi.call(method, *arguments, context=CONTEXT, **kw)
        done.calls.append((method, response))
        return response

    stemcell_cid = call("create_stemcell", *target.stemcell_args()).result
    vm_cid = call("create_vm", f"agent-{uuid.uuid4()}", stemcell_cid, target.vm_cloud_properties(),
                  target.dynamic_network(), [], ENV).result[0]
    disk_cid = call("create_disk", 1024, target.disk_cloud_properties(), vm_cid).result
    done.cids = {"stemcell_cid": stemcell_cid, "vm_cid": vm_cid, "disk_cid": disk_cid}
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
    return done
