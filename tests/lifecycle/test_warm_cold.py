"""On every cloud, a call handed to the warm helper (bin/cpi's default) answers exactly as
the same call made cold (CPI_HELPER_IDLE_TIMEOUT=0): the same exit status, stdout and
stderr, byte for byte once times, durations, the cloud's random ids and request ids are
set aside. tests/conformance/test_warm.py does a whole local lifecycle and the helper's
failure modes; this is the cross-cloud check, on a disk's life (no VM: it stays cheap)."""

from __future__ import annotations

import json
import subprocess
import time

from tests.support.normalize import normalized
from tests.support.runner import BIN_CPI, COLD_ENV, check_envelope, helper_action

WARM_ENV = {**COLD_ENV, "CPI_HELPER_IDLE_TIMEOUT": "120"}


def call(target, env: dict, method: str, *arguments) -> tuple[tuple[int, bytes, bytes], dict]:
    proc = subprocess.run([str(BIN_CPI), str(target.cpi.config_path)],
                          input=json.dumps(target.cpi.request(method, *arguments)).encode(),
                          capture_output=True, env=env, cwd="/", timeout=300)
    doc = json.loads(proc.stdout)
    check_envelope(doc)
    return (proc.returncode, normalized(proc.stdout), normalized(proc.stderr)), doc


def disk_life(target, env: dict) -> list[tuple[int, bytes, bytes]]:
    seen = []

    def step(method, *arguments):
        outcome, doc = call(target, env, method, *arguments)
        seen.append(outcome)
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
    return seen


def test_a_warm_call_answers_as_the_cold_one_on_every_cloud(target):
    call(target, COLD_ENV, "has_disk", "disk-warming-up")  # what a first call caches (a token) is there for both
    deadline = time.monotonic() + 60
    while helper_action("running") != "True":  # a cold call with the helper on starts it
        assert time.monotonic() < deadline, "the warm helper did not start"
        call(target, WARM_ENV, "has_disk", "disk-warming-up")
        time.sleep(0.3)
    cold, warm = disk_life(target, COLD_ENV), disk_life(target, WARM_ENV)
    assert len(cold) == len(warm)
    for number, (c, w) in enumerate(zip(cold, warm)):
        assert c == w, f"call {number}:\ncold {c}\nwarm {w}"
    assert helper_action("running") == "True"
