"""On every cloud, a call handed to the warm helper (bin/cpi's default) answers exactly as
the same call made cold (CPI_HELPER_IDLE_TIMEOUT=0): the same exit status, stdout and
stderr, byte for byte once times, durations, the cloud's random ids and request ids are
set aside. tests/conformance/test_warm.py does a whole local lifecycle and the helper's
failure modes; this is the cross-cloud check, on a disk's life (no VM: it stays cheap)."""

from __future__ import annotations

import json
import re
import subprocess

from tests.support.normalize import normalized
from tests.support.runner import BIN_CPI, COLD_ENV, WARM_ENV, check_envelope, helper_action, start_helper


def call(target, env: dict, method: str, *arguments) -> tuple[tuple[int, bytes, bytes], dict, float]:
    """One bin/cpi call: (exit status, stdout, stderr) normalized, the response, and the
    time the call says it took ("done in", from the moment the process began serving it)."""
    proc = subprocess.run([str(BIN_CPI), str(target.cpi.config_path)],
                          input=json.dumps(target.cpi.request(method, *arguments)).encode(),
                          capture_output=True, env=env, cwd="/", timeout=300)
    doc = json.loads(proc.stdout)
    check_envelope(doc)
    took = float(re.findall(rb"done in (\d+\.\d+)s", proc.stderr)[-1])
    return (proc.returncode, normalized(proc.stdout), normalized(proc.stderr)), doc, took


def disk_life(target, env: dict) -> tuple[list[tuple[int, bytes, bytes]], float]:
    """A disk's life, errors included: each call's outcome, and the time they took in all."""
    seen, took = [], 0.0

    def step(method, *arguments):
        nonlocal took
        outcome, doc, seconds = call(target, env, method, *arguments)
        seen.append(outcome)
        took += seconds
        return doc["result"]

    disk_cid = step("create_disk", 1024, target.disk_cloud_properties(), None)
    try:
        step("has_disk", disk_cid)
        step("set_disk_metadata", disk_cid, {"director": "d", "deployment": "warm-or-cold"})
        step("detach_disk", "vm-not-there", disk_cid)  # an error, with its type and message
        step("create_disk", -1, {}, None)  # refused before the cloud is asked
        step("nope")
    finally:
        step("delete_disk", disk_cid)
    step("has_disk", disk_cid)
    return seen, took


def test_a_warm_call_answers_as_the_cold_one_on_every_cloud(target):
    call(target, COLD_ENV, "has_disk", "disk-warming-up")  # what a first call caches (a token) is there for both
    start_helper(target.cpi.config_path)
    (cold, cold_took), (warm, warm_took) = disk_life(target, COLD_ENV), disk_life(target, WARM_ENV)
    assert len(cold) == len(warm)
    for number, (c, w) in enumerate(zip(cold, warm, strict=True)):
        assert c == w, f"call {number}:\ncold {c}\nwarm {w}"
    # made by the helper, not cold again: a cold call spends its own first ~0.1-0.4 s
    # importing pydantic, the models and the cloud's SDK, which the helper's workers have
    assert helper_action("running") == "True"
    assert warm_took < cold_took, (warm_took, cold_took)
