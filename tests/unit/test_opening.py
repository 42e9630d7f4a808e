"""cpi.opening: the one way from cpi.json to a cloud, for the wire and the operator's
commands. The cloud is made on first use only, so the wire's `info` and `ping` never make
one, and what the wire and a command make is the same."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cpi import backoff, opening, plan
from cpi.errors import CpiError
from tests.support.runner import ROOT


def local(tmp_path, **extra) -> dict:
    return {"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(tmp_path / "state")}, **extra}}}


def test_the_cloud_is_made_on_first_use_with_the_context(tmp_path):
    ready = opening.open_cloud(local(tmp_path), {"request_id": "r-1", "director_uuid": "d-1"})
    assert ready.config.plugin == "local" and ready.context.request_id == "r-1"
    assert ready._cloud is None
    cloud = ready.cloud
    assert cloud is ready.cloud and cloud.context.director_uuid == "d-1"


def test_the_throttle_is_configured_as_the_config_says(tmp_path):
    try:
        opening.open_cloud(local(tmp_path, throttle={"max_retry_after": 7}), {})
        assert backoff.max_retry_after() == 7
    finally:
        backoff.configure(None)


def test_a_bad_config_is_refused_before_anything_is_made(tmp_path):
    with pytest.raises(CpiError, match=r"cloud\.properties\.local"):
        opening.open_cloud({"cloud": {"plugin": "local", "properties": {"local": {"lock_timeout": "soon"}}}}, {})


def test_a_plan_reaches_the_cloud_only_from_cpi_plan_never_from_the_request(tmp_path):
    """The plan travels with the call (cpi.channel): what `cpi plan` hands the opening is
    the channel of the cloud's session; no key of a request's context can plan a call."""
    planned = plan.Plan()
    cloud = opening.open_cloud(local(tmp_path), {}, planned).cloud
    assert cloud.context.plan is planned and cloud.session.channel.plan is planned
    forged = opening.open_cloud(local(tmp_path), {"plan": {"steps": []}, "_plan": "x", "strict": True,
                                                  "_strict": True}).cloud
    assert forged.context.plan is None and forged.session.channel.plan is None
    assert forged.context.strict is False  # validation.strict comes from cpi.json alone


def test_under_a_plan_a_cloud_that_cannot_plan_is_refused(tmp_path, monkeypatch):
    from cpi.clouds.local import LocalCloud

    monkeypatch.setattr(LocalCloud, "can_plan", False, raising=False)
    with pytest.raises(plan.Refused, match="cannot withhold its writes"):
        opening.open_cloud(local(tmp_path), {}, plan.Plan())


def test_the_wire_answers_ping_and_info_without_making_the_cloud(tmp_path):
    """In a process of its own: rpc.handle routes the `logging` tree into its call log."""
    script = (
        "import io, json, sys\n"
        "from cpi import opening, rpc\n"
        "from cpi.logs import CallLog\n"
        "def made(self):\n"
        "    raise AssertionError('the cloud was made')\n"
        "opening.Opening.cloud = property(made)\n"
        "for method in ('ping', 'info'):\n"
        "    request = json.dumps({'method': method, 'arguments': [], 'context': {}}).encode()\n"
        "    print(json.dumps(rpc.handle(request, sys.argv[1], CallLog(io.StringIO()))))\n"
    )
    config = tmp_path / "cpi.json"
    config.write_text(json.dumps(local(tmp_path)))
    run = subprocess.run([sys.executable, "-c", script, str(config)], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert next(json.loads(line) for line in run.stdout.splitlines()) == "pong"
    assert not (tmp_path / "state").exists()
