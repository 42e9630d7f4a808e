"""A secret scan over a debug-level lifecycle on every cloud (tests/lifecycle/debug_run.py):
every byte the CPI writes (stdout and stderr, success and error paths, debug level) is
searched for each secret, its escaped forms and the head of the long ones.
"""

from __future__ import annotations

import json

from tests.lifecycle.debug_run import ENV, SECRETS, forms
from tests.support.runner import DIRECTOR_ENV, Cpi


def test_no_secret_in_any_output_of_a_debug_lifecycle(debug_lifecycle):
    everything = debug_lifecycle.outputs()
    assert "<redacted>" in everything  # the scan looks at real output
    for name, secret in SECRETS.items():
        for form in forms(secret):
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
        for form in forms(SECRETS[name]):
            assert form not in response.raw and form not in response.stderr, f"{name} leaked as {form!r}"
    for name in ("mbus", "blobstore_password", "in_list", "context_token"):  # no head left by a cut either
        assert SECRETS[name][:8] not in response.raw and SECRETS[name][:8] not in response.stderr, name
